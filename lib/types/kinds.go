package types

import (
	"fmt"
	"sort"
	"strings"
)

// Kind names.
const (
	KindNode            = "Node"
	KindProvider        = "Provider"
	KindEnvironment     = "Environment"
	KindMachineTemplate = "MachineTemplate"
	KindMachineSet      = "MachineSet"
	KindMachine         = "Machine"
	KindMachineClaim    = "MachineClaim"
	KindScheduledEvent  = "ScheduledEvent"
	KindAccessCode      = "AccessCode"
	KindSession         = "Session"
	KindUser            = "User"
	KindToken           = "Token"
)

var constructors = map[string]func() Object{
	KindNode:            func() Object { return &Node{} },
	KindProvider:        func() Object { return &Provider{} },
	KindEnvironment:     func() Object { return &Environment{} },
	KindMachineTemplate: func() Object { return &MachineTemplate{} },
	KindMachineSet:      func() Object { return &MachineSet{} },
	KindMachine:         func() Object { return &Machine{} },
	KindMachineClaim:    func() Object { return &MachineClaim{} },
	KindScheduledEvent:  func() Object { return &ScheduledEvent{} },
	KindAccessCode:      func() Object { return &AccessCode{} },
	KindSession:         func() Object { return &Session{} },
	KindUser:            func() Object { return &User{} },
	KindToken:           func() Object { return &Token{} },
}

// Kinds returns every kind name, sorted.
func Kinds() []string {
	out := make([]string, 0, len(constructors))
	for k := range constructors {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// New returns an empty object of kind, with its kind set.
func New(kind string) (Object, error) {
	c, ok := constructors[kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	o := c()
	setKind(o, kind)
	return o, nil
}

// Plural returns the REST collection name of kind: "MachineClaim" -> "machineclaims".
func Plural(kind string) string { return strings.ToLower(kind) + "s" }

// KindForPlural maps a REST collection name (or a lower-case singular, as the CLI
// accepts) back to its kind.
func KindForPlural(p string) (string, bool) {
	p = strings.ToLower(p)
	for k := range constructors {
		lk := strings.ToLower(k)
		if p == lk+"s" || p == lk {
			return k, true
		}
	}
	return "", false
}

// TypeMeta holds the apiVersion and kind fields every object has in JSON.
type TypeMeta struct {
	// APIVersion is APIVersion on every object hf returns; a client may send
	// it or leave it out.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
}

// GetKind returns the kind.
func (t *TypeMeta) GetKind() string { return t.Kind }

// SetKind sets o's kind field (as New does), for an object decoded from
// parts that do not carry it.
func SetKind(o Object, kind string) { setKind(o, kind) }

func setKind(o Object, kind string) {
	if k, ok := o.(interface{ setKind(string) }); ok {
		k.setKind(kind)
	}
}

func (t *TypeMeta) setKind(k string) { t.APIVersion, t.Kind = APIVersion, k }

// check is shared by every Validate: an object must say its own kind, and
// the model's apiVersion if any.
func (t *TypeMeta) check(want string) error {
	if t.Kind != want {
		return Invalid("kind", "must be %q, got %q", want, t.Kind)
	}
	if t.APIVersion != "" && t.APIVersion != APIVersion {
		return Invalid("apiVersion", "must be %q or absent, got %q", APIVersion, t.APIVersion)
	}
	return nil
}

// Upgrade moves what o holds under earlier field names (as the previous
// release wrote them, or a client of it sends them) to the fields of
// today. The store calls it on every object it decodes, the API on every
// body.
func Upgrade(o Object) {
	if u, ok := o.(interface{ Upgrade() }); ok {
		u.Upgrade()
	}
}

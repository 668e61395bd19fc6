package cloud

import (
	"context"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// The ownership keys every instance carries from its creation on (EC2 tags
// "hf/<key>", GCE labels "hf-<key>"), so a restarted node finds its own
// instances, even one whose Allocate it never saw end.
const (
	keyNode     = "node"
	keyInstance = "instance"
	keyMachine  = "machine"
	keyClaim    = "claim"
	// keyMachineSet names a pool machine's set, which it carries instead of
	// a claim (see types.MetaMachineSet).
	keyMachineSet = "machineset"
	keyTemplate   = "template"
	// keyKeyPair names the key pair generated for an aws instance.
	keyKeyPair = "key_pair"
)

// owner is the node and driver instance that own instances.
type owner struct{ node, instance string }

// vm is what a provider reads back of one instance.
type vm struct {
	ID        string
	Name      string
	Phase     types.MachinePhase
	State     string // the provider's own word for it
	PrivateIP string
	PublicIP  string
	Zone      string
	Type      string
	Image     string
	KeyName   string  // aws: the instance's key pair
	VCPUs     float64 // 0: the cloud did not say
	Launched  time.Time
	// Keys are hf's ownership keys (node, instance, machine, ...).
	Keys map[string]string
	// Resources is what the template declared, recorded at creation.
	Resources types.Resources
}

// createSpec is one instance to create.
type createSpec struct {
	Name  string
	Token string // idempotency token: a retried create makes no second instance
	Keys  map[string]string
	// Meta is the claim metadata the template lets through, as data.
	Meta      map[string]string
	Resources types.Resources
	// Template is the provider's parsed template entry.
	Template any
}

// usage is a reading of the provider's own quota: what the account may run
// and what others (not this driver instance) run of it. A negative limit
// means the provider does not say.
type usage struct {
	LimitVCPUs     float64
	LimitInstances float64
	OtherVCPUs     float64
	OtherInstances float64
}

// provider is one cloud's API behind the driver. Every method is safe for
// concurrent use and takes the caller's ctx; errors wrap drivers.ErrNotFound
// for an instance that is gone and drivers.ErrNoCapacity for a cloud that has
// no room.
type provider interface {
	// parseTemplate decodes and checks a template entry without calls.
	parseTemplate(raw []byte) (any, error)
	// checkTemplate checks what only the cloud knows (the image exists) and
	// returns the entry with it resolved (the image id of a filter).
	checkTemplate(ctx context.Context, tc any) (any, error)
	// create starts an instance tagged with spec.Keys and returns its id
	// and machine information only the create knows (a generated key
	// pair's private key: never to be logged).
	create(ctx context.Context, spec createSpec) (string, map[string]string, error)
	// get reads one instance; drivers.ErrNotFound once it is gone.
	get(ctx context.Context, id string) (vm, error)
	// remove starts deleting an instance; gone already is success.
	remove(ctx context.Context, id string) error
	// list returns the instances o owns that are not gone.
	list(ctx context.Context, o owner) ([]vm, error)
	// leftovers lists the names of the instances for which o holds
	// something besides the instance itself (aws: a generated key pair),
	// whether or not the instance still exists.
	leftovers(ctx context.Context, o owner) ([]string, error)
	// cleanup removes what o made for the instance called name besides the
	// instance (aws: its generated key pair); nothing there is success.
	cleanup(ctx context.Context, o owner, name string) error
	// quota reads the cloud's quota and what others use of it.
	quota(ctx context.Context, o owner) (usage, error)
	// console reads the instance's console output, as much of it as the
	// cloud keeps (aws: the last 64 KB; gce: the last 1 MB of serial port
	// 1); drivers.ErrNotFound once the instance is gone.
	console(ctx context.Context, id string) (string, error)
}

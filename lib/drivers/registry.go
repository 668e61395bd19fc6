package drivers

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Registry maps driver types to the factories that build them. It is a value the
// node builds and passes around (no global registration), and it is safe for
// concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{factories: map[string]Factory{}}
}

// Register adds the factory for driverType. A type may be registered once.
func (r *Registry) Register(driverType string, f Factory) error {
	if strings.TrimSpace(driverType) == "" {
		return errors.New("register driver: empty driver type")
	}
	if f == nil {
		return fmt.Errorf("register driver %q: nil factory", driverType)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.factories[driverType]; ok {
		return fmt.Errorf("register driver %q: already registered", driverType)
	}
	r.factories[driverType] = f
	return nil
}

// New builds an unprepared driver of driverType. An empty env.Instance becomes
// driverType and a nil env.Log a logger that discards everything. The error for
// an unknown type wraps ErrUnknownType and lists the known types.
func (r *Registry) New(driverType string, env Env) (Driver, error) {
	r.mu.RLock()
	f, ok := r.factories[driverType]
	r.mu.RUnlock()
	if !ok {
		known := r.Types()
		list := "none"
		if len(known) > 0 {
			list = strings.Join(known, ", ")
		}
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownType, driverType, list)
	}
	d := f(env.Defaults(driverType))
	if d == nil {
		return nil, fmt.Errorf("new driver %q: factory returned nil", driverType)
	}
	return d, nil
}

// Types returns the registered driver types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.factories))
	for k := range r.factories {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package types

import (
	"encoding/json"
	"math"
)

// Resources is an amount of CPU, RAM and disk.
type Resources struct {
	CPU    float64 `json:"cpu"`
	RAMGB  float64 `json:"ramGB"`
	DiskGB float64 `json:"diskGB,omitempty"`
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{CPU: r.CPU + o.CPU, RAMGB: r.RAMGB + o.RAMGB, DiskGB: r.DiskGB + o.DiskGB}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{CPU: r.CPU - o.CPU, RAMGB: r.RAMGB - o.RAMGB, DiskGB: r.DiskGB - o.DiskGB}
}

// MaxResourceAmount bounds each amount a machine may ask for (CPUs, GB):
// far above any host or cloud machine, low enough that a slip such as 1e308
// is refused rather than waited on, and that every figure prints plainly.
const MaxResourceAmount = 1_000_000

// Validate checks that every amount is a finite number from 0 to
// MaxResourceAmount.
func (r Resources) Validate(field string) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"cpu", r.CPU}, {"ramGB", r.RAMGB}, {"diskGB", r.DiskGB}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > MaxResourceAmount {
			return Invalid(field+"."+f.name, "must be a number from 0 to %d", MaxResourceAmount)
		}
	}
	return nil
}

// Endpoint is one way to connect to a machine.
type Endpoint struct {
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
}

// Resource is what a driver holds for one machine: its id in the driver, the
// facts it reports and private data it needs to find the thing again.
type Resource struct {
	// ID identifies the resource within its driver instance (user, container, VM id).
	ID string `json:"id"`
	// Driver is the driver instance that holds it.
	Driver string `json:"driver"`
	// Info is machine information shown to users (IP, user name, ...).
	Info map[string]string `json:"info,omitempty"`
	// Endpoints are the connect endpoints.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Resources are what the machine takes from its host.
	Resources Resources `json:"resources"`
	// Data is the driver's private state for the resource.
	Data json.RawMessage `json:"data,omitempty"`
}

// AtLeast is r with each of CPU and RAMGB raised to min's where below it:
// the least a machine counts for (a template of cpu 0 would pack without
// end). A zero min leaves r as it is.
func (r Resources) AtLeast(min Resources) Resources {
	r.CPU = math.Max(r.CPU, min.CPU)
	r.RAMGB = math.Max(r.RAMGB, min.RAMGB)
	return r
}

// Mover makes a copy's parts: its strings (strings do not change: return
// them as they are to share them, or an intern table's copy to move them)
// and its byte slices (never b itself, nil for nil; a mover may hand equal
// data one shared copy, which is then read only, as a Resource's Data is).
type Mover interface {
	String(s string) string
	Bytes(b []byte) []byte
}

// Copy returns a deep copy of r, sharing no map, slice or data with it, its
// strings and data made by m.
func (r Resource) Copy(m Mover) Resource {
	c := Resource{ID: m.String(r.ID), Driver: m.String(r.Driver), Resources: r.Resources, Data: m.Bytes(r.Data)}
	if r.Info != nil {
		c.Info = make(map[string]string, len(r.Info))
		for k, v := range r.Info {
			c.Info[m.String(k)] = m.String(v)
		}
	}
	if r.Endpoints != nil {
		c.Endpoints = make([]Endpoint, len(r.Endpoints))
		for i, e := range r.Endpoints {
			c.Endpoints[i] = Endpoint{Protocol: m.String(e.Protocol), Address: m.String(e.Address)}
		}
	}
	return c
}

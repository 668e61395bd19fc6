package cloud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// cleanupTimeout bounds removing what a failed allocation created; it runs on
// a context of its own, since the caller's may be what ended the allocation.
const cleanupTimeout = 2 * time.Minute

// Allocate implements drivers.Driver: it creates an instance tagged as this
// node's (in the create call), with the claim's declared metadata as data,
// and returns once it runs and has its private address. A cloud without room
// (insufficient capacity, a quota exceeded) or a quota of this driver that is
// reached is an error wrapping drivers.ErrNoCapacity: the claim is declined
// and waits. Whatever a failed allocation created is removed.
func (d *Driver) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	prov, common, err := d.state()
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	tc, err := d.templateConfig(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	meta = drivers.MachineEnv(t, nil, meta)
	spec := createSpec{
		Name:      instanceName(common.NamePrefix, meta[types.MetaMachine]),
		Meta:      meta,
		Resources: t.Spec.Resources,
		Template:  tc,
		Keys: map[string]string{
			keyNode: d.env.NodeName, keyInstance: d.env.Instance, keyMachine: meta[types.MetaMachine],
			keyClaim: meta[types.MetaClaim], keyMachineSet: meta[types.MetaMachineSet], keyTemplate: t.Metadata.Name,
		},
	}
	spec.Token = spec.Name
	d.capMu.Lock()
	err = d.cap.begin(d.now(), spec.Name, spec.Resources)
	d.capMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	id, secret, err := prov.create(ctx, spec)
	if err != nil {
		// A create the caller cancelled may still have happened in the cloud;
		// the instance stays in flight until it is looked for, so List
		// leaves its key pair alone meanwhile.
		d.removeByName(prov, spec.Name)
		d.created(spec.Name, "")
		if errors.Is(err, drivers.ErrNoCapacity) {
			d.noCapacity()
		}
		return nil, fmt.Errorf("allocate %s: %w", spec.Name, err)
	}
	d.created(spec.Name, id)
	// secret holds a private key: it goes into the resource, never a log.
	log := d.log.With("instance_id", id, "name", spec.Name, "template", t.Metadata.Name)
	v, err := d.waitRunning(ctx, prov, common, id)
	if err != nil {
		d.rollback(prov, id, spec.Name)
		return nil, fmt.Errorf("allocate %s (%s): %w", spec.Name, id, err)
	}
	log.Info("cloud instance running", "claim", meta[types.MetaClaim], "private_ip", v.PrivateIP)
	r := d.resourceOf(v, t.Spec.ConnectProtocols, tc)
	for k, val := range secret {
		r.Info[k] = val
	}
	return &r, nil
}

func (d *Driver) created(name, id string) {
	d.capMu.Lock()
	d.cap.created(name, id)
	d.capMu.Unlock()
}

// noCapacity records that the cloud has no room: for no_capacity_hold the
// driver reports itself full, so offers are declined without a cloud call.
func (d *Driver) noCapacity() {
	d.capMu.Lock()
	d.cap.fullUntil = d.now().Add(d.cap.hold)
	d.capMu.Unlock()
}

// waitRunning polls an instance until it runs with its private address.
func (d *Driver) waitRunning(ctx context.Context, prov provider, common Common, id string) (vm, error) {
	ctx, cancel := context.WithTimeout(ctx, common.CreateTimeout.Duration)
	defer cancel()
	tick := time.NewTicker(common.PollInterval.Duration)
	defer tick.Stop()
	for {
		v, err := prov.get(ctx, id)
		switch {
		case errors.Is(err, drivers.ErrNotFound):
			return vm{}, errors.New("the instance vanished while starting")
		case err != nil && ctx.Err() == nil:
			d.log.Debug("read starting instance", "instance_id", id, "err", err)
		case err != nil:
		case v.Phase == types.MachineRunning && v.PrivateIP != "":
			return v, nil
		case v.Phase != types.MachineProvisioning && v.Phase != types.MachineRunning:
			return vm{}, fmt.Errorf("the instance stopped while starting (state %s)", v.State)
		}
		select {
		case <-ctx.Done():
			return vm{}, fmt.Errorf("wait for the instance to run: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// rollback removes an instance a failed allocation created, and what was
// made for it (its key pair).
func (d *Driver) rollback(prov provider, id, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	d.cleanup(ctx, prov, name)
	if err := prov.remove(ctx, id); err != nil {
		// The node's start reconcile finds it by its tags and releases it.
		d.log.Warn("remove failed instance", "instance_id", id, "err", err)
		return
	}
	d.forget(id)
}

// removeByName removes this driver's instance called name, if the cloud
// made one although the create call failed, and what was made for it.
func (d *Driver) removeByName(prov provider, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	vms, err := prov.list(ctx, d.owner())
	if err != nil {
		d.log.Warn("look for a half-created instance", "name", name, "err", err)
	}
	found := false
	for _, v := range vms {
		if v.Name == name {
			d.rollback(prov, v.ID, name)
			found = true
		}
	}
	if !found {
		d.cleanup(ctx, prov, name)
	}
}

// cleanup removes what was made for the instance called name besides the
// instance; what it cannot remove, the next List finds and removes.
func (d *Driver) cleanup(ctx context.Context, prov provider, name string) {
	if name == "" {
		return
	}
	if err := prov.cleanup(ctx, d.owner(), name); err != nil {
		d.log.Warn("remove what an instance left", "name", name, "err", err)
	}
}

func (d *Driver) forget(id string) {
	d.capMu.Lock()
	delete(d.cap.held, id)
	d.capMu.Unlock()
	d.meterMu.Lock()
	delete(d.meters, id)
	d.meterMu.Unlock()
}

// Status implements drivers.Driver from the cloud's state of the instance:
// pending is Provisioning, running Running, stopping or stopped Failed
// (hf never stops a VM), shutting down Terminating; gone, or not this
// node's, is drivers.ErrNotFound.
func (d *Driver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	if r == nil {
		return "", errors.New("status: nil resource")
	}
	prov, _, err := d.state()
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	v, err := d.getOwn(ctx, prov, r.ID)
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	return v.Phase, nil
}

// getOwn reads an instance; one that is gone or not this driver's is
// drivers.ErrNotFound.
func (d *Driver) getOwn(ctx context.Context, prov provider, id string) (vm, error) {
	if id == "" {
		return vm{}, drivers.ErrNotFound
	}
	v, err := prov.get(ctx, id)
	if err != nil {
		return vm{}, err
	}
	if v.Keys[keyNode] != d.env.NodeName || v.Keys[keyInstance] != d.env.Instance {
		return vm{}, fmt.Errorf("%w: instance %s is not this driver's", drivers.ErrNotFound, id)
	}
	return v, nil
}

// Deallocate implements drivers.Driver: it deletes the instance (with its
// boot disk) and waits until the cloud reports it gone. Gone already is
// not an error; an instance of another node is left alone.
func (d *Driver) Deallocate(ctx context.Context, r *types.Resource) error {
	if r == nil {
		return errors.New("deallocate: nil resource")
	}
	prov, common, err := d.state()
	if err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	v, err := d.getOwn(ctx, prov, r.ID)
	if errors.Is(err, drivers.ErrNotFound) {
		d.forget(r.ID)
		// A generated key pair is named after the instance; cleanup finds only
		// this driver's by its tags, never a shared key_name.
		d.cleanup(ctx, prov, r.Info["key_name"])
		return nil
	} else if err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	if err := prov.remove(ctx, r.ID); err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, common.DeleteTimeout.Duration)
	defer cancel()
	tick := time.NewTicker(common.PollInterval.Duration)
	defer tick.Stop()
	for {
		_, err := prov.get(ctx, r.ID)
		if errors.Is(err, drivers.ErrNotFound) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deallocate %s: wait for the instance to be gone: %w", r.ID, ctx.Err())
		case <-tick.C:
		}
	}
	d.forget(r.ID)
	if v.Keys[keyKeyPair] != "" {
		if err := prov.cleanup(ctx, d.owner(), v.Keys[keyKeyPair]); err != nil {
			return fmt.Errorf("deallocate %s: %w", r.ID, err)
		}
	}
	d.log.Info("cloud instance deleted", "instance_id", r.ID, "name", v.Name)
	return nil
}

// List implements drivers.Driver: every instance tagged with this node and
// driver instance that is not gone, in any state, sorted by id.
func (d *Driver) List(ctx context.Context) ([]types.Resource, error) {
	prov, _, err := d.state()
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	// Leftovers are read before the instances, and the allocations in flight
	// in between: one whose instance is not listed yet is in flight then.
	leftovers, lerr := prov.leftovers(ctx, d.owner())
	d.capMu.Lock()
	inflight := maps.Clone(d.cap.inflight)
	d.capMu.Unlock()
	vms, err := prov.list(ctx, d.owner())
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	d.capMu.Lock()
	d.cap.sync(vms)
	d.capMu.Unlock()
	if lerr != nil {
		d.log.Warn("list what instances left", "err", lerr)
	}
	d.sweep(ctx, prov, leftovers, inflight, vms)
	out := make([]types.Resource, 0, len(vms))
	for _, v := range vms {
		out = append(out, d.resourceOf(v, nil, nil))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// sweep removes the leftovers (generated key pairs) of instances that are
// gone and not in flight: those of a node killed before it could clean up.
func (d *Driver) sweep(ctx context.Context, prov provider, leftovers []string, inflight map[string]types.Resources, vms []vm) {
	live := map[string]bool{}
	for _, v := range vms {
		live[v.Name] = true
	}
	for _, name := range leftovers {
		if _, busy := inflight[name]; busy || live[name] {
			continue
		}
		d.log.Info("removing what a gone instance left", "name", name)
		d.cleanup(ctx, prov, name)
	}
}

// resourceData is the driver's private part of a resource.
type resourceData struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
	Zone     string `json:"zone,omitempty"`
}

// resourceOf is the driver's Resource for an instance: machine information
// and, with the template entry, a connect endpoint per protocol it knows a
// port of (on the public address, else the private one).
func (d *Driver) resourceOf(v vm, protocols []string, tc any) types.Resource {
	info := map[string]string{"provider": d.kind, "instance_id": v.ID, "name": v.Name, "state": v.State}
	for k, val := range map[string]string{"private_ip": v.PrivateIP, "public_ip": v.PublicIP, "zone": v.Zone,
		"instance_type": v.Type, "image": v.Image, "key_name": v.KeyName} {
		if val != "" {
			info[k] = val
		}
	}
	if v.PublicIP != "" {
		info["ip"] = v.PublicIP
	} else if v.PrivateIP != "" {
		info["ip"] = v.PrivateIP
	}
	data, _ := json.Marshal(resourceData{Provider: d.kind, Name: v.Name, Zone: v.Zone})
	return types.Resource{ID: v.ID, Driver: d.env.Instance, Info: info, Resources: v.Resources, Data: data,
		Endpoints: endpoints(info["ip"], protocols, tc)}
}

// ported is a resolved template entry that knows its connect ports.
type ported interface{ portMap() map[string]int }

func endpoints(ip string, protocols []string, tc any) []types.Endpoint {
	p, ok := tc.(ported)
	if ip == "" || !ok {
		return nil
	}
	var out []types.Endpoint
	for _, proto := range protocols {
		if n, ok := port(p.portMap(), proto); ok {
			out = append(out, types.Endpoint{Protocol: proto, Address: net.JoinHostPort(ip, strconv.Itoa(n))})
		}
	}
	return out
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// instanceName is prefix + the machine's name (lower-cased, cut to fit GCE's
// 63 characters) + a random suffix, so two allocations never share a name.
func instanceName(prefix, machine string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := strings.Trim(notName.ReplaceAllString(strings.ToLower(machine), "-"), "-")
	if base == "" {
		base = "vm"
	}
	if prefix == "" && (base[0] < 'a' || base[0] > 'z') {
		base = "vm-" + base
	}
	if room := 63 - len(prefix) - 7; len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	return prefix + base + "-" + hex.EncodeToString(b)
}

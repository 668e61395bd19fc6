package docker

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

const gib = 1 << 30

// Label keys, each prefixed with the label namespace and a dot.
const (
	labelNode      = "node"       // the node that owns the container
	labelInstance  = "instance"   // the driver instance on that node
	labelMachine   = "machine"    // the Machine (HF_MACHINE in the claim metadata)
	labelClaim     = "claim"      // the claim (HF_CLAIM)
	labelSet       = "machineset" // a pool machine's set (HF_MACHINESET), in place of the claim
	labelTemplate  = "template"   // the machine template's name
	labelImage     = "image"      // the image as the template names it
	labelResources = "resources"  // the template's resources, JSON
	labelEndpoints = "endpoints"  // the published ports and their protocols, JSON
	labelNetwork   = "network"    // on networks the driver created, and on containers: the network they joined
	labelUser      = "user"       // on a user's network (network_per_user): the user
)

// labels are the label keys of one namespace and the owner's values.
type labels struct {
	ns, node, instance string
}

func (l labels) key(k string) string { return l.ns + "." + k }

// filter is the label filter values ("key=value") that select this owner's
// containers.
func (l labels) filter() []string {
	return []string{l.key(labelNode) + "=" + l.node, l.key(labelInstance) + "=" + l.instance}
}

// owns reports whether a container with these labels belongs to this owner.
func (l labels) owns(got map[string]string) bool {
	return got[l.key(labelNode)] == l.node && got[l.key(labelInstance)] == l.instance
}

// endpointLabel is one entry of the endpoints label.
type endpointLabel struct {
	Port     string `json:"port"`
	Protocol string `json:"protocol"`
}

// createSpec is everything ContainerCreate takes.
type createSpec struct {
	Name       string
	Config     *container.Config
	HostConfig *container.HostConfig
	// Networking is nil: NetworkMode names the one network.
	Networking *network.NetworkingConfig
}

// specInput is what buildSpec needs besides the template.
type specInput struct {
	Labels labels
	// Network is the id of the network the container joins, NetworkName its
	// name (a label of the container).
	Network, NetworkName string
	ImageID              string
	// Suffix makes the container name unique ("a1b2c3d4"); random when empty.
	Suffix string
	// User is who the container runs as (checked: numeric); PidsLimit bounds
	// its processes (none when 0).
	User      string
	PidsLimit int64
}

// buildSpec turns a template, its parsed docker entry and the claim metadata
// into a container spec: limits from the template's resources, the declared
// metadata as environment (drivers.MachineEnv: the template's env wins over
// it), ownership labels,
// ports published on 127.0.0.1 at random host ports and labelled anonymous
// volumes.
func buildSpec(t types.MachineTemplate, tc TemplateConfig, meta map[string]string, in specInput) (createSpec, error) {
	ports, err := parsePorts(tc.Ports)
	if err != nil {
		return createSpec{}, err
	}
	env := drivers.MachineEnv(t, tc.Env, meta)
	envList := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, k+"="+env[k])
	}

	lbl := in.Labels
	res, err := json.Marshal(t.Spec.Resources)
	if err != nil {
		return createSpec{}, fmt.Errorf("resources label: %w", err)
	}
	eps := make([]endpointLabel, len(ports))
	for i, p := range ports {
		eps[i] = endpointLabel{Port: p.String(), Protocol: endpointProtocol(t.Spec.ConnectProtocols, i, p)}
	}
	epsJSON, err := json.Marshal(eps)
	if err != nil {
		return createSpec{}, fmt.Errorf("endpoints label: %w", err)
	}
	containerLabels := map[string]string{
		lbl.key(labelNode):      lbl.node,
		lbl.key(labelInstance):  lbl.instance,
		lbl.key(labelTemplate):  t.Metadata.Name,
		lbl.key(labelImage):     tc.Image.String(),
		lbl.key(labelResources): string(res),
		lbl.key(labelEndpoints): string(epsJSON),
	}
	if m := meta[types.MetaMachine]; m != "" {
		containerLabels[lbl.key(labelMachine)] = m
	}
	if c := meta[types.MetaClaim]; c != "" {
		containerLabels[lbl.key(labelClaim)] = c
	}
	if s := meta[types.MetaMachineSet]; s != "" {
		containerLabels[lbl.key(labelSet)] = s
	}
	if in.NetworkName != "" {
		containerLabels[lbl.key(labelNetwork)] = in.NetworkName
	}

	exposed := nat.PortSet{}
	bindings := nat.PortMap{}
	for _, p := range ports {
		np := nat.Port(p.String())
		exposed[np] = struct{}{}
		bindings[np] = []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: ""}}
	}
	volumeLabels := map[string]string{lbl.key(labelNode): lbl.node, lbl.key(labelInstance): lbl.instance}
	var mounts []mount.Mount
	for _, v := range tc.Volumes {
		mounts = append(mounts, mount.Mount{
			Type:          mount.TypeVolume,
			Target:        v,
			VolumeOptions: &mount.VolumeOptions{Labels: maps.Clone(volumeLabels)},
		})
	}

	suffix := in.Suffix
	if suffix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand docs)
		suffix = hex.EncodeToString(b[:])
	}
	who := meta[types.MetaMachine]
	if who == "" {
		who = t.Metadata.Name
	}
	cfg := &container.Config{
		Image:        in.ImageID,
		Env:          envList,
		Labels:       containerLabels,
		ExposedPorts: exposed,
		User:         in.User,
	}
	if tc.Command != nil {
		cfg.Cmd = slices.Clone(tc.Command)
	}
	if tc.Entrypoint != nil {
		cfg.Entrypoint = slices.Clone(tc.Entrypoint)
	}
	if len(exposed) == 0 {
		cfg.ExposedPorts = nil
	}
	hc := &container.HostConfig{
		NetworkMode:  container.NetworkMode(in.Network),
		PortBindings: bindings,
		Mounts:       mounts,
		Privileged:   tc.Privileged,
		Resources: container.Resources{
			NanoCPUs: int64(math.Round(t.Spec.Resources.CPU * 1e9)),
			Memory:   int64(math.Round(t.Spec.Resources.RAMGB * gib)),
		},
	}
	// Memory and swap together may not exceed the limit: the engine's default
	// would allow as much swap again.
	hc.MemorySwap = hc.Memory
	if in.PidsLimit > 0 {
		hc.PidsLimit = &in.PidsLimit
	}
	// An unprivileged container's processes cannot gain privileges (setuid
	// binaries, file capabilities), and one whose user is not root has no
	// capabilities at all: a user's shell in it is nobody on the host.
	if !tc.Privileged {
		hc.SecurityOpt = []string{"no-new-privileges:true"}
		if in.User != "" && !isRoot(in.User) {
			hc.CapDrop = []string{"ALL"}
		}
	}
	if len(bindings) == 0 {
		hc.PortBindings = nil
	}
	return createSpec{
		Name:       containerName(lbl.ns, who, suffix),
		Config:     cfg,
		HostConfig: hc,
	}, nil
}

// endpointProtocol is the connect protocol of the i-th published port: the
// template's i-th connect protocol, else the port's transport.
func endpointProtocol(protocols []string, i int, p port) string {
	if i < len(protocols) && protocols[i] != "" {
		return protocols[i]
	}
	return p.Proto
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// containerName is "<ns>-<machine or template>-<suffix>" with anything the
// engine does not take in a name replaced by "-".
func containerName(ns, who, suffix string) string {
	who = strings.Trim(nameUnsafe.ReplaceAllString(who, "-"), "-.")
	if len(who) > 40 {
		who = who[:40]
	}
	if who == "" {
		who = "machine"
	}
	return nameUnsafe.ReplaceAllString(ns, "-") + "-" + who + "-" + suffix
}

package docker

import (
	"encoding/json"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/hf-fleet/hf/lib/types"
)

// observed is what the driver reads back of one container, from an inspect or
// a list entry alike.
type observed struct {
	ID      string
	Name    string
	ImageID string
	State   container.ContainerState
	// ExitCode is meaningful when State is exited or dead.
	ExitCode int
	Labels   map[string]string
	// IP is the container's address on the driver's network.
	IP string
	// Ports maps "8080/tcp" to the host port it is published on.
	Ports map[string]string
}

// fromInspect reads an inspect response; network is the driver's network.
func fromInspect(c container.InspectResponse, network string) observed {
	o := observed{Ports: map[string]string{}}
	if c.ContainerJSONBase != nil {
		o.ID, o.Name, o.ImageID = c.ID, strings.TrimPrefix(c.Name, "/"), c.Image
		if c.State != nil {
			o.State, o.ExitCode = c.State.Status, c.State.ExitCode
		}
	}
	if c.Config != nil {
		o.Labels = c.Config.Labels
	}
	if ns := c.NetworkSettings; ns != nil {
		if ep := machineEndpoint(ns.Networks, network); ep != nil {
			o.IP = ep.IPAddress
		}
		for p, bindings := range ns.Ports {
			for _, b := range bindings {
				if b.HostPort != "" && isLoopbackOrAny(b.HostIP) {
					o.Ports[string(p)] = b.HostPort
					break
				}
			}
		}
	}
	return o
}

// machineEndpoint is a container's endpoint on the driver's network, or on
// the one network it is on (a user's own, network_per_user).
func machineEndpoint(eps map[string]*network.EndpointSettings, driverNetwork string) *network.EndpointSettings {
	if ep := eps[driverNetwork]; ep != nil || len(eps) != 1 {
		return ep
	}
	for _, ep := range eps {
		return ep
	}
	return nil
}

// fromSummary reads a list entry; network is the driver's network.
func fromSummary(c container.Summary, network string) observed {
	o := observed{ID: c.ID, ImageID: c.ImageID, State: c.State, Labels: c.Labels, Ports: map[string]string{}}
	if len(c.Names) > 0 {
		o.Name = strings.TrimPrefix(c.Names[0], "/")
	}
	if c.NetworkSettings != nil {
		if ep := machineEndpoint(c.NetworkSettings.Networks, network); ep != nil {
			o.IP = ep.IPAddress
		}
	}
	for _, p := range c.Ports {
		if p.PublicPort == 0 || !isLoopbackOrAny(p.IP) {
			continue
		}
		key := strconv.Itoa(int(p.PrivatePort)) + "/" + p.Type
		if _, ok := o.Ports[key]; !ok {
			o.Ports[key] = strconv.Itoa(int(p.PublicPort))
		}
	}
	// A list entry carries no exit code; Status inspects when it matters.
	return o
}

func isLoopbackOrAny(ip string) bool {
	switch ip {
	case "", "127.0.0.1", "0.0.0.0":
		return true
	}
	return false
}

// resourceOf is the driver's Resource for a container it owns: the id is the
// container id; Info and Endpoints are read from the container and its labels.
func resourceOf(instance string, lbl labels, o observed) types.Resource {
	var eps []endpointLabel
	_ = json.Unmarshal([]byte(o.Labels[lbl.key(labelEndpoints)]), &eps) // a missing label means no endpoints
	var res types.Resources
	_ = json.Unmarshal([]byte(o.Labels[lbl.key(labelResources)]), &res)

	var portList []string
	var endpoints []types.Endpoint
	for _, ep := range eps {
		hostPort, ok := o.Ports[ep.Port]
		if !ok {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", hostPort)
		portList = append(portList, ep.Port+"="+addr)
		endpoints = append(endpoints, types.Endpoint{Protocol: ep.Protocol, Address: addr})
	}
	sort.Strings(portList)
	info := map[string]string{
		"container_id": o.ID,
		"name":         o.Name,
		"image":        o.Labels[lbl.key(labelImage)],
		"image_id":     o.ImageID,
	}
	if o.IP != "" {
		info["ip"] = o.IP
	}
	if len(portList) > 0 {
		info["ports"] = strings.Join(portList, ",")
	}
	return types.Resource{
		ID:        o.ID,
		Driver:    instance,
		Info:      info,
		Endpoints: endpoints,
		Resources: res,
	}
}

// phaseOf maps the engine's state of a container to a machine phase.
func phaseOf(state container.ContainerState, exitCode int) types.MachinePhase {
	switch state {
	case container.StateRunning, container.StatePaused:
		return types.MachineRunning
	case container.StateCreated, container.StateRestarting:
		return types.MachineProvisioning
	case container.StateRemoving:
		return types.MachineTerminating
	case container.StateExited:
		if exitCode == 0 {
			return types.MachineTerminated
		}
		return types.MachineFailed
	}
	// dead, or a state this driver does not know
	return types.MachineFailed
}

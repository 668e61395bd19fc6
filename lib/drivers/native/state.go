package native

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// StateFile is the name of the state file in the driver's data dir.
const StateFile = "native.json"

const stateVersion = 1

// Machine phases as the driver records them.
const (
	// phaseAllocating is written before anything is made, so a crash during
	// an allocation leaves a record that List reports and Deallocate clears.
	phaseAllocating = "allocating"
	phaseReady      = "ready"
)

// machine is what the driver keeps about one machine; it is the resource's Data.
type machine struct {
	ID    string `json:"id"`
	Phase string `json:"phase"`
	// Unprivileged machines have no user of their own.
	Unprivileged bool   `json:"unprivileged,omitempty"`
	User         string `json:"user"`
	UID          int    `json:"uid"`
	GID          int    `json:"gid"`
	Home         string `json:"home"`
	Workspace    string `json:"workspace"`
	// Groups are the host groups of the template that the machine's
	// processes, entry and shells alike, run in besides the user's own.
	Groups []string `json:"groups,omitempty"`
	// Disks maps image tags to their directories.
	Disks map[string]string `json:"disks,omitempty"`
	// Cgroup is the machine's cgroup v2 directory, CgroupV1 its directories
	// in the cgroup v1 hierarchies it joins (at most one of them is set).
	Cgroup   string   `json:"cgroup,omitempty"`
	CgroupV1 []string `json:"cgroup_v1,omitempty"`
	// PID is the entry process and PIDStart its start time (clock ticks since
	// boot), which tells it apart from a later process with the same pid.
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pid_start,omitempty"`
	// ExitCode is the entry's exit status once the driver reaped it (-1: killed
	// by a signal) and Exit says it in words; unknown after a daemon restart.
	ExitCode *int   `json:"exit_code,omitempty"`
	Exit     string `json:"exit,omitempty"`
	Template string `json:"template,omitempty"`
	// Orphan marks a machine found on the host but in no state file.
	Orphan bool `json:"orphan,omitempty"`
}

// cgroups returns the machine's cgroup directories: none, its cgroup v2 one,
// or one in each cgroup v1 hierarchy.
func (m *machine) cgroups() []string {
	if len(m.CgroupV1) > 0 {
		return m.CgroupV1
	}
	if m.Cgroup != "" {
		return []string{m.Cgroup}
	}
	return nil
}

// setCgroups records dirs, what createCgroup made (v1 says which kind).
func (m *machine) setCgroups(dirs []string, v1 bool) {
	m.Cgroup, m.CgroupV1 = "", nil
	switch {
	case v1:
		m.CgroupV1 = dirs
	case len(dirs) > 0:
		m.Cgroup = dirs[0]
	}
}

func stateFile(dataDir string) drivers.ResourceFile[types.Resource] {
	return drivers.ResourceFile[types.Resource]{Dir: dataDir, Name: StateFile, Version: stateVersion}
}

// resource builds the resource the node sees for m.
func (d *Driver) resource(m *machine, res types.Resources) types.Resource {
	data, _ := json.Marshal(m) // plain struct: cannot fail
	return types.Resource{
		ID:     m.ID,
		Driver: d.env.Instance,
		Info: map[string]string{
			"host": d.env.NodeName, "user": m.User, "home": m.Home, "workspace": m.Workspace,
		},
		Resources: res,
		Data:      data,
	}
}

// held is one machine the state file lists.
type held struct {
	m   *machine
	res types.Resources
}

// loadState reads the machines kept in dataDir; no file means none.
func loadState(dataDir string) (map[string]*held, error) {
	out := map[string]*held{}
	f := stateFile(dataDir)
	rs, err := f.Load()
	if err != nil {
		return nil, err
	}
	path := f.Path()
	for i, r := range rs {
		var m machine
		if err := json.Unmarshal(r.Data, &m); err != nil {
			return nil, fmt.Errorf("load state %s: resource %d: %w", path, i, err)
		}
		if r.ID == "" || m.ID != r.ID || !validID(m.ID) {
			return nil, fmt.Errorf("load state %s: resource %d has no valid id", path, i)
		}
		if _, dup := out[r.ID]; dup {
			return nil, fmt.Errorf("load state %s: resource %s listed twice", path, r.ID)
		}
		out[r.ID] = &held{m: &m, res: r.Resources}
	}
	return out, nil
}

// saveLocked writes the held machines to the state file atomically.
func (d *Driver) saveLocked() error {
	if err := stateFile(d.env.DataDir).Save(d.heldResourcesLocked()); err != nil {
		return err
	}
	d.unsaved = false
	return nil
}

// saveLockedOrWarn saves the state where a failure only costs a recorded exit
// status (the next save writes it).
func (d *Driver) saveLockedOrWarn() {
	if err := d.saveLocked(); err != nil {
		d.log.Warn("save state", "err", err)
	}
}

// heldResourcesLocked returns the held machines as resources, sorted by id.
func (d *Driver) heldResourcesLocked() []types.Resource {
	out := make([]types.Resource, 0, len(d.held))
	for _, h := range d.held {
		out = append(out, d.resource(h.m, h.res))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

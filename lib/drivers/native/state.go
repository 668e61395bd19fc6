package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	// Disks maps image tags to their directories.
	Disks map[string]string `json:"disks,omitempty"`
	// Cgroup is the machine's cgroup directory, when limits are set.
	Cgroup string `json:"cgroup,omitempty"`
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

// state is the content of the state file.
type state struct {
	Version   int              `json:"version"`
	Resources []types.Resource `json:"resources"`
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
	if dataDir == "" {
		return out, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("load state %s: corrupt file (repair or remove it): empty", path)
	}
	var st state
	if err := drivers.DecodeConfig(b, &st); err != nil {
		return nil, fmt.Errorf("load state %s: corrupt file (repair or remove it): %w", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("load state %s: version %d, want %d", path, st.Version, stateVersion)
	}
	for i, r := range st.Resources {
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
	if d.env.DataDir == "" {
		return nil
	}
	b, err := json.Marshal(state{Version: stateVersion, Resources: d.heldResourcesLocked()})
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := drivers.ReplaceFile(filepath.Join(d.env.DataDir, StateFile), b, 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
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

package testdriver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// StateFile is the name of the state file in the driver's data dir.
const StateFile = "testdriver.json"

const stateVersion = 1

// state is the content of the state file.
type state struct {
	Version   int              `json:"version"`
	Resources []types.Resource `json:"resources"`
}

// loadState reads the resources held in dataDir; no file means none. An empty
// dataDir keeps nothing on disk.
func loadState(dataDir string) (map[string]types.Resource, error) {
	held := map[string]types.Resource{}
	if dataDir == "" {
		return held, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return held, nil
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
		if r.ID == "" {
			return nil, fmt.Errorf("load state %s: resource %d has no id", path, i)
		}
		if _, dup := held[r.ID]; dup {
			return nil, fmt.Errorf("load state %s: resource %s listed twice", path, r.ID)
		}
		held[r.ID] = r
	}
	return held, nil
}

// saveLocked writes what the driver holds to its state file atomically.
func (d *Driver) saveLocked() error {
	if d.env.DataDir == "" {
		return nil
	}
	b, err := json.Marshal(state{Version: stateVersion, Resources: d.sortedLocked(false)})
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := drivers.ReplaceFile(filepath.Join(d.env.DataDir, StateFile), b, 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

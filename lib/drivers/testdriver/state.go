package testdriver

import (
	"fmt"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// StateFile is the name of the state file in the driver's data dir.
const StateFile = "testdriver.json"

const stateVersion = 1

func stateFile(dataDir string) drivers.ResourceFile[types.Resource] {
	return drivers.ResourceFile[types.Resource]{Dir: dataDir, Name: StateFile, Version: stateVersion}
}

// loadState reads the resources held in dataDir; no file means none. An empty
// dataDir keeps nothing on disk.
func loadState(dataDir string) (map[string]types.Resource, error) {
	f := stateFile(dataDir)
	rs, err := f.Load()
	if err != nil {
		return nil, err
	}
	held := map[string]types.Resource{}
	for i, r := range rs {
		if r.ID == "" {
			return nil, fmt.Errorf("load state %s: resource %d has no id", f.Path(), i)
		}
		if _, dup := held[r.ID]; dup {
			return nil, fmt.Errorf("load state %s: resource %s listed twice", f.Path(), r.ID)
		}
		held[r.ID] = r
	}
	return held, nil
}

// saveLocked writes what the driver holds to its state file atomically.
func (d *Driver) saveLocked() error {
	return stateFile(d.env.DataDir).Save(d.sortedLocked(false))
}

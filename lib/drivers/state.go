package drivers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ResourceFile is the state file in which a driver keeps the resources it
// holds, so that, like the things they stand for, they outlive a restart. An
// empty Dir keeps nothing on disk.
type ResourceFile[T any] struct {
	Dir     string
	Name    string
	Version int
}

type resourceFile[T any] struct {
	Version   int `json:"version"`
	Resources []T `json:"resources"`
}

// Load reads the resources; no file means none. A corrupt file is an error
// naming the file, for a person to repair or remove.
func (f ResourceFile[T]) Load() ([]T, error) {
	if f.Dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(f.Dir, f.Name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("load state %s: corrupt file (repair or remove it): empty", path)
	}
	var st resourceFile[T]
	if err := DecodeConfig(b, &st); err != nil {
		return nil, fmt.Errorf("load state %s: corrupt file (repair or remove it): %w", path, err)
	}
	if st.Version != f.Version {
		return nil, fmt.Errorf("load state %s: version %d, want %d", path, st.Version, f.Version)
	}
	return st.Resources, nil
}

// Save replaces the file with rs (atomically; see ReplaceFile).
func (f ResourceFile[T]) Save(rs []T) error {
	if f.Dir == "" {
		return nil
	}
	b, err := json.Marshal(resourceFile[T]{Version: f.Version, Resources: rs})
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := ReplaceFile(filepath.Join(f.Dir, f.Name), b, 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Path is the file's path.
func (f ResourceFile[T]) Path() string { return filepath.Join(f.Dir, f.Name) }

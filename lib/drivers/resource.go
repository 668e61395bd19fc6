package drivers

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hf-fleet/hf/lib/types"
)

// CloneResource returns a deep copy of r, so a driver can hand out what it holds
// without sharing maps and slices with the caller.
func CloneResource(r types.Resource) types.Resource {
	return r.Copy(cloner{})
}

// cloner shares strings, which do not change, and copies byte slices.
type cloner struct{}

func (cloner) String(s string) string { return s }
func (cloner) Bytes(b []byte) []byte  { return bytes.Clone(b) }

// WriteFileAtomic replaces path with data so that a crash leaves either the old
// or the new content: it writes a temporary file in the same directory, syncs
// it, renames it over path and syncs the directory.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, true)
}

// ReplaceFile is WriteFileAtomic without the fsyncs: readers still see the old
// or the new content, never a mix, and a crash of the process loses nothing,
// but a power cut may lose the last write. It matches the store's durability
// (badger without SyncWrites) at a fraction of the cost (~10 us, not ~2 ms).
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, false)
}

func writeFile(path string, data []byte, perm os.FileMode, durable bool) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if err = tmp.Sync(); err != nil {
			return fmt.Errorf("write %s: sync: %w", path, err)
		}
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	// The rename is durable only once the directory entry is on disk.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open dir: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync dir: %w", path, err)
	}
	return nil
}

package openapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hf-fleet/hf/lib/store"
)

// AdminTokenFile is the file in the data dir that holds the admin token.
const AdminTokenFile = "admin.token"

// NodeAdmin is what a starting node knows of its admin token.
type NodeAdmin struct {
	// Static is a token this node accepts of its own (api.admin_token, or a
	// file an earlier release wrote): Config.AdminToken.
	Static string
	// Bearer is the token this node keeps in its data dir ("" when it has
	// none: it joined a cluster whose first node made it).
	Bearer string
	// Created is true when this start made Bearer, to be shown once.
	Created bool
	// Path is the file of Bearer.
	Path string
}

// LoadOrCreateAdminToken returns the node's admin token. A given token
// (api.admin_token) is static and nothing is written. Else the token
// stored in <dataDir>/admin.token is used: a cluster token, or (holding no
// '.') a static one of an earlier release. Else, on the first node of a
// new cluster (joins false and no users or tokens in st), a new cluster
// admin token is written there with mode 0600 (the dir is created 0700
// when missing) and created. A first node whose store lost its users gets
// the token of its file back.
func LoadOrCreateAdminToken(st *store.Store, dataDir, given string, joins bool) (NodeAdmin, error) {
	if given != "" {
		return NodeAdmin{Static: given}, nil
	}
	path := filepath.Join(dataDir, AdminTokenFile)
	out := NodeAdmin{Path: path}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		out.Bearer = strings.TrimSpace(string(b))
		if out.Bearer == "" {
			return NodeAdmin{}, fmt.Errorf("admin token %s is empty: delete it to create a new one", path)
		}
		if !strings.Contains(out.Bearer, ".") {
			out.Static = out.Bearer
			return out, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return NodeAdmin{}, fmt.Errorf("read admin token: %w", err)
	}
	if joins {
		return out, nil
	}
	has, err := HasUsers(st)
	if err != nil || has {
		return out, err
	}
	if out.Bearer == "" {
		if out.Bearer, err = NewBootstrapToken(); err != nil {
			return NodeAdmin{}, err
		}
		if err := writeSecretFile(dataDir, path, out.Bearer); err != nil {
			return NodeAdmin{}, err
		}
		out.Created = true
	}
	if err := BootstrapAdmin(st, out.Bearer); err != nil {
		if out.Created {
			_ = os.Remove(path)
		}
		return NodeAdmin{}, err
	}
	return out, nil
}

// writeSecretFile writes a new secret file of mode 0600 in dir (made 0700).
func writeSecretFile(dir, path, secret string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	// O_EXCL: two processes starting on one data dir must not both print a token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create admin token: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("sync admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("close admin token: %w", err)
	}
	return nil
}

package openapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
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

// WaitLocalAdminToken gives root on the host of a node that joined a
// cluster what the first node's host has: an admin token in
// <dataDir>/admin.token, so hf-cli on this host is signed in without
// copying files. The token ("local-<node>") is of the cluster's User
// "admin", made once that user has reached this node by replication (and
// only while it is an enabled admin); root on this host already holds the
// cluster's CA and gossip keys, so the token grants it nothing more. It
// returns the file's path, or ctx's error.
func WaitLocalAdminToken(ctx context.Context, st *store.Store, dataDir, node string, poll time.Duration) (string, error) {
	path := filepath.Join(dataDir, AdminTokenFile)
	name := "local-" + node
	if len(name) > types.MaxNameLen {
		name = strings.TrimRight(name[:types.MaxNameLen], "-")
	}
	for {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		user, err := store.Get[types.User](st, types.KindUser, AdminUser)
		if err == nil && enabledAdmin(user) {
			tok := &types.Token{Metadata: types.ObjectMeta{Name: name}, Spec: types.TokenSpec{User: AdminUser, Role: RoleAdmin, UserCreatedAt: user.Metadata.CreatedAt}}
			types.SetKind(tok, types.KindToken)
			bearer, err := mintToken(tok)
			if err != nil {
				return "", err
			}
			// The token is stored before its file is written: whoever reads
			// the file can use it at once. A crash between the two leaves a
			// token nobody holds, replaced at the next start.
			rec, err := st.Put(tok, store.PutOptions{})
			if err != nil {
				return "", fmt.Errorf("local admin token: %w", err)
			}
			if err := writeSecretFile(dataDir, path, bearer); err != nil {
				_, _ = st.Delete(types.KindToken, name, rec.Version)
				return "", err
			}
			return path, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(poll):
		}
	}
}

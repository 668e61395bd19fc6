package openapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminTokenFile is the file in the data dir that holds the admin token.
const AdminTokenFile = "admin.token"

// LoadOrCreateAdminToken returns the admin token: given when not empty (and then
// nothing is written), else the token stored in <dataDir>/admin.token, else a new
// random 32-byte hex token written there with mode 0600 (the dir is created 0700
// when missing) and created=true, so the caller prints it once.
func LoadOrCreateAdminToken(dataDir, given string) (token string, created bool, err error) {
	if given != "" {
		return given, false, nil
	}
	path := filepath.Join(dataDir, AdminTokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", false, fmt.Errorf("admin token %s is empty: delete it to create a new one", path)
		}
		return t, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("read admin token: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", false, fmt.Errorf("create data dir: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, fmt.Errorf("generate admin token: %w", err)
	}
	token = hex.EncodeToString(raw)
	// O_EXCL: two processes starting on one data dir must not both print a token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("create admin token: %w", err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return "", false, fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return "", false, fmt.Errorf("sync admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return "", false, fmt.Errorf("close admin token: %w", err)
	}
	return token, true, nil
}

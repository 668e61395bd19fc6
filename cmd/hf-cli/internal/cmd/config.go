package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// configFile is the profiles file inside the config directory.
const configFile = "config.yaml"

// Config is the profiles file: named endpoint+token pairs and the one in use.
type Config struct {
	Current  string              `yaml:"current,omitempty"`
	Profiles map[string]*Profile `yaml:"profiles,omitempty"`
}

// Profile is one API endpoint and the token to use there.
type Profile struct {
	Endpoint string `yaml:"endpoint,omitempty"`
	Token    string `yaml:"token,omitempty"`
	// CA is the PEM of the cluster CA the endpoint's certificate is checked
	// against (profile set --ca-file reads it in).
	CA string `yaml:"ca,omitempty"`
}

// configDir is $HF_CONFIG_DIR, else <user config dir>/hf.
func (f *Factory) configDir() (string, error) {
	if d := f.Getenv("HF_CONFIG_DIR"); d != "" {
		return d, nil
	}
	base, err := f.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find config dir (set HF_CONFIG_DIR): %w", err)
	}
	return filepath.Join(base, "hf"), nil
}

// loadConfig reads the profiles file; a missing file is an empty config.
func (f *Factory) loadConfig() (*Config, string, error) {
	dir, err := f.configDir()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, configFile)
	cfg := &Config{}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, "", fmt.Errorf("read config: %w", err)
	default:
		if err := yaml.Unmarshal(raw, cfg); err != nil {
			return nil, "", fmt.Errorf("read config %s: %w", path, err)
		}
	}
	if cfg.Profiles == nil {
		cfg.Profiles = map[string]*Profile{}
	}
	return cfg, path, nil
}

// saveConfig writes cfg to path (mode 0600, directory 0700), replacing the old
// file atomically so a crash never leaves half a file with tokens in it.
func saveConfig(path string, cfg *Config) error {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write config: %w", err)
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

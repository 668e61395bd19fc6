package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Environment variables that are not derived from a key.
const (
	// EnvConfig names the config file when neither LoadOptions.File nor
	// --config does.
	EnvConfig = "HF_CONFIG"
	// EnvAdminToken is an alias of HF_API_ADMIN_TOKEN.
	EnvAdminToken = "HF_ADMIN_TOKEN"
	// EnvLabels holds labels as "k=v,k2=v2", merged over the file's.
	EnvLabels = "HF_LABELS"
	envPrefix = "HF_"
)

// LoadOptions says where Load reads from.
type LoadOptions struct {
	// File is the YAML config file (the --config flag). Empty means the --config
	// flag of Flags if given, else $HF_CONFIG, else no file at all, which is fine.
	// A file that is named but missing is an error.
	File string
	// Flags are the parsed command-line flags (see BindFlags); nil means none.
	Flags *pflag.FlagSet
	// Env is the environment as KEY=value lines; nil means os.Environ().
	Env []string
}

// EnvName returns the environment variable of a config key: "cluster.join" is
// HF_CLUSTER_JOIN.
func EnvName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load reads the configuration: defaults, then the file, then HF_* environment
// variables, then the flags that were given, each layer overriding the one
// before key by key. It fills cluster timings from the profile and validates the
// result; every error names the key and where its value came from.
func Load(opts LoadOptions) (Config, error) {
	envList := opts.Env
	if envList == nil {
		envList = os.Environ()
	}
	env := envMap(envList)

	file := opts.File
	if f := changedFlag(opts.Flags, FlagConfig); file == "" && f != nil {
		file = f.Value.String()
	}
	if file == "" {
		file = env[EnvConfig]
	}
	doc, err := readFile(file)
	if err != nil {
		return Config{}, err
	}
	src := &sources{file: file, lines: doc.lines, set: map[string]string{}}

	sch := configSchema()
	if errs := sch.checkKeys("", doc.root, src.fileAt); len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}

	// viper layers the fixed-schema keys; labels and drivers bypass it (see doc.go).
	v := viper.New()
	leaves := sch.leaves("")
	dataDir := DefaultDataDir(os.Geteuid(), func(k string) string { return env[k] })
	def := reflect.ValueOf(defaults(dataDir))
	for _, l := range leaves {
		v.SetDefault(l.key, def.FieldByIndex(l.index).Interface())
	}
	fixed := pruneNulls(doc.root)
	delete(fixed, "labels")
	delete(fixed, "drivers")
	if err := v.MergeConfigMap(fixed); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}

	labels := map[string]any{}
	if m, ok := doc.root["labels"].(map[string]any); ok {
		maps.Copy(labels, m)
	}
	if err := applyEnv(v, env, leaves, labels, src); err != nil {
		return Config{}, err
	}
	if err := applyFlags(v, opts.Flags, labels, src); err != nil {
		return Config{}, err
	}

	settings := v.AllSettings()
	if len(labels) > 0 {
		settings["labels"] = labels
	}
	if d, ok := doc.root["drivers"]; ok {
		settings["drivers"] = d
	}
	cfg, err := decode(settings, src)
	if err != nil {
		return Config{}, err
	}
	if cfg.DataDir == "" { // data_dir: "" means the default, like name: ""
		cfg.DataDir = dataDir
	}
	if len(cfg.Drivers) == 0 {
		cfg.Drivers = defaultDrivers()
		cfg.DefaultDrivers = true
	}
	cfg.Cluster.ApplyProfile()
	if errs := cfg.validate(); len(errs) > 0 {
		out := make([]error, 0, len(errs))
		for _, fe := range errs {
			out = append(out, src.wrap(fe))
		}
		return Config{}, errors.Join(out...)
	}
	return cfg, nil
}

// readFile reads and parses the config file; no file is an empty document.
func readFile(file string) (document, error) {
	if file == "" {
		return document{root: map[string]any{}}, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return document{}, fmt.Errorf("config: read %s: %w", file, err)
	}
	return parseYAML(file, data)
}

// envMap turns KEY=value lines into a map; a later line wins, as in os/exec.
func envMap(lines []string) map[string]string {
	m := make(map[string]string, len(lines))
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// applyEnv sets every key whose HF_ variable is set and not empty. viper's own
// env support reads only the process environment and, with AutomaticEnv, misses
// keys it does not know at Unmarshal; setting each known leaf explicitly avoids
// both. Set is viper's top layer, so applyFlags runs after this and wins.
func applyEnv(v *viper.Viper, env map[string]string, leaves []leaf, labels map[string]any, src *sources) error {
	listType := reflect.TypeFor[[]string]()
	for _, l := range leaves {
		name := EnvName(l.key)
		val := env[name]
		if val == "" && l.key == "api.admin_token" {
			name, val = EnvAdminToken, env[EnvAdminToken]
		}
		if val == "" {
			continue
		}
		if reflect.TypeFor[Config]().FieldByIndex(l.index).Type == listType {
			v.Set(l.key, splitList(val))
		} else {
			v.Set(l.key, val)
		}
		src.set[l.key] = name
	}
	if val := env[EnvLabels]; val != "" {
		return mergeLabels(labels, splitList(val), EnvLabels, src)
	}
	return nil
}

// applyFlags sets the keys of the flags that were given.
func applyFlags(v *viper.Viper, fs *pflag.FlagSet, labels map[string]any, src *sources) error {
	for _, fk := range flagKeys() {
		f := changedFlag(fs, fk.flag)
		if f == nil {
			continue
		}
		if fk.key == "cluster.join" {
			v.Set(fk.key, flagValues(f))
		} else {
			v.Set(fk.key, f.Value.String())
		}
		src.set[fk.key] = "--" + fk.flag
	}
	if f := changedFlag(fs, FlagLabel); f != nil {
		return mergeLabels(labels, flagValues(f), "--"+FlagLabel, src)
	}
	return nil
}

// mergeLabels adds key=value pairs to labels, overriding keys already there.
func mergeLabels(labels map[string]any, pairs []string, from string, src *sources) error {
	for _, p := range pairs {
		k, val, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fieldErr("labels", "from "+from, "want key=value, got %q", p)
		}
		labels[k] = strings.TrimSpace(val)
		src.set[joinKey("labels", k)] = from
	}
	return nil
}

// pruneNulls copies m without null values (in nested mappings too, not in
// lists): a key written with no value means its default.
func pruneNulls(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case nil:
		case map[string]any:
			out[k] = pruneNulls(x)
		default:
			out[k] = v
		}
	}
	return out
}

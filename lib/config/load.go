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
//
// A value that a later layer overrides is checked too, so that an override
// never hides a bad value: the file, with the environment and flags applied
// only to keys the file does not set, must load and validate, and so must the
// environment under the flags.
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

	sch := configSchema()
	in := &input{
		file:    file,
		lines:   doc.lines,
		leaves:  sch.leaves(""),
		dataDir: DefaultDataDir(os.Geteuid(), func(k string) string { return env[k] }),
	}
	envL, envErr := envLayer(env, in.leaves, sch.objectLists(""))
	nameErrs, ignoredEnv := checkEnvNames(env, sch)
	flagL, flagErr := flagLayer(opts.Flags)
	// The file's keys and kinds first, each said with what overrides it.
	src := in.sources()
	for _, l := range []*layer{envL, flagL} {
		if l != nil {
			maps.Copy(src.overridden, l.from)
		}
	}
	fileAt := func(key string) string {
		if at := src.fileAt(key); at != "" {
			return src.overriddenBy(key, at)
		}
		return ""
	}
	errs := append(sch.checkKeys("", doc.root, fileAt), nameErrs...)
	for _, err := range []error{envErr, flagErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}

	// viper layers the fixed-schema keys; labels and drivers bypass it (see doc.go).
	in.fixed = pruneNulls(doc.root)
	delete(in.fixed, "labels")
	delete(in.fixed, "drivers")
	in.drivers, in.hasDrivers = doc.root["drivers"]
	fileLabels, _ := doc.root["labels"].(map[string]any)
	in.layers = []*layer{fileLayer(in.fixed, fileLabels, in.leaves), envL, flagL}

	cfg, errs := in.build(-1)
	seen := map[string]bool{}
	for _, e := range errs {
		seen[e.Error()] = true
	}
	for i := range in.layers {
		if !in.overridden(i) {
			continue
		}
		_, more := in.build(i)
		for _, e := range more {
			if !seen[e.Error()] {
				seen[e.Error()] = true
				errs = append(errs, e)
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	cfg.IgnoredEnv = ignoredEnv
	return cfg, nil
}

// input is what Load has read, ready to be merged.
type input struct {
	file    string
	lines   map[string]int // key path -> line in file
	leaves  []leaf
	dataDir string // the default data dir
	// fixed is the file without nulls, labels and drivers: viper merges it.
	fixed      map[string]any
	drivers    any
	hasDrivers bool
	// layers are the file, the environment and the flags, in that order.
	layers []*layer
}

// layer is one source of values above the defaults: the file, the
// environment or the flags.
type layer struct {
	// values are the leaf keys ("api.address") the layer sets, for viper's
	// Set; nil for the file, which viper merges whole.
	values map[string]any
	// labels are the labels the layer sets; they merge key by key.
	labels map[string]any
	// from says where each key the layer sets ("api.address", "labels.zone")
	// came from: "HF_API_ADDRESS", "--api"; "" for the file, whose lines
	// sources knows.
	from map[string]string
}

func newLayer() *layer {
	return &layer{values: map[string]any{}, labels: map[string]any{}, from: map[string]string{}}
}

func (in *input) sources() *sources {
	return &sources{file: in.file, lines: in.lines, set: map[string]string{}, overridden: map[string]string{}}
}

// overridden says whether a later layer sets a key that layer i sets.
func (in *input) overridden(i int) bool {
	for key := range in.layers[i].from {
		for _, l := range in.layers[i+1:] {
			if _, ok := l.from[key]; ok {
				return true
			}
		}
	}
	return false
}

// build merges the layers over the defaults into a Config and validates it.
// keep < 0 merges them as they are; keep >= 0 keeps layer keep's value of
// every key it sets, whatever later layers set it to, so that those values
// are checked as if nothing overrode them.
func (in *input) build(keep int) (Config, []error) {
	v := viper.New()
	def := reflect.ValueOf(defaults(in.dataDir))
	for _, l := range in.leaves {
		v.SetDefault(l.key, def.FieldByIndex(l.index).Interface())
	}
	if err := v.MergeConfigMap(in.fixed); err != nil {
		return Config{}, []error{fmt.Errorf("config: %w", err)}
	}
	src := in.sources()
	labels := map[string]any{}
	for i, l := range in.layers {
		kept := func(key string) bool {
			if keep < 0 || keep >= i {
				return false
			}
			_, ok := in.layers[keep].from[key]
			return ok
		}
		for _, key := range sortedKeys(l.values) {
			if kept(key) {
				src.overridden[key] = l.from[key]
				continue
			}
			v.Set(key, l.values[key])
			src.set[key] = l.from[key]
		}
		for k, val := range l.labels {
			key := joinKey("labels", k)
			if kept(key) {
				src.overridden[key] = l.from[key]
				continue
			}
			labels[k] = val
			if from := l.from[key]; from != "" {
				src.set[key] = from
			}
		}
	}

	settings := v.AllSettings()
	if len(labels) > 0 {
		settings["labels"] = labels
	}
	if in.hasDrivers {
		settings["drivers"] = in.drivers
	}
	cfg, errs := decode(settings, src)
	if len(errs) > 0 {
		return Config{}, errs
	}
	if cfg.DataDir == "" { // data_dir: "" means the default, like name: ""
		cfg.DataDir = in.dataDir
	}
	if len(cfg.Drivers) == 0 {
		cfg.Drivers = defaultDrivers()
		cfg.DefaultDrivers = true
	}
	cfg.Cluster.ApplyProfile()
	for _, fe := range cfg.validate() {
		errs = append(errs, src.wrap(fe))
	}
	return cfg, errs
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

// fileLayer notes which keys the file sets; their values reach viper with
// the rest of fixed.
func fileLayer(fixed, labels map[string]any, leaves []leaf) *layer {
	l := newLayer()
	for _, lf := range leaves {
		if _, ok := lookupKey(fixed, lf.key); ok {
			l.from[lf.key] = ""
		}
	}
	maps.Copy(l.labels, labels)
	for k := range labels {
		l.from[joinKey("labels", k)] = ""
	}
	return l
}

// lookupKey finds a dotted key path in nested mappings.
func lookupKey(m map[string]any, key string) (any, bool) {
	head, rest, nested := strings.Cut(key, ".")
	v, ok := m[head]
	if !ok || !nested {
		return v, ok
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	return lookupKey(sub, rest)
}

// envLayer reads every key whose HF_ variable is set and not empty. viper's
// own env support reads only the process environment and, with AutomaticEnv,
// misses keys it does not know at Unmarshal; reading each known leaf
// explicitly avoids both. The variable of a key the environment cannot set
// (a list of mappings: HF_DRIVERS, HF_API_TOKENS) is an error, not ignored.
func envLayer(env map[string]string, leaves []leaf, fileOnly []string) (*layer, error) {
	l := newLayer()
	listType := reflect.TypeFor[[]string]()
	for _, lf := range leaves {
		name := EnvName(lf.key)
		val := env[name]
		if val == "" && lf.key == "api.admin_token" {
			name, val = EnvAdminToken, env[EnvAdminToken]
		}
		if val == "" {
			continue
		}
		if reflect.TypeFor[Config]().FieldByIndex(lf.index).Type == listType {
			l.values[lf.key] = splitList(val)
		} else {
			l.values[lf.key] = val
		}
		l.from[lf.key] = name
	}
	var errs []error
	for _, key := range fileOnly {
		if name := EnvName(key); env[name] != "" {
			errs = append(errs, fieldErr(key, "from "+name, "is a list of mappings, which only the config file can set"))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if val := env[EnvLabels]; val != "" {
		return l, l.addLabels(splitList(val), EnvLabels)
	}
	return l, nil
}

// flagLayer reads the keys of the flags that were given.
func flagLayer(fs *pflag.FlagSet) (*layer, error) {
	l := newLayer()
	for _, fk := range flagKeys() {
		f := changedFlag(fs, fk.flag)
		if f == nil {
			continue
		}
		if fk.key == "cluster.join" {
			l.values[fk.key] = flagValues(f)
		} else {
			l.values[fk.key] = f.Value.String()
		}
		l.from[fk.key] = "--" + fk.flag
	}
	if f := changedFlag(fs, FlagLabel); f != nil {
		return l, l.addLabels(flagValues(f), "--"+FlagLabel)
	}
	return l, nil
}

// addLabels adds key=value pairs to the layer's labels, a later pair
// overriding an earlier one.
func (l *layer) addLabels(pairs []string, from string) error {
	for _, p := range pairs {
		k, val, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fieldErr("labels", "from "+from, "want key=value, got %q", p)
		}
		l.labels[k] = strings.TrimSpace(val)
		l.from[joinKey("labels", k)] = from
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

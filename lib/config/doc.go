// Package config is hf-node's configuration: a typed Config with defaults and
// Validate, read by Load from an optional YAML file, HF_* environment variables
// and command-line flags.
//
// # Precedence
//
// Later layers win, key by key:
//
//	defaults  <  YAML file (--config, or HF_CONFIG)  <  HF_* environment  <  flags
//
// Only flags that were actually given override anything. Labels merge key by key
// across the layers (a --label zone=b on top of a file's {rack: r1, zone: a} gives
// {rack: r1, zone: b}); every other key, lists included, is replaced whole.
//
// An override does not hide a bad value: Load also checks the file with the
// environment and flags applied only to keys the file leaves out, and the
// environment with the flags applied only to keys it leaves out, so a file
// that a node refuses is refused with --api too ("config: api.address: ...
// (hf.yml line 3, overridden by --api)").
//
// # Keys
//
// Every key is snake_case and case-sensitive, including driver configuration keys
// (cpu_alter, images_path). A key the file has and Config does not is an error that
// names it ("config: unknown key \"cluster.jion\" ..."); so is a value of the wrong
// type (5 for a bool, 2.5 for a whole number, "5" in quotes, which is text, for a
// number) or out of range, and the error names the key and where the value came
// from. Durations are text ("30s"); the environment's and the flags' values are
// all text, parsed as their keys want. A bool where text is wanted (a label) is
// "true" or "false".
// A list in the file is a YAML list; only the environment's are comma-separated.
// Free-form maps (labels, drivers[].config) are passed through as written: their
// keys keep their case and may contain dots.
//
// # Environment
//
// A key's variable is HF_ plus the key in upper case with dots as underscores:
// data_dir is HF_DATA_DIR, cluster.join is HF_CLUSTER_JOIN (comma-separated),
// api.admin_token is HF_API_ADMIN_TOKEN or its alias HF_ADMIN_TOKEN (the former
// wins when both are set), labels is HF_LABELS ("k=v,k2=v2"). Lists of objects
// (api.tokens, drivers) can only be set in the file: HF_API_TOKENS and
// HF_DRIVERS are errors. An empty variable counts as unset.
//
// Other programs use the HF_ prefix too (hf-cli's HF_ENDPOINT, Hugging Face's
// HF_TOKEN, HF_HOME, HF_HUB_CACHE), so Load looks at no other HF_ variable but
// those named as a section (HF_API) or under a section's prefix (HF_API_...):
// a section's name is an error, and so is a near miss of one of its variables
// (HF_API_ADRESS); any other under its prefix (HF_API_URL) is ignored as
// another program's, and listed in Config.IgnoredEnv for hf-node to warn of.
// ForeignEnv are never hf-node's (HF_DEBUG is Hugging Face's).
//
// # Why the layering is done by hand around viper
//
// viper folds every map key to lower case and splits keys on dots, which would
// corrupt labels such as "topology.example.com/Zone" and case-sensitive driver
// settings, and it reads the environment only from the process, which tests cannot
// replace. So Load parses the YAML itself (keeping line numbers for errors), checks
// every key against Config's mapstructure tags, gives viper the fixed-schema part
// (defaults via SetDefault for every leaf key, the file via MergeConfigMap, then
// environment and flags in that order via Set), and merges the free-form maps
// itself before decoding everything with mapstructure.
package config

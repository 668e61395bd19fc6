package types

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Claim metadata reaches a machine only as data (environment variables, user
// data, labels) and only under keys its template declares. These are the rules,
// shared by the API (400 naming the key), the node (which passes nothing else
// to a driver) and the drivers.

// MetadataKey declares one claim metadata key a template accepts.
type MetadataKey struct {
	// Name is the key; it reaches the machine as an environment variable of
	// that name, so it has a variable's form.
	Name string `json:"name"`
	// Pattern, when set, is a regular expression (RE2 syntax) that the whole
	// value must match.
	Pattern string `json:"pattern,omitempty"`
}

// Limits of claim metadata.
const (
	MaxMetadataKeys    = 64
	MaxMetadataKeyLen  = 128
	MaxMetadataValue   = 4096
	maxMetadataPattern = 1024
)

// SystemMetadataPrefix starts the metadata keys the node itself passes to a
// driver (the Meta* keys below); no claim or template may use it.
const SystemMetadataPrefix = "HF_"

// The metadata keys the node passes to a driver besides the claim's own.
const (
	MetaClaim    = "HF_CLAIM"
	MetaMachine  = "HF_MACHINE"
	MetaNode     = "HF_NODE"
	MetaTemplate = "HF_TEMPLATE"
	MetaUser     = "HF_USER"
	// MetaMachineSet names the set a pool machine was made for, in place of
	// MetaClaim: the claim that made it is the set's own, gone once the
	// machine is warm, and a machine's environment cannot change when a
	// user's claim takes it later (the Machine object names that claim).
	MetaMachineSet = "HF_MACHINESET"
)

// systemMetadata are the Meta* keys.
var systemMetadata = map[string]bool{MetaClaim: true, MetaMachine: true, MetaNode: true, MetaTemplate: true, MetaUser: true, MetaMachineSet: true}

// MachineMetadata is the part of meta (a claim's metadata plus the node's
// Meta* keys) that may reach a machine of template o: the Meta* keys, and the
// keys o declares whose name and value pass the claim rules. Drivers call it
// on what they are given, so no caller can make a driver set a loader or
// interpreter hook, whatever it passes.
func (o *MachineTemplate) MachineMetadata(meta map[string]string) map[string]string {
	out := make(map[string]string, len(meta))
	for k, v := range meta {
		if checkMetadataValue("", v) != nil {
			continue
		}
		if systemMetadata[k] {
			out[k] = v
			continue
		}
		declared := slices.ContainsFunc(o.Spec.ClaimMetadata, func(d MetadataKey) bool { return d.Name == k })
		if declared && checkMetadataName("", k) == nil {
			out[k] = v
		}
	}
	return out
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// unsafeExact are variables that change what a shell, the C library or a
// common tool runs or loads.
var unsafeExact = map[string]bool{
	"PATH": true, "IFS": true, "ENV": true, "BASH_ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
	"PS1": true, "PS2": true, "PS3": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true,
	"GLOBIGNORE": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"GCONV_PATH": true, "HOSTALIASES": true, "LOCPATH": true, "NLSPATH": true, "GLIBC_TUNABLES": true,
	"LOCALDOMAIN": true, "RES_OPTIONS": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true,
	"LESSOPEN": true, "LESSCLOSE": true, "PAGER": true, "EDITOR": true, "VISUAL": true,
}

// unsafePrefixes are families of such variables: the dynamic loader's, shell
// function exports, interpreters' and tools' hooks, and hf's own.
var unsafePrefixes = []string{
	"LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "PERL", "RUBY", "NODE_", "GIT_", "JAVA_", "LUA_",
	"GEM_", "BUNDLE_", "MALLOC_", "NPM_CONFIG_",
}

// unsafeSuffixes catch the option variables of every other tool (JAVA_TOOL_OPTIONS,
// MAVEN_OPTS, ...).
var unsafeSuffixes = []string{"_OPTIONS", "_OPTS"}

// UnsafeEnvName says why name may not be set by a claim ("" when it may). The
// check ignores case: some tools and systems (Windows guests of a cloud
// driver) read either spelling.
func UnsafeEnvName(name string) string {
	why := unsafeFamily(strings.ToUpper(name))
	if why != "" && strings.ToUpper(name) != name {
		why += " (names are compared ignoring case)"
	}
	return why
}

// unsafeFamily names the family of the upper-case name u, "" for none.
func unsafeFamily(u string) string {
	if unsafeExact[u] {
		return u + " changes what the shell, the C library or a tool runs"
	}
	if strings.HasPrefix(u, SystemMetadataPrefix) {
		return "HF_* keys are set by hf itself"
	}
	for _, p := range unsafePrefixes {
		if strings.HasPrefix(u, p) {
			return p + "* variables change what a loader, interpreter or tool runs"
		}
	}
	for _, s := range unsafeSuffixes {
		if strings.HasSuffix(u, s) {
			return "*" + s + " variables pass options to a program before it runs"
		}
	}
	return ""
}

// checkMetadataName checks a key's form and family.
func checkMetadataName(field, name string) error {
	if len(name) > MaxMetadataKeyLen {
		return Invalid(field, "at most %d characters", MaxMetadataKeyLen)
	}
	if !envNameRE.MatchString(name) {
		return Invalid(field, "must be a variable name (a letter or '_', then letters, digits, '_'), got %q", name)
	}
	if why := UnsafeEnvName(name); why != "" {
		return Invalid(field, "may not be set by a claim: %s", why)
	}
	return nil
}

// validateMetadataKeys checks a template's declared keys.
func validateMetadataKeys(field string, keys []MetadataKey) error {
	if len(keys) > MaxMetadataKeys {
		return Invalid(field, "at most %d keys", MaxMetadataKeys)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		f := fieldIdx(field, i)
		if err := checkMetadataName(f+".name", k.Name); err != nil {
			return err
		}
		if seen[k.Name] {
			return Invalid(f+".name", "%q is declared twice", k.Name)
		}
		seen[k.Name] = true
		if len(k.Pattern) > maxMetadataPattern {
			return Invalid(f+".pattern", "at most %d characters", maxMetadataPattern)
		}
		if k.Pattern != "" {
			if _, err := compilePattern(k.Pattern); err != nil {
				return Invalid(f+".pattern", "not a regular expression: %v", err)
			}
		}
	}
	return nil
}

// compilePattern anchors p so it must match the whole value.
func compilePattern(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}

// validateClaimMetadata checks what a claim's metadata can be checked for
// without its template: form, family, sizes.
func validateClaimMetadata(field string, meta map[string]string) error {
	if len(meta) > MaxMetadataKeys {
		return Invalid(field, "at most %d keys", MaxMetadataKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		f := field + "." + k
		if err := checkMetadataName(f, k); err != nil {
			return err
		}
		if err := checkMetadataValue(f, meta[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkMetadataValue checks that v can be one environment variable's value.
func checkMetadataValue(field, v string) error {
	if len(v) > MaxMetadataValue {
		return Invalid(field, "at most %d bytes", MaxMetadataValue)
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return Invalid(field, "must be UTF-8 text without NUL bytes")
	}
	return nil
}

// CheckClaimMetadata checks a claim's metadata against the template: every key
// passes validateClaimMetadata, is declared in spec.claimMetadata and matches
// its pattern. The error names the claim's field (spec.metadata.<key>).
func (o *MachineTemplate) CheckClaimMetadata(meta map[string]string) error {
	const field = "spec.metadata"
	if err := validateClaimMetadata(field, meta); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		i := slices.IndexFunc(o.Spec.ClaimMetadata, func(d MetadataKey) bool { return d.Name == k })
		if i < 0 {
			return Invalid(field+"."+k, "template %s does not accept this key (%s)", o.Metadata.Name, o.acceptedKeys())
		}
		d := o.Spec.ClaimMetadata[i]
		if d.Pattern == "" {
			continue
		}
		re, err := compilePattern(d.Pattern)
		if err != nil {
			return Invalid(field+"."+k, "template %s has a bad pattern for this key: %v", o.Metadata.Name, err)
		}
		if !re.MatchString(meta[k]) {
			return Invalid(field+"."+k, "must match %s (template %s)", d.Pattern, o.Metadata.Name)
		}
	}
	return nil
}

func (o *MachineTemplate) acceptedKeys() string {
	if len(o.Spec.ClaimMetadata) == 0 {
		return "it accepts no claim metadata; an admin declares keys in its spec.claimMetadata"
	}
	names := make([]string, len(o.Spec.ClaimMetadata))
	for i, d := range o.Spec.ClaimMetadata {
		names[i] = d.Name
	}
	return "it accepts: " + strings.Join(names, ", ")
}

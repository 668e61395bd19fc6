package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hf-fleet/hf/lib/types"
)

// ForeignEnv are the variables named as one of hf-node's sections, or
// under one's prefix, that other tools set on the hosts hf runs on, which
// Load therefore never takes for hf-node's: HF_DEBUG is Hugging Face's
// (huggingface_hub logs at debug level), HF_API_TOKEN and HF_API_KEY hold a
// Hugging Face token in many programs (Haystack's among them), and
// HF_API_TOKEN is one letter from HF_API_TOKENS.
func ForeignEnv() []string {
	return []string{"HF_API_KEY", "HF_API_TOKEN", "HF_DEBUG"}
}

// IgnoredVar is an environment variable under the prefix of one of
// hf-node's sections that names none of its keys and is no near miss of
// one (HF_API_URL): Load takes it for another tool's and ignores it, and
// hf-node warns of it.
type IgnoredVar struct {
	// Name is the variable: "HF_API_URL".
	Name string
	// Section is the section whose prefix it has: "api".
	Section string
	// Variables are the section's own.
	Variables []string
}

// section is a section of keys (a mapping with fixed keys: api, cluster)
// and the variables that set them.
type section struct {
	key  string
	vars []string // the leaves', which the environment sets, sorted
	all  []string // and the lists of mappings', which are errors
}

// sections returns every section below s, nested ones too.
func (s *schema) sections(prefix string) []section {
	var out []section
	for _, name := range sortedKeys(s.fields) {
		f, key := s.fields[name], joinKey(prefix, name)
		if f.shape != shapeStruct {
			continue
		}
		sec := section{key: key}
		for _, l := range f.leaves(key) {
			sec.vars = append(sec.vars, EnvName(l.key))
		}
		sec.all = slices.Clone(sec.vars)
		for _, k := range f.objectLists(key) {
			sec.all = append(sec.all, EnvName(k))
		}
		slices.Sort(sec.all)
		if len(sec.vars) > 0 { // a section the environment cannot set is nobody's prefix
			out = append(out, sec)
		}
		out = append(out, f.sections(key)...)
	}
	return out
}

// checkEnvNames finds the variables of env, set and not empty, that are
// named as one of hf-node's sections or have its prefix but name none of
// its keys. A section's name is an error (HF_API: the environment sets a
// section key by key), and so is a near miss of one of its variables
// (HF_API_ADRESS); any other is ignored, as another tool's (HF_API_URL),
// but returned. Variables outside the sections' prefixes (HF_HOME,
// HF_TOKEN, HF_HUB_CACHE) are never looked at, nor those of ForeignEnv.
func checkEnvNames(env map[string]string, sch *schema) ([]error, []IgnoredVar) {
	known := map[string]bool{}
	for _, l := range sch.leaves("") {
		known[EnvName(l.key)] = true
	}
	for _, key := range sch.objectLists("") {
		known[EnvName(key)] = true
	}
	for _, name := range ForeignEnv() {
		known[name] = true
	}
	secs := sch.sections("")
	var errs []error
	var ignored []IgnoredVar
	for _, name := range sortedKeys(env) {
		if env[name] == "" || known[name] {
			continue
		}
		sec, ok := sectionOf(name, secs)
		if !ok {
			continue
		}
		switch near := nearestVar(name, EnvName(sec.key)+"_", sec.all); {
		case name == EnvName(sec.key):
			errs = append(errs, &envVarError{name: name, section: sec.key, vars: sec.vars})
		case near != "":
			errs = append(errs, &envVarError{name: name, section: sec.key, hint: near})
		default:
			ignored = append(ignored, IgnoredVar{Name: name, Section: sec.key, Variables: slices.Clone(sec.vars)})
		}
	}
	return errs, ignored
}

// sectionOf returns the innermost section that name is named as or has
// the prefix of ("HF_API", "HF_API_ADRESS": api).
func sectionOf(name string, secs []section) (section, bool) {
	var best section
	found := false
	for _, s := range secs {
		e := EnvName(s.key)
		if (name == e || strings.HasPrefix(name, e+"_")) && len(s.key) >= len(best.key) {
			best, found = s, true
		}
	}
	return best, found
}

// nearestVar returns the variable of vars whose name after prefix is
// within two edits of name's (as suggest finds a key), or "".
func nearestVar(name, prefix string, vars []string) string {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return ""
	}
	best, bestDist := "", 3
	for _, v := range vars {
		w := strings.TrimPrefix(v, prefix)
		if d := editDistance(rest, w); d < bestDist && d < len(w) {
			best, bestDist = v, d
		}
	}
	return best
}

// envVarError names a variable of a section's that is no key's.
type envVarError struct {
	name, section string
	vars          []string // when name is the section's own: its variables
	hint          string   // a variable spelled alike
}

func (e *envVarError) Error() string {
	if e.hint != "" {
		return fmt.Sprintf("config: unknown variable %s of the %s section; did you mean %s?", e.name, e.section, e.hint)
	}
	return fmt.Sprintf("config: %s names the section %s, which the environment sets key by key: %s", e.name, e.section, strings.Join(e.vars, ", "))
}

// Unwrap makes errors.Is true for both ErrUnknownKey and types.ErrInvalid.
func (e *envVarError) Unwrap() []error { return []error{ErrUnknownKey, types.ErrInvalid} }

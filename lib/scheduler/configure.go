package scheduler

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/hf-fleet/hf/lib/types"
)

// ConfigSources are the objects that configure a machine. Environment, Set
// and Provider may be nil.
type ConfigSources struct {
	Template    *types.MachineTemplate
	Environment *types.Environment
	Set         *types.MachineSet
	// Provider is the Provider object of the machine (the Environment's,
	// else the set's); its configurationItems say the types of the values.
	Provider *types.Provider
	// Instance and DriverType are the driver that makes the machine.
	Instance, DriverType string
}

// ProviderName is the Provider whose configuration a machine takes: its
// Environment's when it has one (env not nil, whatever that names, none
// included), else its MachineSet's (set may be nil too).
func ProviderName(env *types.Environment, set *types.MachineSet) string {
	switch {
	case env != nil:
		return env.Spec.Provider
	case set != nil:
		return set.Spec.Provider
	}
	return ""
}

// Resolved is what a machine is made with, per the proposal's precedence.
type Resolved struct {
	// Template is the template as the driver receives it: its entry for
	// the driver replaced by the merged configuration.
	Template types.MachineTemplate
	// Options are the merged configuration in string forms (the Machine's
	// spec.configurationOptions).
	Options map[string]string
	// Prefix starts the machine's name: the set's, else the Environment's,
	// else the template's machineNamePrefix.
	Prefix string
	// Endpoints are the template's protocols the Environment has an
	// endpoint for (the Machine's spec.connectEndpoints).
	Endpoints map[string]string
	// Provider names the machine's provider.
	Provider string
	// MachineType is the template's (default User), or Shared for a set an
	// event made for a Shared line.
	MachineType types.MachineType
	// Information are the machine information items the Provider
	// requires every machine to report.
	Information []string
}

// MissingInformation lists the required machine information info lacks.
func (r Resolved) MissingInformation(info map[string]string) []string {
	var out []string
	for _, k := range r.Information {
		if info[k] == "" {
			out = append(out, k)
		}
	}
	return out
}

// Resolve merges a machine's configuration in increasing precedence: the
// template's entry for the driver (by instance name, driver type or
// Provider name), the Environment's providerConfiguration, its
// templateSpecific entry for the template, then the MachineSet's
// providerConfiguration (the most specific). Values given as strings are
// turned into the JSON the Provider's configurationItems describe (an
// integer item "2" reaches the driver as 2, an array item as its list);
// an item the Provider does not define passes as a string. A required item
// that nothing sets and that has no default is an error naming it, and so
// is a value its item refuses.
func Resolve(p ConfigSources) (Resolved, error) {
	t := p.Template
	out := Resolved{Template: *t, Provider: p.DriverType, MachineType: cmp.Or(t.Spec.MachineType, types.MachineTypeUser)}
	if p.Set != nil && p.Set.Metadata.Annotations[AnnotationMachineType] == string(types.MachineTypeShared) {
		out.MachineType = types.MachineTypeShared
	}
	var items types.Properties
	if p.Provider != nil && p.Provider.DriverType() == p.DriverType {
		out.Provider = p.Provider.Metadata.Name
		items = p.Provider.Spec.ConfigurationItems
		for _, mi := range p.Provider.Spec.MachineInformation {
			if mi.Required {
				out.Information = append(out.Information, mi.Name)
			}
		}
	}

	// The template's entry, as JSON values by key.
	entry := map[string]json.RawMessage{}
	key, found := TemplateEntry(t, p.Instance, p.DriverType, out.Provider)
	if raw := t.Spec.ProviderConfiguration[key]; found && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &entry); err != nil {
			return out, types.Invalid("spec.providerConfiguration."+key, "must be a JSON object: %v", err)
		}
	}
	field := "spec.providerConfiguration." + key
	for k, v := range entry {
		if s, isString := jsonString(v); isString {
			if item := items.Get(k); item != nil {
				typed, err := item.Parse(field+"."+k, s)
				if err != nil {
					return out, err
				}
				entry[k] = typed
			}
		}
	}
	// The string overlays, lowest first.
	type layer struct {
		field string
		cfg   map[string]string
	}
	// A layer applies to the machines of its provider only (a claim of an
	// environment may land on another driver the template also serves).
	serves := func(provider string) bool {
		return provider == "" || provider == p.Instance || provider == p.DriverType ||
			(p.Provider != nil && p.Provider.Metadata.Name == provider && p.Provider.DriverType() == p.DriverType)
	}
	var layers []layer
	if e := p.Environment; e != nil && serves(e.Spec.Provider) {
		layers = append(layers, layer{"environment " + e.Metadata.Name + " spec.providerConfiguration", e.Spec.ProviderConfiguration},
			layer{"environment " + e.Metadata.Name + " spec.templateSpecific." + t.Metadata.Name, e.Spec.TemplateSpecific[t.Metadata.Name]})
	}
	if s := p.Set; s != nil && serves(s.Spec.Provider) {
		layers = append(layers, layer{"machine set " + s.Metadata.Name + " spec.providerConfiguration", s.Spec.ProviderConfiguration})
	}
	for _, l := range layers {
		for _, k := range slices.Sorted(maps.Keys(l.cfg)) {
			v := l.cfg[k]
			if item := items.Get(k); item != nil {
				typed, err := item.Parse(l.field+"."+k, v)
				if err != nil {
					return out, err
				}
				entry[k] = typed
				continue
			}
			b, _ := json.Marshal(v)
			entry[k] = b
		}
	}
	for _, item := range items {
		if _, ok := entry[item.Name]; ok || !item.Required || key == "" {
			continue
		}
		if item.Default == nil {
			return out, types.Invalid(field+"."+item.Name, "is required by provider %s and set by neither the template, the environment nor the machine set", out.Provider)
		}
		typed, err := item.Parse(field+"."+item.Name, *item.Default)
		if err != nil {
			return out, err
		}
		entry[item.Name] = typed
	}
	out.Options = make(map[string]string, len(entry))
	for k, v := range entry {
		out.Options[k] = stringForm(v)
	}
	if key == "" {
		// The template has no entry for this driver (the driver says so
		// when it validates the template): nothing to merge into.
		layers = nil
	}
	if key != "" {
		merged, err := json.Marshal(entry)
		if err != nil {
			return out, fmt.Errorf("configuration: %w", err)
		}
		pc := maps.Clone(t.Spec.ProviderConfiguration)
		if pc == nil {
			pc = map[string]json.RawMessage{}
		}
		pc[key] = merged
		if key != p.Instance && key != p.DriverType && p.DriverType != "" {
			pc[p.DriverType] = merged // found by the driver under its type
		}
		out.Template.Spec.ProviderConfiguration = pc
	}

	switch {
	case p.Set != nil && p.Set.Spec.MachineNamePrefix != "":
		out.Prefix = p.Set.Spec.MachineNamePrefix
	case p.Environment != nil && p.Environment.Spec.MachineNamePrefix != "":
		out.Prefix = p.Environment.Spec.MachineNamePrefix
	default:
		out.Prefix = t.Spec.MachineNamePrefix
	}
	if p.Environment != nil {
		for _, proto := range t.Spec.ConnectProtocols {
			if ep, ok := p.Environment.Spec.Endpoints[proto]; ok {
				if out.Endpoints == nil {
					out.Endpoints = map[string]string{}
				}
				out.Endpoints[proto] = ep
			}
		}
	}
	return out, nil
}

// jsonString returns the string a JSON string holds.
func jsonString(v json.RawMessage) (string, bool) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// stringForm is a JSON value's string form: a string as itself, a number
// or boolean as its text, a list or a map as compact JSON.
func stringForm(v json.RawMessage) string {
	if s, ok := jsonString(v); ok {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return buf.String()
	}
	return strconv.Quote(string(v))
}

// TemplateEntry is the key of t's providerConfiguration entry for a driver
// instance: its instance name, else its driver type, else the name of its
// Provider ("" when it has none), the first t has.
func TemplateEntry(t *types.MachineTemplate, instance, driverType, provider string) (string, bool) {
	for _, k := range []string{instance, driverType, provider} {
		if _, ok := t.Spec.ProviderConfiguration[k]; ok && k != "" {
			return k, true
		}
	}
	return "", false
}

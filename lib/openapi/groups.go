package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// nativeType is the native driver's type, whose template entry takes
// "groups": host groups each node allows in its own driver config.
const nativeType = "native"

// groupsKey is the configuration key of the native driver's groups.
const groupsKey = "groups"

// groupLayer is one providerConfiguration an Environment or a MachineSet
// lays over its machines' template entries (scheduler.Resolve), as the
// native driver of the nodes that could serve them would get it.
type groupLayer struct {
	field string // "spec.providerConfiguration"
	cfg   map[string]string
	// provider is the layer's own provider: it applies to the machines of
	// that provider only ("": every driver's).
	provider string
	// prov is the machine's Provider object (the Environment's, else the
	// set's), nil when there is none: its configurationItems turn string
	// values into the JSON the driver gets.
	prov *types.Provider
	// selector limits the nodes (the Environment's nodeSelector).
	selector map[string]string
	// template is the one template whose machines get the layer (a set's,
	// a templateSpecific entry's), nil when any or not known.
	template string
}

// checkGroups refuses, when an Environment or a MachineSet is written,
// native groups in its providerConfiguration that its machines could not
// be made with, as a template's own groups are refused when it is written:
// the claims would otherwise wait out their bind timeout and fail. Allowed
// groups are per node (each node's native driver config), known here from
// the nodes' reports, so a group is refused when no node that could serve
// the object allows it, or when no such node allows them all; the nodes
// that could serve it are those with a native driver of the object's
// provider (and matching the Environment's nodeSelector), Down ones too (a
// node in maintenance comes back with its config), and whose native driver
// the template has an entry for (a set's template, a templateSpecific
// entry's; any template for the Environment's own configuration, and when
// the template does not exist yet). When no node could, or
// one of them does not report its groups (an earlier release), nothing is
// refused: nothing is known. A value that would reach the driver as a
// string, not a list, is refused too: the driver refuses it at allocation.
func (s *Server) checkGroups(o types.Object) error {
	var layers []groupLayer
	var owner, env string // the machines' Provider, a set's Environment
	var set *types.MachineSet
	switch v := o.(type) {
	case *types.Environment:
		owner = v.Spec.Provider
		base := groupLayer{provider: v.Spec.Provider, selector: v.Spec.NodeSelector}
		l := base
		l.field, l.cfg = "spec.providerConfiguration", v.Spec.ProviderConfiguration
		layers = append(layers, l)
		for _, t := range slices.Sorted(maps.Keys(v.Spec.TemplateSpecific)) {
			l := base
			l.field, l.cfg, l.template = "spec.templateSpecific."+t, v.Spec.TemplateSpecific[t], t
			layers = append(layers, l)
		}
	case *types.MachineSet:
		owner, env, set = v.Spec.Provider, v.Spec.Environment, v
		layers = append(layers, groupLayer{field: "spec.providerConfiguration", cfg: v.Spec.ProviderConfiguration, provider: v.Spec.Provider, template: v.Spec.MachineTemplate})
	default:
		return nil
	}
	// Most objects give no groups: they cost no read.
	layers = slices.DeleteFunc(layers, func(l groupLayer) bool {
		_, ok := l.cfg[groupsKey]
		return !ok
	})
	if len(layers) == 0 {
		return nil
	}
	var selector map[string]string
	if env != "" {
		e, err := store.Get[types.Environment](s.st, types.KindEnvironment, env)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if e != nil {
			selector = e.Spec.NodeSelector
		}
		owner = scheduler.ProviderName(e, set)
	}
	prov, err := s.provider(owner)
	if err != nil {
		return err
	}
	nodes, err := store.List[types.Node](s.st, types.KindNode)
	if err != nil {
		return err
	}
	for _, l := range layers {
		l.prov = prov
		if env != "" {
			l.selector = selector
		}
		var tmpl *types.MachineTemplate
		if l.template != "" && types.ValidateName("", l.template) == nil {
			t, err := store.Get[types.MachineTemplate](s.st, types.KindMachineTemplate, l.template)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			tmpl = t
		}
		if err := l.check(nodes, tmpl); err != nil {
			return err
		}
	}
	return nil
}

// serves reports whether the layer reaches the machines native driver
// instance d makes of tmpl (nil: of any template), as scheduler.Resolve
// merges it: the layer is of d's provider, and the template has an entry
// for d (under its instance name, its type or a native Provider's name).
func (l groupLayer) serves(d types.NodeDriver, tmpl *types.MachineTemplate) bool {
	if d.Driver != nativeType {
		return false
	}
	prov := ""
	if l.prov != nil && l.prov.DriverType() == nativeType {
		prov = l.prov.Metadata.Name
	}
	if tmpl != nil {
		if _, ok := scheduler.TemplateEntry(tmpl, d.Name, nativeType, prov); !ok {
			return false
		}
	}
	p := l.provider
	return p == "" || p == d.Name || p == nativeType || (prov != "" && p == prov)
}

// check checks the layer's groups against the native drivers of nodes
// that would make machines of tmpl (nil: of any template).
func (l groupLayer) check(nodes []*types.Node, tmpl *types.MachineTemplate) error {
	field := l.field + "." + groupsKey
	value := l.cfg[groupsKey]
	type candidate struct {
		node    string
		allowed []string
	}
	var cands []candidate
	for _, n := range nodes {
		if !types.MatchLabels(l.selector, n.Metadata.Labels) {
			continue
		}
		for _, d := range n.Spec.Drivers {
			if l.serves(d, tmpl) {
				cands = append(cands, candidate{n.Metadata.Name + "/" + d.Name, d.AllowedGroups})
			}
		}
	}
	if len(cands) == 0 {
		return nil // no native machine gets it, as far as is known
	}
	var item *types.Property
	if l.prov != nil && l.prov.DriverType() == nativeType {
		item = l.prov.Spec.ConfigurationItems.Get(groupsKey)
	}
	if item == nil || item.ValueType != types.ValueArray {
		via := "name a Provider of driver native whose configurationItems declare groups with valueType array"
		if l.prov != nil {
			via = fmt.Sprintf("provider %s's configurationItems must declare groups with valueType array", l.prov.Metadata.Name)
		}
		return types.Invalid(field, "reaches the native driver as a string, which it refuses (it takes a list of group names): %s, or give the groups in the template's providerConfiguration.native", via)
	}
	var groups []string
	if err := json.Unmarshal([]byte(value), &groups); err != nil {
		return types.Invalid(field, "want a JSON list of group names, got %q", value)
	}
	for _, c := range cands {
		if c.allowed == nil {
			return nil // a node that does not say may allow them
		}
	}
	var names []string
	for _, c := range cands {
		names = append(names, c.node)
	}
	for i, g := range groups {
		if !slices.ContainsFunc(cands, func(c candidate) bool { return slices.Contains(c.allowed, g) }) {
			return types.Invalid(fmt.Sprintf("%s[%d]", field, i),
				"group %q is allowed on no node that could serve this (native drivers %s): a node's native driver config must list it in allowed_groups", g, strings.Join(names, ", "))
		}
	}
	for _, c := range cands {
		if !slices.ContainsFunc(groups, func(g string) bool { return !slices.Contains(c.allowed, g) }) {
			return nil
		}
	}
	return types.Invalid(field, "no node that could serve this allows all of %s together (native drivers %s, each must list them all in allowed_groups)",
		strings.Join(groups, ", "), strings.Join(names, ", "))
}

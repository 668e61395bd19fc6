package openapi

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// checkConfiguration checks the provider configuration an Environment, a
// MachineSet or a MachineTemplate carries against the configurationItems of
// the Provider it names, when that Provider exists and defines items: every
// key one of its items, every string value of the item's form (type,
// enum, bounds, lengths, pattern). Errors are 400 naming the key. What is
// required is checked where a machine's whole configuration is known, when
// it is made (the Machine's claim then fails saying which item is missing).
func (s *Server) checkConfiguration(o types.Object) error {
	switch v := o.(type) {
	case *types.Environment:
		items, err := s.providerItems(v.Spec.Provider)
		if err != nil || items == nil {
			return err
		}
		if err := items.CheckConfiguration("spec.providerConfiguration", v.Spec.ProviderConfiguration, false); err != nil {
			return err
		}
		for _, t := range slices.Sorted(maps.Keys(v.Spec.TemplateSpecific)) {
			if err := items.CheckConfiguration("spec.templateSpecific."+t, v.Spec.TemplateSpecific[t], false); err != nil {
				return err
			}
		}
	case *types.MachineSet:
		// The items of the Provider its machines take (the Environment's
		// first), as they are made.
		var env *types.Environment
		if v.Spec.Environment != "" {
			e, err := store.Get[types.Environment](s.st, types.KindEnvironment, v.Spec.Environment)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			env = e
		}
		items, err := s.providerItems(scheduler.ProviderName(env, v))
		if err != nil || items == nil {
			return err
		}
		return items.CheckConfiguration("spec.providerConfiguration", v.Spec.ProviderConfiguration, false)
	case *types.MachineTemplate:
		if s.cfg.ValidateTemplate != nil {
			if err := s.cfg.ValidateTemplate(*v); err != nil {
				var fe *types.FieldError
				if errors.As(err, &fe) {
					return badRequest(fe.Field, "%s", fe.Message)
				}
				return badRequest("spec.providerConfiguration", "%v", err)
			}
		}
		// An entry keyed by a Provider's name, in the proposal's string
		// form; a driver's structured entry is the driver's to check.
		for _, k := range slices.Sorted(maps.Keys(v.Spec.ProviderConfiguration)) {
			items, err := s.providerItems(k)
			if err != nil {
				return err
			}
			var cfg map[string]string
			if items == nil || json.Unmarshal(v.Spec.ProviderConfiguration[k], &cfg) != nil {
				continue
			}
			if err := items.CheckConfiguration("spec.providerConfiguration."+k, cfg, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// providerItems returns the configuration items of Provider name, or nil
// when it does not exist or defines none.
func (s *Server) providerItems(name string) (types.Properties, error) {
	p, err := s.provider(name)
	if p == nil || len(p.Spec.ConfigurationItems) == 0 {
		return nil, err
	}
	return p.Spec.ConfigurationItems, nil
}

// provider returns Provider name, nil when there is none.
func (s *Server) provider(name string) (*types.Provider, error) {
	if name == "" || types.ValidateName("", name) != nil {
		return nil, nil
	}
	p, err := store.Get[types.Provider](s.st, types.KindProvider, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return p, err
}

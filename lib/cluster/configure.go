package cluster

import (
	"cmp"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// resolve is how a machine of claim is made on driver instance in, in set
// (may be ""), per the proposal's precedence (see scheduler.Resolve): from
// the cache's template, Environment (the claim's, else the set's),
// MachineSet and Provider (the Environment's, else the set's).
func (n *Node) resolve(claim *types.MachineClaim, tmpl *types.MachineTemplate, set string, in Instance) (scheduler.Resolved, string, error) {
	src := scheduler.ConfigSources{Template: tmpl, Instance: in.Name, DriverType: in.Type}
	set = cmp.Or(claim.Metadata.Labels[LabelProvisionFor], set)
	if s, ok := cache.Typed[types.MachineSet](n.cache, types.KindMachineSet, set); ok {
		src.Set = s
	}
	env := claim.Spec.Environment
	if env == "" && src.Set != nil {
		env = src.Set.Spec.Environment
	}
	if e, ok := cache.Typed[types.Environment](n.cache, types.KindEnvironment, env); ok && env != "" {
		src.Environment = e
	}
	provider := scheduler.ProviderName(src.Environment, src.Set)
	if p, ok := cache.Typed[types.Provider](n.cache, types.KindProvider, provider); ok && provider != "" {
		src.Provider = p
	}
	r, err := scheduler.Resolve(src)
	r.Template.Spec.Resources = r.Template.Spec.Resources.AtLeast(n.cfg.MinMachine)
	return r, env, err
}

package cluster

import (
	"fmt"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// envCap is the cap claim c's Environment puts on machines of its template
// (spec.capacity[template]); ok is false when there is none.
func (n *Node) envCap(c *types.MachineClaim) (env string, limit int, ok bool) {
	if c.Spec.Environment == "" {
		return "", 0, false
	}
	e, err := store.Get[types.Environment](n.st, types.KindEnvironment, c.Spec.Environment)
	if err != nil {
		return "", 0, false
	}
	limit, ok = e.Spec.Capacity[c.Spec.MachineTemplate]
	return c.Spec.Environment, limit, ok
}

// capKey names the machines an environment cap counts.
func capKey(env, template string) string { return env + "/" + template }

// electDirect elects a claim outside any set. Its elector does, unless its
// Environment caps the claim's template: then the environment's owner does,
// so that one node counts the environment's machines of that template and
// the claims under way for them, and the cap holds cluster-wide; a claim
// that would pass the cap waits with the reason.
func (n *Node) electDirect(c *types.MachineClaim, elector bool) {
	env, limit, ok := n.envCap(c)
	if !ok {
		if elector {
			n.feedClaim(c)
		}
		return
	}
	if scheduler.Owner("env/"+env, n.peers.Members()) != n.cfg.Name {
		return // the environment's owner elects it
	}
	name, key := c.Metadata.Name, capKey(env, c.Spec.MachineTemplate)
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		return
	}
	live, claimed := 0, map[string]bool{}
	for _, m := range machines {
		if !m.Live() {
			continue
		}
		claimed[m.Spec.Claim] = true
		if m.Spec.Environment == env && m.Spec.MachineTemplate == c.Spec.MachineTemplate && m.Spec.Claim != name {
			live++
		}
	}
	for _, k := range n.underWay(n.pool.capped, name, claimed) {
		if k == key {
			live++
		}
	}
	if live >= limit {
		n.setWaiting(name, fmt.Sprintf("environment %s holds its capacity of %d machines of template %s", env, limit, c.Spec.MachineTemplate))
		return
	}
	n.pool.mu.Lock()
	n.pool.capped[name] = key
	n.pool.mu.Unlock()
	n.feedClaim(c)
}

package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// An Environment's spec.capacity caps the machines of a template in it
// cluster-wide, even when claims race through every node; a claim over the
// cap waits saying so and binds when a machine goes, or fails at its bind
// timeout. A claim waiting for a set that never has a machine fails at its
// bind timeout too.
func TestEnvironmentCapHolds(t *testing.T) {
	const limit, claims = 3, 9
	f := Start(t, 3, Options{Driver: `{"cpus": 100, "ram_gb": 1000, "delay": "50ms"}`})
	f.Put(0, Template("one", 1, 1))
	f.Put(0, &types.Environment{TypeMeta: types.TypeMeta{Kind: types.KindEnvironment}, Metadata: types.ObjectMeta{Name: "lab"},
		Spec: types.EnvironmentSpec{Provider: "test", Capacity: map[string]int{"one": limit}}})
	f.WaitEverywhere(types.KindEnvironment, "lab")
	capHolds(t, f, limit, claims, func(i int) *types.MachineClaim {
		c := Claim(fmt.Sprintf("e%d", i), "one", time.Minute)
		c.Spec.Environment = "lab"
		return c
	}, func(m *types.Machine) bool { return m.Spec.Environment == "lab" })
	for name, c := range f.Hosts[0].Claims() {
		if c.Status.Phase == types.ClaimRequested {
			assert.Contains(t, c.Status.Reason, "environment lab holds its capacity of 3 machines of template one", name)
		}
	}

	// Waiting past the bind timeout fails, under the cap and for a set.
	late := Claim("late", "one", time.Second)
	late.Spec.Environment = "lab"
	f.Put(2, late)
	nothing := Claim("nothing", "one", time.Second)
	nothing.Spec.BindStrategy = types.BindRequireMachineSets
	nothing.Spec.MachineSets = []string{"no-such-set"}
	f.Put(1, nothing)
	f.Put(0, machineSet("other", "one", 0, 1)) // sets exist, none serves "nothing"
	for _, name := range []string{"late", "nothing"} {
		c := waitClaim(t, f.Hosts[0], name, types.ClaimFailed)
		assert.Contains(t, c.Status.Reason, "bind timeout", name)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, f.Audit(nil))
	}, 10*time.Second, 50*time.Millisecond)
}

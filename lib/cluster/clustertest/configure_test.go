package clustertest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A machine is made per the proposal's configuration: template <
// Environment providerConfiguration < Environment templateSpecific[template]
// < MachineSet, typed by the Provider's items, into the Machine's
// spec.configurationOptions and what the driver receives; its name starts
// with the machineNamePrefix that applies (set > environment > template);
// its connectEndpoints are the template's protocols the Environment has an
// endpoint for.
func TestMachineConfiguredPerProposal(t *testing.T) {
	f := Start(t, 1, Options{})
	f.Put(0, &types.Provider{TypeMeta: types.TypeMeta{Kind: types.KindProvider}, Metadata: types.ObjectMeta{Name: "test"},
		Spec: types.ProviderSpec{ConfigurationItems: types.Properties{
			{Name: "label"}, {Name: "delay"}, {Name: "fail", DataType: types.DataBoolean}}}})
	f.Put(0, &types.Environment{TypeMeta: types.TypeMeta{Kind: types.KindEnvironment}, Metadata: types.ObjectMeta{Name: "lab"},
		Spec: types.EnvironmentSpec{Provider: "test", MachineNamePrefix: "lab",
			Endpoints:             map[string]string{"ssh": "wss://gw/ssh", "rdp": "wss://gw/rdp"},
			ProviderConfiguration: map[string]string{"label": "from-environment", "delay": "1ms"},
			TemplateSpecific:      map[string]map[string]string{"one": {"label": "from-template-specific", "fail": "false"}}}})
	tmpl := Template("one", 1, 1)
	tmpl.Spec.MachineNamePrefix = "tpl"
	tmpl.Spec.ConnectProtocols = []string{"ssh", "vnc"}
	tmpl.Spec.ProviderConfiguration["test"] = json.RawMessage(`{"label":"from-template","delay":"2ms"}`)
	f.Put(0, tmpl)

	c := Claim("c1", "one", time.Minute)
	c.Spec.Environment = "lab"
	f.Put(0, c)
	cl := waitClaim(t, f.Hosts[0], "c1", types.ClaimBound)
	m, err := store.Get[types.Machine](f.Hosts[0].Store, types.KindMachine, cl.Status.Machine)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(m.Metadata.Name, "lab-"), m.Metadata.Name)
	assert.Equal(t, map[string]string{"label": "from-template-specific", "delay": "1ms", "fail": "false"}, m.Spec.ConfigurationOptions)
	assert.Equal(t, map[string]string{"ssh": "wss://gw/ssh"}, m.Spec.ConnectEndpoints)
	assert.Equal(t, "test", m.Spec.Provider)
	assert.Equal(t, types.MachineTypeUser, m.Spec.MachineType)
	assert.Equal(t, "lab", m.Spec.Environment)
	var data struct {
		Config map[string]any `json:"config"`
	}
	require.NotNil(t, m.Status.Resource)
	require.NoError(t, json.Unmarshal(m.Status.Resource.Data, &data))
	assert.Equal(t, "from-template-specific", data.Config["label"], "the driver received the merged configuration")

	// No environment: the template's prefix and configuration alone.
	f.Put(0, Claim("c2", "one", time.Minute))
	cl = waitClaim(t, f.Hosts[0], "c2", types.ClaimBound)
	assert.True(t, strings.HasPrefix(cl.Status.Machine, "tpl-"), cl.Status.Machine)
	m, err = store.Get[types.Machine](f.Hosts[0].Store, types.KindMachine, cl.Status.Machine)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"label": "from-template", "delay": "2ms"}, m.Spec.ConfigurationOptions)
	assert.Empty(t, m.Spec.ConnectEndpoints)

	// A set's own configuration and prefix come first.
	set := machineSet("pool", "one", 1, 2)
	set.Spec.Environment = "lab"
	set.Spec.MachineNamePrefix = "pool"
	set.Spec.ProviderConfiguration = map[string]string{"label": "from-set"}
	f.Put(0, set)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var found bool
		for _, m := range f.Hosts[0].Machines() {
			if m.Spec.MachineSet == "pool" && m.Status.Phase == types.MachineRunning {
				found = true
				assert.True(c, strings.HasPrefix(m.Metadata.Name, "pool-"), m.Metadata.Name)
				assert.Equal(c, "from-set", m.Spec.ConfigurationOptions["label"])
			}
		}
		assert.True(c, found)
	}, 20*time.Second, 50*time.Millisecond)
}

// A Provider's required machineInformation must be reported for its
// machines (the validator of the proposal's discussion): a driver that does
// not report it gets no machine handed out, and the claim fails saying why.
func TestProviderRequiredInformation(t *testing.T) {
	f := Start(t, 1, Options{})
	f.Put(0, &types.Provider{TypeMeta: types.TypeMeta{Kind: types.KindProvider}, Metadata: types.ObjectMeta{Name: "test"},
		Spec: types.ProviderSpec{MachineInformation: types.Properties{{Name: "host", Required: true}, {Name: "ip", Required: true}}}})
	f.Put(0, &types.Environment{TypeMeta: types.TypeMeta{Kind: types.KindEnvironment}, Metadata: types.ObjectMeta{Name: "lab"},
		Spec: types.EnvironmentSpec{Provider: "test"}})
	f.Put(0, Template("one", 1, 1))
	c := Claim("c1", "one", 3*time.Second)
	c.Spec.Environment = "lab"
	f.Put(0, c)
	cl := waitClaim(t, f.Hosts[0], "c1", types.ClaimFailed)
	assert.Contains(t, cl.Status.Reason, "provider test requires machine information ip, which driver test did not report")
	require.Eventually(t, func() bool { return len(f.Hosts[0].Held()) == 0 }, 10*time.Second, 20*time.Millisecond, "nothing held")

	// The test driver reports host: a provider requiring only that serves.
	_, err := store.Update(f.Hosts[0].Store, types.KindProvider, "test", func(o *types.Provider) error {
		o.Spec.MachineInformation = types.Properties{{Name: "host", Required: true}, {Name: "ip"}}
		return nil
	})
	require.NoError(t, err)
	c = Claim("c2", "one", time.Minute)
	c.Spec.Environment = "lab"
	f.Put(0, c)
	waitClaim(t, f.Hosts[0], "c2", types.ClaimBound)
}

// A template of cpu 0 counts as the node's minimum machine size
// (scheduler.min_cpu): it does not pack without end (security issue: 70
// machines of cpu 0 on 4 CPUs).
func TestMinimumMachineSize(t *testing.T) {
	f := Start(t, 1, Options{Driver: `{"cpus": 4, "ram_gb": 100}`, Node: func(_ int, cfg *cluster.Config) {
		cfg.MinMachine = types.Resources{CPU: 1, RAMGB: 0.05}
	}})
	f.Put(0, Template("zero", 0, 0))
	for i := range 5 {
		f.Put(0, Claim(fmt.Sprintf("c%d", i), "zero", 2*time.Second))
	}
	phases := map[types.ClaimPhase]int{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		phases = map[types.ClaimPhase]int{}
		for _, cl := range f.Hosts[0].Claims() {
			phases[cl.Status.Phase]++
		}
		assert.Equal(c, 4, phases[types.ClaimBound])
		assert.Equal(c, 1, phases[types.ClaimFailed], "the fifth does not fit")
	}, 20*time.Second, 50*time.Millisecond)
	assert.Equal(t, 4, len(f.Hosts[0].Held()))
}

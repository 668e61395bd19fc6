package scheduler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func cfgSources() ConfigSources {
	one, eight := 1.0, 8.0
	def := "busybox"
	return ConfigSources{
		Template: &types.MachineTemplate{Metadata: types.ObjectMeta{Name: "small"}, Spec: types.MachineTemplateSpec{
			MachineNamePrefix: "tpl", ConnectProtocols: []string{"ssh", "vnc", "rdp"},
			ProviderConfiguration: map[string]json.RawMessage{"lab-provider": json.RawMessage(`{"image":"ubuntu","cores":"1","size":"small","tags":"[\"a\"]","cmd":["sleep","1"]}`)}}},
		Environment: &types.Environment{Metadata: types.ObjectMeta{Name: "lab"}, Spec: types.EnvironmentSpec{Provider: "lab-provider",
			MachineNamePrefix: "env", Endpoints: map[string]string{"ssh": "wss://gw/ssh", "rdp": "wss://gw/rdp", "guac": "wss://gw/guac"},
			ProviderConfiguration: map[string]string{"cores": "2", "size": "large"},
			TemplateSpecific:      map[string]map[string]string{"small": {"cores": "4"}, "big": {"cores": "8"}}}},
		Set: &types.MachineSet{Metadata: types.ObjectMeta{Name: "pool"}, Spec: types.MachineSetSpec{MachineNamePrefix: "set"}},
		Provider: &types.Provider{Metadata: types.ObjectMeta{Name: "lab-provider"}, Spec: types.ProviderSpec{Driver: "docker",
			ConfigurationItems: types.Properties{
				{Name: "image", Required: true, Default: &def},
				{Name: "cores", DataType: types.DataInteger, Minimum: &one, Maximum: &eight},
				{Name: "size", Enum: []string{"small", "large"}},
				{Name: "tags", ValueType: types.ValueArray},
				{Name: "zone", Required: true, Default: &def},
			}}},
		Instance: "docker", DriverType: "docker",
	}
}

// The proposal's precedence: MachineTemplate < Environment
// providerConfiguration < Environment templateSpecific[template] (< the
// MachineSet's own, the most specific), into configurationOptions and what
// the driver receives, values typed per the Provider's items.
func TestResolvePrecedence(t *testing.T) {
	src := cfgSources()
	r, err := Resolve(src)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"image": "ubuntu", "cores": "4", "size": "large", "tags": `["a"]`, "cmd": `["sleep","1"]`, "zone": "busybox"}, r.Options)
	assert.JSONEq(t, `{"image":"ubuntu","cores":4,"size":"large","tags":["a"],"cmd":["sleep","1"],"zone":"busybox"}`, string(r.Template.Spec.ProviderConfiguration["docker"]),
		"found by the driver under its type, typed")
	assert.Equal(t, "lab-provider", r.Provider)

	src.Set.Spec.ProviderConfiguration = map[string]string{"cores": "6"}
	r, err = Resolve(src)
	require.NoError(t, err)
	assert.Equal(t, "6", r.Options["cores"], "the set's own is the most specific")

	src.Environment.Spec.TemplateSpecific = nil
	src.Set.Spec.ProviderConfiguration = nil
	r, err = Resolve(src)
	require.NoError(t, err)
	assert.Equal(t, "2", r.Options["cores"], "environment over template")
	src.Environment = nil
	r, err = Resolve(src)
	require.NoError(t, err)
	assert.Equal(t, "1", r.Options["cores"], "the template alone")
	assert.Equal(t, "small", r.Options["size"])
}

func TestResolveChecksValues(t *testing.T) {
	src := cfgSources()
	src.Environment.Spec.TemplateSpecific["small"]["cores"] = "12"
	_, err := Resolve(src)
	require.ErrorContains(t, err, "environment lab spec.templateSpecific.small.cores: must be at most 8")

	src = cfgSources()
	src.Environment.Spec.ProviderConfiguration["size"] = "huge"
	_, err = Resolve(src)
	require.ErrorContains(t, err, "size: must be one of small, large")

	src = cfgSources()
	src.Provider.Spec.ConfigurationItems[4].Default = nil
	_, err = Resolve(src)
	require.ErrorContains(t, err, "zone: is required by provider lab-provider")
}

// machineNamePrefix: MachineSet > Environment > MachineTemplate.
func TestResolvePrefix(t *testing.T) {
	src := cfgSources()
	r, _ := Resolve(src)
	assert.Equal(t, "set", r.Prefix)
	src.Set.Spec.MachineNamePrefix = ""
	r, _ = Resolve(src)
	assert.Equal(t, "env", r.Prefix)
	src.Environment.Spec.MachineNamePrefix = ""
	r, _ = Resolve(src)
	assert.Equal(t, "tpl", r.Prefix)
	src.Set = nil
	src.Environment = nil
	r, _ = Resolve(src)
	assert.Equal(t, "tpl", r.Prefix)
}

// Connect endpoints are the template's protocols the Environment has an
// endpoint for.
func TestResolveEndpoints(t *testing.T) {
	r, err := Resolve(cfgSources())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ssh": "wss://gw/ssh", "rdp": "wss://gw/rdp"}, r.Endpoints)
	src := cfgSources()
	src.Environment = nil
	r, _ = Resolve(src)
	assert.Nil(t, r.Endpoints)
}

// An Environment's configuration applies to the machines of its provider
// only: a claim of the environment that lands on another driver the
// template serves gets the template's entry for that driver alone.
func TestResolveOtherDriver(t *testing.T) {
	src := cfgSources()
	src.Template.Spec.ProviderConfiguration["native"] = json.RawMessage(`{"entry":"sleep 60"}`)
	src.Instance, src.DriverType = "native", "native"
	r, err := Resolve(src)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"entry": "sleep 60"}, r.Options)
	assert.JSONEq(t, `{"entry":"sleep 60"}`, string(r.Template.Spec.ProviderConfiguration["native"]))
}

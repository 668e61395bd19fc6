package openapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reportDrivers writes node name's report as the node itself does, with
// labels and drivers (nodes make their own Node objects).
func (e *testEnv) reportDrivers(name string, labels map[string]string, drivers ...types.NodeDriver) {
	e.t.Helper()
	n := &types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: name, Labels: labels},
		Spec: types.NodeSpec{APIAddress: "127.0.0.1:8080", Drivers: drivers}, Status: types.NodeStatus{Phase: types.NodeUp}}
	_, err := e.st.Put(n, store.PutOptions{Create: true, Facets: []string{types.FacetReport}})
	require.NoError(e.t, err)
}

// withGroups is obj (a minimal map) with spec.providerConfiguration.groups
// and more spec fields (pairs).
func withGroups(obj map[string]any, groups string, spec ...any) map[string]any {
	s := obj["spec"].(map[string]any)
	if groups != "" {
		s["providerConfiguration"] = map[string]any{"groups": groups}
	}
	for i := 0; i+1 < len(spec); i += 2 {
		s[spec[i].(string)] = spec[i+1]
	}
	return obj
}

// Native groups given by an Environment or a MachineSet are refused when it
// is written, by the nodes' reports, as a template's groups are when it is
// written: a group no node that could serve it allows (400 naming the
// group), groups no one such node allows together, and a value that would
// reach the driver as a string. They were refused only at allocation, by
// every node in turn, and the claims failed at their bind timeout.
func TestGroupsCheckedWhenWritten(t *testing.T) {
	e := newTestEnv(t)
	native := func(name string, allowed ...string) types.NodeDriver {
		return types.NodeDriver{Name: name, Driver: nativeType, AllowedGroups: append([]string{}, allowed...)}
	}
	e.reportDrivers("n1", map[string]string{"rack": "a"}, native("native", "video", "audio"), types.NodeDriver{Name: "test", Driver: "test"})
	e.reportDrivers("n2", map[string]string{"rack": "b"}, native("native", "render"))
	e.reportDrivers("n3", map[string]string{"rack": "c"}, native("native"), types.NodeDriver{Name: "test", Driver: "test"})
	// A Provider of the native driver whose groups item makes the string a list.
	prov := minimal(types.KindProvider, "nat")
	prov["spec"] = map[string]any{"driver": nativeType, "configurationItems": []map[string]any{{"name": "groups", "valueType": "array"}}}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindProvider), adminTok, prov).code)
	plain := minimal(types.KindProvider, "nat-plain")
	plain["spec"] = map[string]any{"driver": nativeType}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindProvider), adminTok, plain).code)
	// A template the native driver serves, and one only the test driver does.
	natSmall := minimal(types.KindMachineTemplate, "nat-small")
	natSmall["spec"].(map[string]any)["providerConfiguration"] = map[string]any{nativeType: map[string]any{"entry": "sleep 60"}}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, natSmall).code)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small")).code)

	env := func(name, provider, groups string, spec ...any) map[string]any {
		return withGroups(minimal(types.KindEnvironment, name), groups, append([]any{"provider", provider}, spec...)...)
	}
	set := func(name, template, groups string, spec ...any) map[string]any {
		return withGroups(minimal(types.KindMachineSet, name), groups, append([]any{"machineTemplate", template}, spec...)...)
	}
	for _, tc := range []struct {
		name  string
		obj   map[string]any
		field string // "" : created
		says  string
	}{
		{"a group one node allows", env("e-video", "nat", `["video"]`), "", ""},
		{"groups one node allows together", env("e-both", "nat", `["video","audio"]`), "", ""},
		{"a group no node allows", env("e-docker", "nat", `["video","docker"]`), "spec.providerConfiguration.groups[1]",
			`group "docker" is allowed on no node that could serve this (native drivers n1/native, n2/native, n3/native)`},
		{"groups no one node allows together", env("e-split", "nat", `["video","render"]`), "spec.providerConfiguration.groups",
			"no node that could serve this allows all of video, render together"},
		{"the nodeSelector leaves out the node that allows it", env("e-rack", "nat", `["video"]`, "nodeSelector", map[string]string{"rack": "b"}),
			"spec.providerConfiguration.groups[0]", "(native drivers n2/native)"},
		{"a template's entry of the environment", env("e-tmpl", "nat", "", "templateSpecific", map[string]any{"nat-small": map[string]any{"groups": `["kmem"]`}}),
			"spec.templateSpecific.nat-small.groups[0]", `group "kmem" is allowed on no node`},
		{"the entry of a template no native driver serves", env("e-tmpl-test", "nat", "", "templateSpecific", map[string]any{"small": map[string]any{"groups": `["kmem"]`}}), "", ""},
		{"the native driver without a Provider gets a string", env("e-str", nativeType, `["video"]`), "spec.providerConfiguration.groups",
			"reaches the native driver as a string"},
		{"a Provider without a groups list item gives a string", env("e-plain", "nat-plain", `["video"]`), "spec.providerConfiguration.groups",
			"provider nat-plain's configurationItems must declare groups with valueType array"},
		{"another driver's groups are its own", env("e-test", "test", `["docker"]`), "", ""},
		{"a set of a native environment", set("s-docker", "nat-small", `["docker"]`, "environment", "e-video"),
			"spec.providerConfiguration.groups[0]", `group "docker" is allowed on no node`},
		{"a set of a native environment, allowed", set("s-audio", "nat-small", `["audio"]`, "environment", "e-video"), "", ""},
		{"a set of the native Provider", set("s-prov", "nat-small", `["docker"]`, "provider", "nat"),
			"spec.providerConfiguration.groups[0]", `group "docker" is allowed on no node`},
		{"a set of a template not made yet", set("s-later", "later", `["docker"]`, "provider", "nat"),
			"spec.providerConfiguration.groups[0]", `group "docker" is allowed on no node`},
		{"a set whose template no native driver serves", set("s-test", "small", `["docker"]`, "environment", "e-video"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", path(tc.obj["kind"].(string)), adminTok, tc.obj)
			if tc.field == "" {
				require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
				return
			}
			require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
			assert.Equal(t, tc.field, r.errBody(t).Field)
			assert.Contains(t, r.errBody(t).Message, tc.says)
		})
	}

	t.Run("an update is checked too", func(t *testing.T) {
		r := e.do("PUT", path(types.KindEnvironment, "e-video"), adminTok, env("e-video", "nat", `["shadow"]`))
		require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
		assert.Equal(t, "spec.providerConfiguration.groups[0]", r.errBody(t).Field)
		r = e.do("PUT", path(types.KindMachineSet, "s-audio"), adminTok, set("s-audio", "nat-small", `["shadow"]`, "environment", "e-video"))
		require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
		assert.Equal(t, "spec.providerConfiguration.groups[0]", r.errBody(t).Field)
	})

	t.Run("a node that does not report its groups may allow them", func(t *testing.T) {
		// An earlier release reports no allowedGroups: nothing is known.
		e.reportDrivers("n4", nil, types.NodeDriver{Name: "native", Driver: nativeType})
		r := e.do("POST", path(types.KindEnvironment), adminTok, env("e-old", "nat", `["docker"]`))
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	})
}

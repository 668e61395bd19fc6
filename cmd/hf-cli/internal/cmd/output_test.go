package cmd

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
	"go.yaml.in/yaml/v3"
)

func TestJSONToYAMLKeepsOrderAndTypes(t *testing.T) {
	in := `{"kind":"X","metadata":{"name":"a","labels":{"n":"123","b":"true","e":"","t":"2026-01-02T03:04:05Z"}},` +
		`"spec":{"cpu":2,"ram":1.5,"on":true,"list":["x","y"],"empty":[],"obj":{},"null":null,"multi":"a\nb"}}`
	out, err := jsonToYAML([]byte(in))
	require.NoError(t, err)
	assert.Equal(t, `kind: X
metadata:
  name: a
  labels:
    n: "123"
    b: "true"
    e: ""
    t: "2026-01-02T03:04:05Z"
spec:
  cpu: 2
  ram: 1.5
  on: true
  list:
    - x
    - y
  empty: []
  obj: {}
  "null": null
  multi: |-
    a
    b
`, string(out))

	// And it reads back as the same JSON value.
	var back any
	require.NoError(t, yaml.Unmarshal(out, &back))
	raw, err := json.Marshal(back)
	require.NoError(t, err)
	assert.JSONEq(t, in, string(raw))
}

func TestParseDocuments(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		defaultKind string
		names       []string
		wantErr     string
	}{
		{"json object", `{"kind":"Node","metadata":{"name":"a"}}`, "", []string{"a"}, ""},
		{"json stream", `{"kind":"Node","metadata":{"name":"a"}} {"kind":"Node","metadata":{"name":"b"}}`, "", []string{"a", "b"}, ""},
		{"json array", `[{"kind":"Node","metadata":{"name":"a"}},{"kind":"Node","metadata":{"name":"b"}}]`, "", []string{"a", "b"}, ""},
		{"json list", `{"kind":"NodeList","items":[{"metadata":{"name":"a"}}]}`, "Node", []string{"a"}, ""},
		{"yaml docs", "kind: Node\nmetadata: {name: a}\n---\n---\nkind: Node\nmetadata: {name: b}\n", "", []string{"a", "b"}, ""},
		{"yaml list", "kind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n", "", []string{"a"}, ""},
		{"default kind", "metadata: {name: a}\n", "Node", []string{"a"}, ""},
		{"numeric keys", "kind: Environment\nmetadata: {name: a}\nspec:\n  provider: p\n  endpoints: {22: ssh}\n", "", []string{"a"}, ""},
		{"lower-case kind", "kind: node\nmetadata: {name: a}\n", "", nil, `document 1: unknown kind "node"`},
		{"unknown field", "kind: Node\nmetadata: {name: a, nmae: b}\n", "", nil, `document 1 (node): json: unknown field "nmae"`},
		{"scalar", "just a string\n", "", nil, "want an object"},
		{"bad json", `{"kind":`, "", nil, "parse json"},
		{"empty", "\n", "", nil, "no objects found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := parseDocuments([]byte(tt.in), tt.defaultKind)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for i, d := range docs {
				names = append(names, d.Name)
				assert.Equal(t, i+1, d.Index)
				var m map[string]any
				require.NoError(t, json.Unmarshal(d.JSON, &m))
				assert.Equal(t, d.Kind, m["kind"], "the JSON sent carries the kind")
			}
			assert.Equal(t, tt.names, names)
		})
	}
}

func TestAgeAndLatency(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{5 * time.Second, "5s"},
		{119 * time.Second, "119s"},
		{5 * time.Minute, "5m"},
		{3 * time.Hour, "3h"},
		{72 * time.Hour, "3d"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, age(now, now.Add(-tt.ago)), tt.ago.String())
	}
	assert.Equal(t, "", age(now, time.Time{}))

	assert.Equal(t, "850µs", latency(850*time.Microsecond))
	assert.Equal(t, "12ms", latency(12*time.Millisecond+300*time.Microsecond))
	assert.Equal(t, "2.35s", latency(2345*time.Millisecond))
	for v, want := range map[float64]string{
		2: "2", 2.5: "2.5", 1.0 / 3: "0.33",
		// A template of a quarter CPU is not shown as 0.2, nor a node's
		// 1.25 free CPUs as 1.2 (a 0.25 claim would seem not to fit
		// five times); the dashboard shows two decimals too.
		0.25: "0.25", 1.25: "1.25", 0.05: "0.05", 23.539: "23.54", 0.999: "1", -0.5: "-0.5",
	} {
		assert.Equal(t, want, num(v), "%v", v)
	}
}

func TestKeygen(t *testing.T) {
	c := newCLI(t)
	r := c.run("cluster", "keygen")
	require.Equal(t, 0, r.code, r.err)
	key, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace([]byte(r.out))))
	require.NoError(t, err)
	assert.Len(t, key, 32)

	r2 := c.run("cluster", "keygen")
	assert.NotEqual(t, r.out, r2.out, "keys are random")

	// -o json is JSON, as for every other command.
	r = c.run("cluster", "keygen", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got struct{ Key string }
	require.NoError(t, json.Unmarshal([]byte(r.out), &got), r.out)
	key, err = base64.StdEncoding.DecodeString(got.Key)
	require.NoError(t, err)
	assert.Len(t, key, 32)
}

// A build with no version says "dev", as hf-node does (hf-cli said "devel").
func TestVersionUnstamped(t *testing.T) {
	c := newCLI(t)
	c.unversioned = true
	r := c.run("version", "--client")
	require.Equal(t, 0, r.code, r.err)
	assert.Regexp(t, `^hf-cli dev \(go\S+, \S+/\S+\)\n$`, r.out)
}

func TestVersionHealthWhoAmI(t *testing.T) {
	c := newCLI(t)
	r := c.run("version")
	require.Equal(t, 0, r.code, r.err)
	assert.Regexp(t, `^hf-cli 1\.2\.3-test \(go\S+, \S+/\S+\)\n$`, r.out)
	r = c.run("version", "-o", "json")
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	assert.Equal(t, "1.2.3-test", v.Version)
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
		Spec: types.NodeSpec{SoftwareVersion: "v9.9.9"}})
	r = c.run("version")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "node n1: hf-node v9.9.9\n", "the servers' versions")
	r = c.run("version", "--client")
	assert.NotContains(t, r.out, "node n1")

	r = c.run("cluster", "health")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, c.srv.URL+" is healthy and ready\n", r.out)

	r = c.run("whoami")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "FIELD\tVALUE\nname\tadmin\nrole\tadmin\n", r.out)
}

func TestResourceNames(t *testing.T) {
	for _, name := range []string{"claim", "claims", "machineclaim", "MachineClaim", "machineclaims"} {
		r, ok := resourceFor(name)
		require.True(t, ok, name)
		assert.Equal(t, "MachineClaim", r.Kind)
	}
	_, ok := resourceFor("gadget")
	assert.False(t, ok)
	// Every kind of the model has a resource, and names do not collide.
	seen := map[string]bool{}
	for _, r := range allResources() {
		for _, n := range append([]string{r.Use}, r.Aliases...) {
			assert.False(t, seen[n], "name %q used twice", n)
			seen[n] = true
		}
	}
	assert.Len(t, allResources(), len(types.Kinds()))
}

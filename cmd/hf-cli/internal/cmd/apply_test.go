package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

const templatesYAML = `# two templates
kind: MachineTemplate
metadata:
  name: small
  labels:
    size: s
spec:
  resources: {cpu: 1, ramGB: 2}
  providerConfiguration:
    test: {}
---
# a comment-only document is skipped
---
metadata:
  name: big
spec:
  resources:
    cpu: 8
    ramGB: 32
  providerConfiguration:
    docker:
      image: ubuntu:24.04
  connectProtocols: [ssh]
`

func TestCreateFromYAMLStdin(t *testing.T) {
	c := newCLI(t)
	c.stdin = templatesYAML
	r := c.run("template", "create", "-f", "-")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machinetemplate/small created\nmachinetemplate/big created\n", r.out)

	o, ok := c.srv.Object(types.KindMachineTemplate, "big")
	require.True(t, ok)
	big := o.(*types.MachineTemplate)
	assert.Equal(t, 32.0, big.Spec.Resources.RAMGB)
	assert.JSONEq(t, `{"image":"ubuntu:24.04"}`, string(big.Spec.ProviderConfiguration["docker"]))
	assert.Equal(t, []string{"ssh"}, big.Spec.ConnectProtocols)
	small, _ := c.srv.Object(types.KindMachineTemplate, "small")
	assert.Equal(t, map[string]string{"size": "s"}, small.Meta().Labels)

	// The server saw JSON with the YAML's field names and the kind filled in.
	var body map[string]any
	require.NoError(t, json.Unmarshal(c.srv.Requests()[1].Body, &body))
	assert.Equal(t, "MachineTemplate", body["kind"])
	assert.Contains(t, body["spec"], "providerConfiguration")

	// Creating again conflicts, for both documents.
	r = c.run("template", "create", "-f", "-")
	assert.Equal(t, ExitConflict, r.code)
	assert.Equal(t, 2, strings.Count(r.err, "hf-cli: create machinetemplate/"), r.err)
}

func TestCreateFromFileTopLevelMixedKinds(t *testing.T) {
	c := newCLI(t)
	path := filepath.Join(t.TempDir(), "objs.yaml")
	doc := templatesYAML[:strings.Index(templatesYAML, "---")] + `---
kind: MachineClaim
metadata: {name: c1}
spec: {machineTemplate: small, bindTimeout: 30s}
`
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	r := c.run("create", "-f", path, "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &list), r.out)
	assert.Equal(t, "List", list.Kind)
	assert.Len(t, list.Items, 2)
	cl, _ := c.srv.Object(types.KindMachineClaim, "c1")
	require.NotNil(t, cl)
	assert.Equal(t, "30s", cl.(*types.MachineClaim).Spec.BindTimeout.String())

	// At the top level every document must name its kind.
	c.stdin = "metadata: {name: x}\n"
	r = c.run("create", "-f", "-")
	assert.Equal(t, ExitError, r.code)
	assert.Contains(t, r.err, "stdin: document 1: no kind")
}

func TestCreateRejectsBadDocuments(t *testing.T) {
	c := newCLI(t)
	tests := []struct {
		name, args, stdin, want string
	}{
		{"wrong kind", "claim", "kind: Machine\nmetadata: {name: m}\n", "document 1 is a Machine, not a MachineClaim"},
		{"misspelt field", "claim", "metadata: {name: c}\nspec: {machineTempalte: x}\n", `unknown field "machineTempalte"`},
		{"no name", "claim", "spec: {machineTemplate: x}\n", "metadata.name is required"},
		{"invalid on server", "claim", "metadata: {name: Bad_Name}\nspec: {machineTemplate: x}\n", "invalid: metadata.name"},
		{"not yaml", "claim", "a: [1\n", "parse yaml"},
		{"empty", "claim", "# nothing\n", "no objects found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.stdin = tt.stdin
			r := c.run(tt.args, "create", "-f", "-")
			assert.NotEqual(t, 0, r.code)
			assert.Contains(t, r.err, tt.want)
		})
	}
	r := c.run("claim", "create", "-f", "/does/not/exist.yaml")
	assert.Equal(t, ExitError, r.code)
	assert.Contains(t, r.err, "no such file")
	r = c.run("claim", "create", "-f", "-", "--template", "x")
	assert.Equal(t, ExitUsage, r.code)
}

func TestApply(t *testing.T) {
	c := newCLI(t)
	path := filepath.Join(t.TempDir(), "set.json")
	write := func(min int, labels string) {
		doc := `{"kind":"MachineSet","metadata":{"name":"pool"` + labels + `},"spec":{"machineTemplate":"small",` +
			`"availabilityConfiguration":{"type":"Pool"},"minAvailable":` + string(rune('0'+min)) + `}}`
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	}

	write(1, "")
	r := c.run("set", "apply", "-f", path)
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool created\n", r.out)

	// The cluster writes status; apply must keep it.
	o, _ := c.srv.Object(types.KindMachineSet, "pool")
	set := o.(*types.MachineSet)
	set.Status = types.MachineSetStatus{Provisioned: 1, Available: 1}
	stored := c.srv.Put(set)

	r = c.run("apply", "-f", path)
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool unchanged\n", r.out)

	write(3, `,"labels":{"tier":"gold"}`)
	r = c.run("apply", "-f", path)
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool configured\n", r.out)
	reqs := c.srv.Requests()
	last := reqs[len(reqs)-1]
	assert.Equal(t, "PUT", last.Method)
	assert.Equal(t, stored.Meta().Version.String(), last.IfMatch, "update is conditional on the version read")

	o, _ = c.srv.Object(types.KindMachineSet, "pool")
	set = o.(*types.MachineSet)
	assert.Equal(t, 3, set.Spec.MinAvailable)
	assert.Equal(t, map[string]string{"tier": "gold"}, set.Metadata.Labels)
	assert.Equal(t, 1, set.Status.Provisioned, "status survives apply")

	// -o json prints the applied object.
	write(2, "")
	r = c.run("apply", "-f", path, "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got types.MachineSet
	require.NoError(t, json.Unmarshal([]byte(r.out), &got))
	assert.Equal(t, 2, got.Spec.MinAvailable)
	assert.Empty(t, got.Metadata.Labels, "labels follow the document")
}

func TestDeleteFromFile(t *testing.T) {
	c := newCLI(t)
	c.stdin = strings.Replace(templatesYAML, "metadata:\n  name: big", "kind: MachineTemplate\nmetadata:\n  name: big", 1)
	require.Equal(t, 0, c.run("create", "-f", "-").code)
	r := c.run("delete", "-f", "-")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machinetemplate/small deleted\nmachinetemplate/big deleted\n", r.out)

	r = c.run("delete", "-f", "-")
	assert.Equal(t, ExitNotFound, r.code)
	r = c.run("delete", "-f", "-", "--ignore-not-found")
	assert.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machinetemplate/small not found\nmachinetemplate/big not found\n", r.out)

	r = c.run("delete", "-f", "-", "template", "x")
	assert.Equal(t, ExitUsage, r.code)
}

func TestRoundTripListOutputThroughApply(t *testing.T) {
	c := newCLI(t)
	seedClaims(c)
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := c.run("claim", "list", "-o", format)
			require.Equal(t, 0, r.code, r.err)
			c.stdin = r.out
			r = c.run("apply", "-f", "-")
			require.Equal(t, 0, r.code, r.err)
			assert.Equal(t, "machineclaim/c1 unchanged\nmachineclaim/c2 unchanged\n", r.out)
		})
	}
}

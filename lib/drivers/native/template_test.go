package native

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

const goodSum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func rawTemplate(pc map[string]string) types.MachineTemplate {
	t := types.MachineTemplate{Metadata: types.ObjectMeta{Name: "t"},
		Spec: types.MachineTemplateSpec{ProviderConfiguration: map[string]json.RawMessage{}}}
	for k, v := range pc {
		t.Spec.ProviderConfiguration[k] = json.RawMessage(v)
	}
	return t
}

func TestValidateTemplate(t *testing.T) {
	img := `{"url": "https://example.com/tools.tar.gz", "sum": "` + goodSum + `", "tag": "tools"}`
	for _, tc := range []struct {
		name, instance string
		pc             map[string]string
		want           string // "" = valid
	}{
		{"minimal", "native", map[string]string{"native": `{"entry": "sleep 1"}`}, ""},
		{"everything", "native", map[string]string{"native": `{"images": [` + img + `],
			"entry": "{{.Disks.tools}}/run --claim \"$HF_CLAIM\" {{if .Disks.tools}}x{{end}}",
			"groups": ["users", "docker"], "env": {"LANG": "C.UTF-8", "PATH": "/opt/bin:/usr/bin:/bin"}}`}, ""},
		{"instance entry", "native/big", map[string]string{"native/big": `{"entry": "x"}`}, ""},
		{"type entry serves an instance", "native/big", map[string]string{"native": `{"entry": "x"}`}, ""},
		{"no entry for the driver", "native", map[string]string{"docker": `{}`},
			`spec.providerConfiguration: has no entry for "native"`},
		{"no entry for the instance", "native/big", map[string]string{"docker": `{}`},
			`spec.providerConfiguration: has no entry for "native/big" or "native"`},
		{"empty entry", "native", map[string]string{"native": `{}`},
			"spec.providerConfiguration.native.entry: required"},
		{"unknown key", "native", map[string]string{"native": `{"entry": "x", "image": []}`},
			`spec.providerConfiguration.native: unknown key "image"`},
		{"unknown key in the instance entry", "native/big", map[string]string{"native/big": `{"entyr": "x"}`},
			`spec.providerConfiguration.native/big: unknown key "entyr"`},
		{"images not a list", "native", map[string]string{"native": `{"entry": "x", "images": {}}`},
			"spec.providerConfiguration.native.images: want a list"},
		{"bad sum", "native", map[string]string{"native": `{"entry": "x", "images": [{"url": "http://h/i", "sum": "sha256:abc", "tag": "a"}]}`},
			"spec.providerConfiguration.native.images[0].sum: sha256 needs 64 hex digits, got 3"},
		{"md5 sum", "native", map[string]string{"native": `{"entry": "x", "images": [` + img + `, {"url": "http://h/i", "sum": "md5:abc", "tag": "b"}]}`},
			`spec.providerConfiguration.native.images[1].sum: unsupported checksum algorithm "md5"`},
		{"missing sum", "native", map[string]string{"native": `{"entry": "x", "images": [{"url": "http://h/i", "tag": "a"}]}`},
			"spec.providerConfiguration.native.images[0].sum: required"},
		{"missing url", "native", map[string]string{"native": `{"entry": "x", "images": [{"sum": "` + goodSum + `", "tag": "a"}]}`},
			"spec.providerConfiguration.native.images[0].url: required"},
		{"file url", "native", map[string]string{"native": `{"entry": "x", "images": [{"url": "file:///etc/passwd", "sum": "` + goodSum + `", "tag": "a"}]}`},
			"spec.providerConfiguration.native.images[0].url: want an absolute http or https URL"},
		{"missing tag", "native", map[string]string{"native": `{"entry": "x", "images": [{"url": "http://h/i", "sum": "` + goodSum + `"}]}`},
			"spec.providerConfiguration.native.images[0].tag: required"},
		{"tag with a slash", "native", map[string]string{"native": `{"entry": "x", "images": [{"url": "http://h/i", "sum": "` + goodSum + `", "tag": "../x"}]}`},
			"spec.providerConfiguration.native.images[0].tag: must start with a letter or digit"},
		{"dot tag", "native", map[string]string{"native": `{"entry": "x", "images": [{"url": "http://h/i", "sum": "` + goodSum + `", "tag": ".hf-native"}]}`},
			"images[0].tag: must start with a letter or digit"},
		{"duplicate tag", "native", map[string]string{"native": `{"entry": "x", "images": [` + img + `, ` + img + `]}`},
			`spec.providerConfiguration.native.images[1].tag: "tools" is used by an earlier image`},
		{"entry does not parse", "native", map[string]string{"native": `{"entry": "{{.Disks.tools"}`},
			"spec.providerConfiguration.native.entry: entry:1: unclosed action"},
		{"entry names an unknown disk", "native", map[string]string{"native": `{"images": [` + img + `], "entry": "{{.Disks.tool}}/run"}`},
			`spec.providerConfiguration.native.entry: refers to disk "tool" but no image has that tag (tags: tools)`},
		{"disk inside if", "native", map[string]string{"native": `{"entry": "{{if .User}}{{.Disks.nope}}{{end}}"}`},
			`entry: refers to disk "nope"`},
		// Claim metadata never enters the shell string (a user's "x; id #"
		// would run as the machine's user); the error says what to do instead.
		{"entry renders claim metadata", "native", map[string]string{"native": `{"entry": "echo {{.Meta.name}}"}`},
			`entry: claim metadata is not rendered into the entry (it would reach the shell as code); declare the key in the template's spec.claimMetadata and read it as an environment variable, e.g. "$name"`},
		{"metadata through $", "native", map[string]string{"native": `{"entry": "{{with .User}}{{$.Meta.name}}{{end}}"}`},
			`entry: claim metadata is not rendered`},
		{"metadata in a defined template", "native", map[string]string{"native": `{"entry": "{{define \"a\"}}{{.Meta.name}}{{end}}{{template \"a\" .}}"}`},
			`entry: claim metadata is not rendered`},
		{"unknown field", "native", map[string]string{"native": `{"entry": "{{.Secret}}"}`},
			`entry: refers to .Secret; an entry may use .Disks.<tag>, .User, .Home and .Workspace`},
		{"bad group", "native", map[string]string{"native": `{"entry": "x", "groups": ["users", "Bad Group"]}`},
			`spec.providerConfiguration.native.groups[1]: not a valid group name: "Bad Group"`},
		// Only groups the node allows: docker is root on the host.
		{"group not allowed", "native", map[string]string{"native": `{"entry": "x", "groups": ["users", "shadow"]}`},
			`spec.providerConfiguration.native.groups[1]: group "shadow" is not allowed on this node: the node's native driver config must list it in allowed_groups`},
		{"group not allowed, instance entry", "native/big", map[string]string{"native/big": `{"entry": "x", "groups": ["root"]}`},
			`spec.providerConfiguration.native/big.groups[0]: group "root" is not allowed on this node`},
		{"bad env name", "native", map[string]string{"native": `{"entry": "x", "env": {"A-B": "1"}}`},
			"spec.providerConfiguration.native.env.A-B: not a valid variable name"},
		{"reserved env", "native", map[string]string{"native": `{"entry": "x", "env": {"HOME": "/"}}`},
			"spec.providerConfiguration.native.env.HOME: is set by the driver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(drivers.Env{Instance: tc.instance})
			d.cfg.AllowedGroups = []string{"users", "docker"}
			err := d.ValidateTemplate(rawTemplate(tc.pc))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
}

// A node allows no group unless its config lists it.
func TestGroupsRefusedByDefault(t *testing.T) {
	d := newDriver(drivers.Env{Instance: Type})
	cfg, err := parseConfig([]byte(`{}`), hostFacts{DataDir: "/d", LookPath: fakeLook()})
	require.NoError(t, err)
	d.cfg = cfg
	require.NoError(t, d.ValidateTemplate(rawTemplate(map[string]string{"native": `{"entry": "x"}`})))
	err = d.ValidateTemplate(rawTemplate(map[string]string{"native": `{"entry": "x", "groups": ["users"]}`}))
	require.Error(t, err)
	assert.ErrorIs(t, err, types.ErrInvalid)
	assert.Contains(t, err.Error(), `spec.providerConfiguration.native.groups[0]: group "users" is not allowed on this node`)
}

func TestRenderEntry(t *testing.T) {
	tc := TemplateConfig{
		Images: []Image{{URL: "http://h/a", Sum: goodSum, Tag: "tools"}},
		Entry:  `{{.Disks.tools}}/run.sh --user {{.User}} --claim "$HF_CLAIM" --home {{.Home}} --ws {{.Workspace}}`,
	}
	require.NoError(t, tc.Validate())
	got, err := tc.renderEntry(EntryData{
		Disks: map[string]string{"tools": "/ws/hf-1/tools"},
		User:  "hf-1", Home: "/home/hf-1", Workspace: "/ws/hf-1",
	})
	require.NoError(t, err)
	assert.Equal(t, `/ws/hf-1/tools/run.sh --user hf-1 --claim "$HF_CLAIM" --home /home/hf-1 --ws /ws/hf-1`, got)
}

func TestEntryEnv(t *testing.T) {
	tmpl := types.MachineTemplate{Metadata: types.ObjectMeta{Name: "t"}, Spec: types.MachineTemplateSpec{
		ClaimMetadata: []types.MetadataKey{{Name: "claim"}, {Name: "GREETING"}, {Name: "name"}}}}
	env := entryEnv(tmpl,
		map[string]string{"LANG": "C", "PATH": "/opt/bin", "GREETING": "template"},
		map[string]string{
			"HF_CLAIM": "c1", "claim": "lower", "my-key": "dash", "GREETING": "claim", "name": "x; id > /tmp/PWNED #",
			"HOME": "/evil", "LD_PRELOAD": "/evil.so", "BASH_ENV": "/evil", "PATH": "/evil", "": "x", "9x": "digit",
			"NODE_OPTIONS": "--require /evil.js", "PYTHONPATH": "/evil", "PERL5OPT": "-Mevil", "GIT_SSH_COMMAND": "evil",
			"HF_SPOOF": "x", envMachineID: "spoof", "undeclared": "x",
		},
		"hf-0123456789", "hf-0123456789", "/home/hf-0123456789", "/bin/sh")
	assert.Equal(t, []string{
		"GREETING=template",
		"HF_CLAIM=c1",
		"HF_NATIVE_ID=hf-0123456789",
		"HOME=/home/hf-0123456789",
		"LANG=C",
		"LOGNAME=hf-0123456789",
		"PATH=/opt/bin",
		"SHELL=/bin/sh",
		"USER=hf-0123456789",
		"claim=lower",
		"name=x; id > /tmp/PWNED #",
	}, env)
	assert.Contains(t, entryEnv(tmpl, nil, nil, "i", "u", "/h", "/bin/sh"), "PATH=/usr/local/bin:/usr/bin:/bin")
}

func TestFieldRefs(t *testing.T) {
	entry := `{{.Disks.a}} {{range .Disks}}{{$.Disks.b}}{{end}} {{with .Disks.c}}{{.}}{{else}}{{.Disks.d}}{{end}} {{printf "%s" .Disks.e}} {{.User}}`
	tmpl, err := (TemplateConfig{Entry: entry, Images: []Image{{Tag: "a"}, {Tag: "b"}, {Tag: "c"}, {Tag: "d"}, {Tag: "e"}}}).entryTemplate()
	require.NoError(t, err)
	refs := fieldRefs(tmpl.Tree.Root)
	assert.ElementsMatch(t, [][]string{{"Disks", "a"}, {"Disks"}, {"Disks", "b"}, {"Disks", "c"}, {"Disks", "d"}, {"Disks", "e"}, {"User"}}, refs)
}

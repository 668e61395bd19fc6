package types

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func metaTemplate(keys ...MetadataKey) *MachineTemplate {
	return &MachineTemplate{Metadata: ObjectMeta{Name: "lab"}, Spec: MachineTemplateSpec{ClaimMetadata: keys}}
}

// Each family of variables that makes a shell, the loader, an interpreter or
// a tool run something is refused, whatever the template declares.
func TestUnsafeEnvNameFamilies(t *testing.T) {
	for _, name := range []string{
		"LD_PRELOAD", "LD_LIBRARY_PATH", "ld_audit", "DYLD_INSERT_LIBRARIES", "PATH", "IFS", "ENV", "BASH_ENV",
		"BASH_FUNC_x%%", "SHELLOPTS", "PS4", "PROMPT_COMMAND", "HOME", "USER", "user", "SHELL",
		"NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB",
		"GIT_SSH_COMMAND", "GIT_EXEC_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "MAVEN_OPTS", "LUA_INIT",
		"GCONV_PATH", "GLIBC_TUNABLES", "MALLOC_CHECK_", "HF_CLAIM", "hf_anything", "LESSOPEN", "PAGER",
	} {
		assert.NotEmpty(t, UnsafeEnvName(name), name)
	}
	for _, name := range []string{"name", "GREETING", "LAB_USER", "level", "TZ", "LANG", "course_id"} {
		assert.Empty(t, UnsafeEnvName(name), name)
	}
	assert.Contains(t, UnsafeEnvName("user"), "ignoring case")
}

func TestCheckClaimMetadata(t *testing.T) {
	tmpl := metaTemplate(MetadataKey{Name: "name"}, MetadataKey{Name: "level", Pattern: "[0-9]+"}, MetadataKey{Name: "NODE_OPTIONS"})
	for _, tc := range []struct {
		name  string
		meta  map[string]string
		field string
		want  string
	}{
		{"none", nil, "", ""},
		{"declared", map[string]string{"name": "x; id > /tmp/PWNED #", "level": "3"}, "", ""},
		{"undeclared", map[string]string{"colour": "red"}, "spec.metadata.colour", "template lab does not accept this key (it accepts: name, level, NODE_OPTIONS)"},
		// Declared or not, a hook is refused (a template cannot declare one,
		// and one stored before the rule existed still does not pass).
		{"hook even if declared", map[string]string{"NODE_OPTIONS": "--require /evil.js"}, "spec.metadata.NODE_OPTIONS", "may not be set by a claim: NODE_* variables"},
		{"loader", map[string]string{"LD_PRELOAD": "/evil.so"}, "spec.metadata.LD_PRELOAD", "LD_* variables change what a loader"},
		{"python", map[string]string{"PYTHONPATH": "/evil"}, "spec.metadata.PYTHONPATH", "PYTHON*"},
		{"perl", map[string]string{"PERL5OPT": "-Mevil"}, "spec.metadata.PERL5OPT", "PERL*"},
		{"git", map[string]string{"GIT_SSH_COMMAND": "evil"}, "spec.metadata.GIT_SSH_COMMAND", "GIT_*"},
		{"system key", map[string]string{"HF_CLAIM": "other"}, "spec.metadata.HF_CLAIM", "HF_* keys are set by hf itself"},
		{"not a variable name", map[string]string{"my-key": "x"}, "spec.metadata.my-key", "must be a variable name"},
		{"pattern", map[string]string{"level": "3; rm -rf /"}, "spec.metadata.level", "must match [0-9]+ (template lab)"},
		{"pattern is whole-value", map[string]string{"level": "3a"}, "spec.metadata.level", "must match"},
		{"NUL", map[string]string{"name": "a\x00b"}, "spec.metadata.name", "without NUL"},
		{"too long", map[string]string{"name": strings.Repeat("a", MaxMetadataValue+1)}, "spec.metadata.name", "at most 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tmpl.CheckClaimMetadata(tc.meta)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
			assert.Contains(t, fe.Message, tc.want)
		})
	}
	err := metaTemplate().CheckClaimMetadata(map[string]string{"name": "x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "it accepts no claim metadata; an admin declares keys in its spec.claimMetadata")
}

func TestTemplateDeclaresSafeKeysOnly(t *testing.T) {
	valid := func(keys ...MetadataKey) *MachineTemplate {
		tmpl := metaTemplate(keys...)
		tmpl.Kind = KindMachineTemplate
		tmpl.Spec.ProviderConfiguration = map[string]json.RawMessage{"test": json.RawMessage(`{}`)}
		tmpl.Spec.Resources = Resources{CPU: 1, RAMGB: 1}
		return tmpl
	}
	require.NoError(t, valid(MetadataKey{Name: "name", Pattern: "[a-z]+"}).Validate())
	for _, tc := range []struct {
		keys []MetadataKey
		want string
	}{
		{[]MetadataKey{{Name: "LD_PRELOAD"}}, "spec.claimMetadata[0].name: may not be set by a claim"},
		{[]MetadataKey{{Name: "ok"}, {Name: "BASH_ENV"}}, "spec.claimMetadata[1].name: may not be set by a claim"},
		{[]MetadataKey{{Name: "a b"}}, "spec.claimMetadata[0].name: must be a variable name"},
		{[]MetadataKey{{Name: "x"}, {Name: "x"}}, `spec.claimMetadata[1].name: "x" is declared twice`},
		{[]MetadataKey{{Name: "x", Pattern: "("}}, "spec.claimMetadata[0].pattern: not a regular expression"},
	} {
		err := valid(tc.keys...).Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// What a driver is given passes only as far as the template allows, whoever
// the caller is.
func TestMachineMetadata(t *testing.T) {
	tmpl := metaTemplate(MetadataKey{Name: "name"})
	got := tmpl.MachineMetadata(map[string]string{
		"name": "alice", MetaClaim: "c1", MetaMachine: "m1", "HF_OTHER": "x", "undeclared": "x",
		"LD_PRELOAD": "/evil.so", "PATH": "/evil",
	})
	assert.Equal(t, map[string]string{"name": "alice", MetaClaim: "c1", MetaMachine: "m1"}, got)
	assert.Empty(t, metaTemplate(MetadataKey{Name: "name"}).MachineMetadata(map[string]string{"name": "a\x00b"}), "NUL")
}

package openapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A claim's metadata must be declared by its template and may never name a
// loader, shell or interpreter hook: the root shell came from a user
// claim whose metadata reached an entry's shell string, and from keys such as
// NODE_OPTIONS reaching its environment.
func TestClaimMetadataOnlyAsTheTemplateDeclares(t *testing.T) {
	e := newTestEnv(t)
	tmpl := map[string]any{"kind": "MachineTemplate", "metadata": map[string]any{"name": "lab"},
		"spec": map[string]any{"resources": map[string]any{"cpu": 1, "ramGB": 1},
			"providerConfiguration": map[string]any{"test": map[string]any{}},
			"claimMetadata":         []any{map[string]any{"name": "name"}, map[string]any{"name": "level", "pattern": "[0-9]+"}}}}
	r := e.do(http.MethodPost, "/api/v1/machinetemplates", adminTok, tmpl)
	require.Equal(t, http.StatusCreated, r.code, string(r.body))

	claim := func(name, template string, meta map[string]string) map[string]any {
		return map[string]any{"kind": "MachineClaim", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"machineTemplate": template, "metadata": meta}}
	}
	r = e.do(http.MethodPost, "/api/v1/machineclaims", aliceTok, claim("ok", "lab", map[string]string{"name": "x; id > /tmp/PWNED #", "level": "2"}))
	require.Equal(t, http.StatusCreated, r.code, "shell text is fine as data: %s", r.body)

	for _, tc := range []struct {
		meta  map[string]string
		field string
		says  string
	}{
		{map[string]string{"NODE_OPTIONS": "--require /tmp/evil.js"}, "spec.metadata.NODE_OPTIONS", "NODE_*"},
		{map[string]string{"PYTHONPATH": "/tmp/evil"}, "spec.metadata.PYTHONPATH", "PYTHON*"},
		{map[string]string{"PERL5OPT": "-Mevil"}, "spec.metadata.PERL5OPT", "PERL*"},
		{map[string]string{"GIT_SSH_COMMAND": "sh -c evil"}, "spec.metadata.GIT_SSH_COMMAND", "GIT_*"},
		{map[string]string{"LD_PRELOAD": "/tmp/evil.so"}, "spec.metadata.LD_PRELOAD", "LD_*"},
		{map[string]string{"BASH_ENV": "/tmp/evil"}, "spec.metadata.BASH_ENV", "BASH_ENV"},
		{map[string]string{"HF_MACHINE": "someone-elses"}, "spec.metadata.HF_MACHINE", "set by hf itself"},
		{map[string]string{"colour": "red"}, "spec.metadata.colour", "template lab does not accept this key (it accepts: name, level)"},
		{map[string]string{"level": "2; reboot"}, "spec.metadata.level", "must match [0-9]+"},
		{map[string]string{"my-key": "x"}, "spec.metadata.my-key", "must be a variable name"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			r := e.do(http.MethodPost, "/api/v1/machineclaims", aliceTok, claim("bad", "lab", tc.meta))
			require.Equal(t, http.StatusBadRequest, r.code, string(r.body))
			b := r.errBody(t)
			assert.Equal(t, tc.field, b.Field)
			assert.Contains(t, b.Message, tc.says)
		})
	}

	r = e.do(http.MethodPost, "/api/v1/machineclaims", aliceTok, claim("nowhere", "missing", map[string]string{"name": "x"}))
	require.Equal(t, http.StatusBadRequest, r.code, string(r.body))
	assert.Equal(t, "spec.machineTemplate", r.errBody(t).Field)

	// Nor may an admin's update bring it in: a claim's spec, its metadata
	// included, cannot change after creation.
	r = e.do(http.MethodPut, "/api/v1/machineclaims/ok", adminTok, claim("ok", "lab", map[string]string{"LD_AUDIT": "/tmp/evil.so"}))
	require.Equal(t, http.StatusConflict, r.code, string(r.body))
	assert.Equal(t, "spec.metadata", r.errBody(t).Field)

	// And a template cannot declare a hook.
	tmpl["metadata"] = map[string]any{"name": "hooked"}
	tmpl["spec"].(map[string]any)["claimMetadata"] = []any{map[string]any{"name": "NODE_OPTIONS"}}
	r = e.do(http.MethodPost, "/api/v1/machinetemplates", adminTok, tmpl)
	require.Equal(t, http.StatusBadRequest, r.code, string(r.body))
	assert.Equal(t, "spec.claimMetadata[0].name", r.errBody(t).Field)
}

package cmd

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestCodeCreate(t *testing.T) {
	c := newCLI(t)
	r := c.run("code", "create", "ws", "--code", "s3cret-42", "--set", "pool", "--set", "pool2", "--event", "may",
		"--not-before", "2026-05-01T09:00:00+02:00", "--not-after", "2026-05-01T17:00:00Z")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 2, r.out)
	assert.Equal(t, "NAME\tSTATUS\tSETS\tEVENTS\tNOT-AFTER\tCREATED", got[0])
	assert.Regexp(t, `^ws\t\tpool,pool2\tmay\t2026-05-01T17:00:00Z\t\S+$`, got[1])

	o, ok := c.srv.Object(types.KindAccessCode, "ws")
	require.True(t, ok)
	spec := o.(*types.AccessCode).Spec
	assert.Equal(t, "s3cret-42", spec.Code)
	assert.Equal(t, []string{"pool", "pool2"}, spec.MachineSets)
	assert.Equal(t, []string{"may"}, spec.ScheduledEvents)
	assert.True(t, spec.NotBefore.Equal(time.Date(2026, 5, 1, 7, 0, 0, 0, time.UTC)), spec.NotBefore)
	assert.True(t, spec.NotAfter.Equal(time.Date(2026, 5, 1, 17, 0, 0, 0, time.UTC)), spec.NotAfter)

	var body map[string]any
	require.NoError(t, json.Unmarshal(c.srv.Requests()[0].Body, &body))
	assert.Equal(t, "AccessCode", body["kind"])
	assert.Equal(t, "2026-05-01T07:00:00Z", body["spec"].(map[string]any)["notBefore"], "times are sent in UTC")

	// -o json prints the created code; no times, no sets are fine.
	r = c.run("codes", "create", "open", "--code", "open-sesame", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var ac types.AccessCode
	require.NoError(t, json.Unmarshal([]byte(r.out), &ac), r.out)
	assert.Equal(t, "open", ac.Metadata.Name)
	assert.True(t, ac.Spec.NotBefore.IsZero())
	assert.Empty(t, ac.Spec.MachineSets)

	// The name is taken: conflict.
	r = c.run("code", "create", "ws", "--code", "other-code")
	assert.Equal(t, ExitConflict, r.code)
	assert.Contains(t, r.err, `hf-cli: conflict: accesscode "ws" already exists`)
}

func TestCodeCreateFromFile(t *testing.T) {
	c := newCLI(t)
	c.stdin = "kind: AccessCode\nmetadata: {name: a}\nspec: {code: abcd, machineSets: [pool]}\n---\n" +
		"metadata: {name: b}\nspec: {code: efgh, notAfter: 2026-06-01T00:00:00Z}\n"
	r := c.run("code", "create", "-f", "-")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "accesscode/a created\naccesscode/b created\n", r.out)
	o, ok := c.srv.Object(types.KindAccessCode, "b")
	require.True(t, ok)
	assert.True(t, o.(*types.AccessCode).Spec.NotAfter.Equal(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)))
}

func TestCodeCreateUsageErrors(t *testing.T) {
	c := newCLI(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no name", []string{"--code", "abcd"}, "code create needs NAME"},
		{"bad name", []string{"Not_A_Name", "--code", "abcd"}, "NAME: must be lower-case"},
		{"two names", []string{"a", "b", "--code", "abcd"}, "takes at most one NAME"},
		{"no code", []string{"ws"}, "code create needs --code C"},
		{"short code", []string{"ws", "--code", "abc"}, "--code must be 4 to 128 characters, got 3"},
		{"bad set", []string{"ws", "--code", "abcd", "--set", "Pool!"}, `--set: must be lower-case`},
		{"bad event", []string{"ws", "--code", "abcd", "--event", ""}, `--event: is required`},
		{"bad not-before", []string{"ws", "--code", "abcd", "--not-before", "tomorrow"}, `--not-before "tomorrow": want an RFC 3339 time`},
		{"date only not-after", []string{"ws", "--code", "abcd", "--not-after", "2026-05-01"}, `--not-after "2026-05-01": want an RFC 3339 time`},
		{"window backwards", []string{"ws", "--code", "abcd", "--not-before", "2026-05-02T00:00:00Z", "--not-after", "2026-05-01T00:00:00Z"},
			"--not-after 2026-05-01T00:00:00Z must be after --not-before 2026-05-02T00:00:00Z"},
		{"file and flags", []string{"-f", "-", "--code", "abcd"}, "code create -f takes no NAME and no code flags"},
		{"file and name", []string{"ws", "-f", "-"}, "code create -f takes no NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run(append([]string{"code", "create"}, tt.args...)...)
			assert.Equal(t, ExitUsage, r.code, r.err)
			assert.Contains(t, r.err, tt.want)
			assert.Empty(t, c.srv.Requests(), "nothing reaches the server")
		})
	}
}

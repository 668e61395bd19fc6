package cmd

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// TestUserCreate: by flags, and from a file (`user create` once had two
// subcommands of that name, and the file one could not be reached).
func TestUserCreate(t *testing.T) {
	c := newCLI(t)
	r := c.run("user", "create", "alice", "--role", "user", "--display-name", "Alice")
	require.Equal(t, 0, r.code, r.err)
	o, ok := c.srv.Object(types.KindUser, "alice")
	require.True(t, ok)
	assert.Equal(t, []string{"user"}, o.(*types.User).Spec.Roles)

	c.stdin = "kind: User\nmetadata: {name: bob}\nspec: {roles: [operator]}\n---\nmetadata: {name: carol}\nspec: {roles: [user]}\n"
	r = c.run("user", "create", "-f", "-")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "user/bob created\nuser/carol created\n", r.out)
	o, ok = c.srv.Object(types.KindUser, "bob")
	require.True(t, ok)
	assert.Equal(t, []string{"operator"}, o.(*types.User).Spec.Roles)

	for _, args := range [][]string{
		{"user", "create"},
		{"user", "create", "-f", "-", "dave"},
		{"user", "create", "-f", "-", "--role", "user"},
		{"user", "create", "a", "b"},
	} {
		r = c.run(args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.err)
	}
}

// TestNoTwoSubcommandsOfOneName: cobra runs the first of two subcommands
// with one name or alias, and the other cannot be reached.
func TestNoTwoSubcommandsOfOneName(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen := map[string]bool{}
		for _, sub := range c.Commands() {
			for _, n := range append([]string{sub.Name()}, sub.Aliases...) {
				assert.False(t, seen[n], "%s has two subcommands named %q", c.CommandPath(), n)
				seen[n] = true
			}
			walk(sub)
		}
	}
	walk(NewRootCmd(Env{}))
}

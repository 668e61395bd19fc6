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

// `user delete --cascade` asks the server to delete the user's sessions and
// claims with the user (DELETE ?cascade=true): the server does so only once
// it has found it would delete the user. The CLI used to delete them itself
// first, so a delete the server then refused (the last admin; no majority)
// had released the user's machines for nothing; before that, it deleted
// the user's tokens first, the caller's own among them.
func TestUserDeleteCascade(t *testing.T) {
	c := newCLI(t)
	for _, o := range []types.Object{
		&types.User{TypeMeta: types.TypeMeta{Kind: types.KindUser}, Metadata: types.ObjectMeta{Name: "mallory"}, Spec: types.UserSpec{Roles: []string{"user"}}},
		newClaim("c-m", "small", "mallory", nil),
		&types.Token{TypeMeta: types.TypeMeta{Kind: types.KindToken}, Metadata: types.ObjectMeta{Name: "t-m"}, Spec: types.TokenSpec{User: "mallory", Role: "user"}},
	} {
		c.srv.Put(o)
	}
	r := c.run("user", "delete", "mallory", "--cascade")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "user/mallory deleted\n", r.out)
	var deletes []string
	for _, req := range c.srv.Requests() {
		if req.Method == "DELETE" {
			deletes = append(deletes, req.Path+"?"+req.Query)
		}
	}
	assert.Equal(t, []string{"/api/v1/users/mallory?cascade=true"}, deletes, "one request: the server deletes the rest")
	_, ok := c.srv.Object(types.KindUser, "mallory")
	assert.False(t, ok)
	for kind, name := range map[string]string{types.KindMachineClaim: "c-m", types.KindToken: "t-m"} {
		_, ok := c.srv.Object(kind, name)
		assert.True(t, ok, "the CLI deletes no %s itself (the fake server does not cascade)", kind)
	}

	// Only users have --cascade.
	r = c.run("claim", "delete", "c-a", "--cascade")
	assert.Equal(t, ExitUsage, r.code, r.err)
}

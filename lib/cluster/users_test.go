package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A claim or session a user made as the user was deleted (on another node,
// where the token was still good) does not outlive the user: the user duty
// deletes what a deleted user holds, made before the delete or within
// userGoneGrace of it, and so releases its machine. It leaves users that
// exist, names that were never users (an admin's claim may give any), and
// what a user made again under the name holds.
func TestDeletedUsersClaimsGo(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Second)
	clk := testclock.New(t0)
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 8, "ram_gb": 16}`, now: clk.Now}
	tn.start()
	t.Cleanup(tn.stop)
	tn.put(template("small", 1, 1, `{}`))
	user := func(name string) *types.User {
		return &types.User{TypeMeta: types.TypeMeta{Kind: types.KindUser}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.UserSpec{Roles: []string{"user"}}}
	}
	claimOf := func(name, u string) *types.MachineClaim {
		c := claim(name, "small", time.Hour)
		c.Spec.User = u
		return c
	}
	session := func(name, u string) *types.Session {
		return &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.SessionSpec{User: u, Timeout: types.D(time.Hour)}}
	}
	gone := func(kind, name string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, err := tn.st.Get(kind, name)
			assert.True(c, errors.Is(err, store.ErrNotFound), "%s %s: %v", kind, name, err)
		}, 10*time.Second, 10*time.Millisecond)
	}
	there := func(kind, name string) {
		t.Helper()
		_, err := tn.st.Get(kind, name)
		require.NoError(t, err, "%s %s", kind, name)
	}

	tn.put(user("alice"))
	tn.put(user("carol"))
	tn.put(claimOf("a1", "alice"))
	tn.put(claimOf("b1", "bob")) // bob was never a user
	tn.put(claimOf("c1", "carol"))
	tn.put(session("s1", "alice"))
	// One that failed (nothing fits it) holds nothing: it stays, as
	// a plain delete of its user leaves it.
	tn.put(template("huge", 100, 1, `{}`))
	f1 := claim("f1", "huge", time.Second)
	f1.Spec.User = "alice"
	tn.put(f1)
	clk.Add(2 * time.Second)
	tn.waitPhase("f1", types.ClaimFailed)
	a1 := tn.waitPhase("a1", types.ClaimBound)
	tn.waitPhase("b1", types.ClaimBound)
	tn.waitPhase("c1", types.ClaimBound)

	_, err := tn.st.Delete(types.KindUser, "alice", types.Version{})
	require.NoError(t, err)
	gone(types.KindMachineClaim, "a1")
	gone(types.KindSession, "s1")
	gone(types.KindMachine, a1.Status.Machine)
	// Made the instant after the delete (it reaches this node later):
	// deleted as it comes.
	clk.Add(time.Second)
	tn.put(claimOf("a2", "alice"))
	gone(types.KindMachineClaim, "a2")

	// Past the grace, a claim naming alice is not one she made before she
	// went (a new alice's, whose record is on its way); nor is one of the
	// alice made again.
	clk.Add(2 * userGoneGrace)
	tn.put(claimOf("a3", "alice"))
	tn.put(user("alice"))
	tn.put(claimOf("a4", "alice"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tn.node.cache.WaitSeq(ctx, tn.st.Seq()))
	// Run the duty now (the queue runs it too), then look.
	tn.node.duties.reconcileUser("alice")
	tn.node.duties.reconcileUser("bob")
	tn.node.duties.reconcileUser("carol")
	for _, name := range []string{"a3", "a4", "b1", "c1", "f1"} {
		there(types.KindMachineClaim, name)
	}
}

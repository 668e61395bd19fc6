package openapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Access codes really gate (security issue, item 2): a claim presents the
// code's secret, never its object name; the claim then carries the code's
// name in a label users cannot write, the secret is not shown back to users
// (GET, list, watch), nor is which code a set is reserved for; labels and
// annotations under hf/ are the system's and admins'.
func TestAccessCodeSecretsAndReservedLabels(t *testing.T) {
	e := newTestEnv(t)
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	code := minimal(types.KindAccessCode, "ws-code")
	code["spec"].(map[string]any)["code"] = "correct-horse"
	code["spec"].(map[string]any)["machineSets"] = []any{"ws-pool"}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindAccessCode), adminTok, code).code)
	dup := minimal(types.KindAccessCode, "other")
	dup["spec"].(map[string]any)["code"] = "correct-horse"
	r := e.do("POST", path(types.KindAccessCode), adminTok, dup)
	require.Equal(t, http.StatusConflict, r.code, "a secret names one code")
	assert.Equal(t, "spec.code", r.errBody(t).Field)
	set := minimal(types.KindMachineSet, "ws-pool")
	set["spec"].(map[string]any)["availabilityConfiguration"] = map[string]any{"availability": "AccessCode", "value": "ws-code"}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineSet), adminTok, set).code)

	claim := func(name string, mod func(m, spec map[string]any)) response {
		o := minimal(types.KindMachineClaim, name)
		if mod != nil {
			mod(o["metadata"].(map[string]any), o["spec"].(map[string]any))
		}
		return e.do("POST", path(types.KindMachineClaim), aliceTok, o)
	}
	r = claim("by-name", func(_, s map[string]any) { s["accessCode"] = "ws-code" })
	assert.Equal(t, http.StatusForbidden, r.code, "the object name is not the secret")
	for _, key := range []string{types.LabelAccessCode, "hf/provision-for", "hf/session", "HF/access-code"} {
		r = claim("planted", func(m, _ map[string]any) { m["labels"] = map[string]any{key: "ws-code"} })
		require.Equal(t, http.StatusForbidden, r.code, key)
		assert.Equal(t, "metadata.labels."+key, r.errBody(t).Field)
	}
	r = claim("planted", func(m, _ map[string]any) { m["annotations"] = map[string]any{"hf/keepalive": "x"} })
	assert.Equal(t, http.StatusForbidden, r.code)

	r = claim("ok", func(_, s map[string]any) { s["accessCode"] = "correct-horse" })
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	assert.NotContains(t, string(r.body), "correct-horse", "the secret is not shown back")
	assert.Equal(t, "ws-code", r.obj(t)["metadata"].(map[string]any)["labels"].(map[string]any)[types.LabelAccessCode])
	for _, p := range []string{path(types.KindMachineClaim, "ok"), path(types.KindMachineClaim), path(types.KindMachineSet), path(types.KindMachineSet, "ws-pool")} {
		r = e.do("GET", p, aliceTok, nil)
		require.Equal(t, http.StatusOK, r.code)
		assert.NotContains(t, string(r.body), "correct-horse", p)
		assert.NotContains(t, string(r.body), `"value":"ws-code"`, p)
	}
	assert.Contains(t, string(e.do("GET", path(types.KindMachineClaim, "ok"), adminTok, nil).body), "correct-horse", "an admin sees it")

	// Nor in the answer to a keepalive of a session an admin made for her
	// with the secret, nor in an event whose set is reserved for the code.
	sess := minimal(types.KindSession, "given")
	sess["spec"].(map[string]any)["accessCode"] = "correct-horse"
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), adminTok, sess).code)
	r = e.do("POST", path(types.KindSession, "given")+"/keepalive", aliceTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.NotContains(t, string(r.body), "correct-horse", "the keepalive's answer")
	ev := minimal(types.KindScheduledEvent, "ws")
	ev["spec"].(map[string]any)["requiredMachines"] = []any{map[string]any{"machineTemplate": "small", "count": 1,
		"createMachineSet": map[string]any{"availabilityConfiguration": map[string]any{"availability": "AccessCode", "value": "ws-code"}}}}
	r = e.do("POST", path(types.KindScheduledEvent), adminTok, ev)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	for _, p := range []string{path(types.KindScheduledEvent, "ws"), path(types.KindScheduledEvent)} {
		r = e.do("GET", p, aliceTok, nil)
		require.Equal(t, http.StatusOK, r.code)
		assert.NotContains(t, string(r.body), "ws-code", p)
	}
	assert.Contains(t, string(e.do("GET", path(types.KindScheduledEvent, "ws"), adminTok, nil).body), `"value":"ws-code"`)
	assert.Contains(t, string(e.do("GET", path(types.KindMachineSet, "ws-pool"), adminTok, nil).body), `"value":"ws-code"`)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events, res := e.openStream(ctx, path(types.KindMachineClaim)+"?watch=true", aliceTok)
	defer res.Body.Close()
	got := nextPut(t, events)
	assert.Equal(t, "ok", got.Name)
	assert.NotContains(t, string(got.Object), "correct-horse", "nor in the watch stream")
}

// Users see only their own machines (security issue, item 5): those their
// claims are bound to, a shared machine by every user bound to it; another
// user's machine is 404.
func TestUsersSeeOnlyTheirMachines(t *testing.T) {
	t.Run("store", func(t *testing.T) { testUsersSeeOnlyTheirMachines(t, newTestEnv(t)) })
	t.Run("index", func(t *testing.T) {
		st := openStore(t)
		claimsOf, calls := indexedOf(t, st, types.KindMachineClaim, func(c *types.MachineClaim) string { return c.Spec.User })
		testUsersSeeOnlyTheirMachines(t, newTestEnvOn(t, st, func(c *Config) { c.ClaimsOf = claimsOf }))
		assert.Positive(t, calls.Load(), "the index found alice's claims")
	})
}

func testUsersSeeOnlyTheirMachines(t *testing.T, e *testEnv) {
	put := func(o types.Object) {
		_, err := e.st.Put(o, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	machine := func(name string, mt types.MachineType, claim string) *types.Machine {
		return &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.MachineSpec{MachineTemplate: "small", MachineType: mt, Node: "n1", Driver: "test", Claim: claim}}
	}
	bound := func(name, user, m string, shared bool) *types.MachineClaim {
		c := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.MachineClaimSpec{MachineTemplate: "small", User: user}}
		c.Status.Binding = &types.ClaimBinding{Round: 1, Node: "n1", Driver: "test", Machine: m, Phase: types.BindingBound, Shared: shared}
		return c
	}
	put(machine("m-alice", types.MachineTypeUser, "a1"))
	put(machine("m-bob", types.MachineTypeUser, "b1"))
	put(machine("m-shared", types.MachineTypeShared, ""))
	put(machine("m-warm", types.MachineTypeUser, ""))
	put(bound("a1", "alice", "m-alice", false))
	put(bound("b1", "bob", "m-bob", false))
	put(bound("a2", "alice", "m-shared", true))
	put(bound("b2", "bob", "m-shared", true))

	names := func(tok string) []string {
		var out []string
		for _, it := range e.do("GET", path(types.KindMachine), tok, nil).obj(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"m-alice", "m-shared"}, names(aliceTok))
	assert.Equal(t, []string{"m-bob", "m-shared"}, names(bobTok))
	assert.Len(t, names(adminTok), 4)
	assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindMachine, "m-bob"), aliceTok, nil).code)
	assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindMachine, "m-warm"), aliceTok, nil).code)
	assert.Equal(t, http.StatusOK, e.do("GET", path(types.KindMachine, "m-shared"), aliceTok, nil).code)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events, res := e.openStream(ctx, path(types.KindMachine)+"?watch=true", aliceTok)
	defer res.Body.Close()
	seen := map[string]bool{}
	for len(seen) < 2 {
		seen[nextPut(t, events).Name] = true
	}
	assert.Equal(t, map[string]bool{"m-alice": true, "m-shared": true}, seen)

	// The stream follows alice's claims as they change, though it sends
	// no claims: a warm machine bound to a new claim of hers becomes hers,
	// and one whose claim went to bob is gone for her.
	put(bound("a3", "alice", "m-warm", false))
	assert.Equal(t, "m-warm", nextPut(t, events).Name, "sent as it is once her claim names it")
	m := machine("m-warm", types.MachineTypeUser, "a3")
	m.Spec.Round = 1
	_, err := e.st.Put(m, store.PutOptions{})
	require.NoError(t, err)
	assert.Equal(t, "m-warm", nextPut(t, events).Name, "and as it changes")
	a1 := bound("a1", "bob", "m-alice", false)
	_, err = e.st.Put(a1, store.PutOptions{})
	require.NoError(t, err)
	_, err = e.st.Put(machine("m-alice", types.MachineTypeUser, "a1-bob"), store.PutOptions{})
	require.NoError(t, err)
	_, err = e.st.Put(machine("m-bob", types.MachineTypeUser, "b1-again"), store.PutOptions{})
	require.NoError(t, err)
	_, err = e.st.Put(machine("m-shared", types.MachineTypeShared, "x"), store.PutOptions{})
	require.NoError(t, err)
	got := next(t, events)
	assert.Equal(t, "delete", got.name, "m-alice's claim is bob's now")
	assert.Equal(t, "m-alice", got.data.Name)
	assert.Equal(t, "m-shared", nextPut(t, events).Name, "m-bob stays hidden")
}

// nextPut returns the next put event of a stream (skipping the end of the
// snapshot and keepalives).
func nextPut(t *testing.T, ch <-chan sseEvent) WatchEvent {
	t.Helper()
	for {
		if ev := next(t, ch); ev.name == WatchPut {
			return ev.data
		}
	}
}

// A stream's object is shared with the cache and the other streams of the
// event: present blanks a user's secrets in a copy, never in it.
func TestPresentLeavesSharedObjectAlone(t *testing.T) {
	user := Principal{Name: "alice", User: "alice", Role: RoleUser}
	claim := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: "c"},
		Spec: types.MachineClaimSpec{User: "alice", AccessCode: "correct-horse"}}
	set := &types.MachineSet{TypeMeta: types.TypeMeta{Kind: types.KindMachineSet}, Metadata: types.ObjectMeta{Name: "s"},
		Spec: types.MachineSetSpec{AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: "AccessCode", Value: "ws-code"}}}
	session := &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: "s"},
		Spec: types.SessionSpec{User: "alice", AccessCode: "correct-horse"}}
	token := &types.Token{TypeMeta: types.TypeMeta{Kind: types.KindToken}, Metadata: types.ObjectMeta{Name: "t"},
		Spec: types.TokenSpec{User: "alice", Hash: "00ff", Salt: "11ee"}}
	for _, obj := range []types.Object{claim, set, session, token} {
		for _, p := range []Principal{user, {Name: "admin", User: "admin", Role: RoleAdmin}} {
			data, err := present(p, store.Record{Kind: obj.GetKind(), Name: obj.Meta().Name}, obj)
			require.NoError(t, err)
			if !p.Staff() || obj.GetKind() == types.KindToken {
				assert.NotContains(t, string(data), "correct-horse")
				assert.NotContains(t, string(data), "ws-code")
				assert.NotContains(t, string(data), "00ff")
			}
		}
	}
	assert.Equal(t, "correct-horse", claim.Spec.AccessCode, "the shared claim keeps its code")
	assert.Equal(t, "ws-code", set.Spec.AvailabilityConfiguration.Value)
	assert.Equal(t, "correct-horse", session.Spec.AccessCode)
	assert.Equal(t, "00ff", token.Spec.Hash)
}

// A user's access codes that match none are paced: ten at once, then one
// per codeGuessEvery; while they wait every code is refused unchecked (a
// right one too), and admins are not paced.
func TestAccessCodeGuessesArePaced(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	e := newTestEnv(t, func(c *Config) { c.Now = clock })
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	code := minimal(types.KindAccessCode, "lab-code")
	code["spec"].(map[string]any)["code"] = "correct-horse"
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindAccessCode), adminTok, code).code)
	n := 0
	claim := func(tok, secret string) response {
		n++
		o := minimal(types.KindMachineClaim, fmt.Sprintf("c-%d", n))
		spec := o["spec"].(map[string]any)
		spec["accessCode"] = secret
		spec["user"] = map[string]string{aliceTok: "alice", bobTok: "bob", adminTok: "alice"}[tok]
		return e.do("POST", path(types.KindMachineClaim), tok, o)
	}

	for i := range codeGuessBurst {
		require.Equal(t, http.StatusForbidden, claim(aliceTok, fmt.Sprintf("guess-%d", i)).code, "miss %d", i)
	}
	r := claim(aliceTok, "guess-next")
	require.Equal(t, http.StatusTooManyRequests, r.code, "%s", r.body)
	assert.Equal(t, "spec.accessCode", r.errBody(t).Field)
	assert.Equal(t, "6", r.header.Get("Retry-After"))
	assert.Equal(t, http.StatusTooManyRequests, claim(aliceTok, "correct-horse").code, "a right code tells nothing while she waits")
	assert.Equal(t, http.StatusCreated, claim(bobTok, "correct-horse").code, "another user is not held up")
	assert.Equal(t, http.StatusForbidden, claim(adminTok, "guess-admin").code, "admins are not paced")

	advance(codeGuessEvery)
	assert.Equal(t, http.StatusCreated, claim(aliceTok, "correct-horse").code, "checked again after the pause")
	assert.Equal(t, http.StatusForbidden, claim(aliceTok, "guess-late").code)
	assert.Equal(t, http.StatusTooManyRequests, claim(aliceTok, "correct-horse").code, "one miss per pause")
}

// To a user, a secret of a code that is disabled, not yet valid, or grants
// something else is refused as one that matches no code, and counts as a
// miss: the answer told a guesser that the secret was a code's. Staff are
// told which check failed.
func TestAccessCodeRefusalsTellNothing(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newTestEnv(t, func(c *Config) { c.Now = func() time.Time { return now } })
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	for name, spec := range map[string]map[string]any{
		"grants-zzz": {"code": "alpha-777", "machineSets": []any{"zzz"}},
		"off":        {"code": "beta-777", "disabled": true},
		"later":      {"code": "gamma-777", "notBefore": now.Add(time.Hour).Format(time.RFC3339)},
	} {
		code := minimal(types.KindAccessCode, name)
		code["spec"] = spec
		require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindAccessCode), adminTok, code).code, name)
	}
	n := 0
	claim := func(tok, secret string) response {
		n++
		o := minimal(types.KindMachineClaim, fmt.Sprintf("c-%d", n))
		o["spec"].(map[string]any)["accessCode"] = secret
		o["spec"].(map[string]any)["bindStrategyMachineSets"] = []any{"other"}
		return e.do("POST", path(types.KindMachineClaim), tok, o)
	}
	miss := claim(aliceTok, "wrong-777")
	require.Equal(t, http.StatusForbidden, miss.code)
	for _, secret := range []string{"alpha-777", "beta-777", "gamma-777"} {
		r := claim(aliceTok, secret)
		require.Equal(t, http.StatusForbidden, r.code, secret)
		assert.Equal(t, miss.errBody(t), r.errBody(t), "%s reads as a secret of no code", secret)
	}
	assert.Equal(t, "spec.accessCode", miss.errBody(t).Field)
	r := claim(adminTok, "alpha-777")
	require.Equal(t, http.StatusForbidden, r.code)
	assert.Equal(t, "the access code does not grant machine set other", r.errBody(t).Message, "staff are told")
	for i := 4; i < codeGuessBurst; i++ {
		require.Equal(t, http.StatusForbidden, claim(aliceTok, "alpha-777").code)
	}
	assert.Equal(t, http.StatusTooManyRequests, claim(aliceTok, "alpha-777").code, "each refusal was a miss")
}

// A user who holds live claims or sessions is not deleted: their machines
// would run on for nobody. Once they hold none, the user goes.
func TestDeleteUserWhoHoldsClaims(t *testing.T) {
	e := newTestEnv(t)
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	u := minimal(types.KindUser, "carol")
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindUser), adminTok, u).code)
	claim := minimal(types.KindMachineClaim, "c-carol")
	claim["spec"].(map[string]any)["user"] = "carol"
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), adminTok, claim).code)
	session := minimal(types.KindSession, "s-carol")
	session["spec"].(map[string]any)["user"] = "carol"
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), adminTok, session).code)

	r := e.do("DELETE", path(types.KindUser, "carol"), adminTok, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "user carol still holds 1 live claims and 1 sessions")
	assert.Contains(t, r.errBody(t).Message, "hf-cli user delete --cascade")
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindSession, "s-carol"), adminTok, nil).code)
	require.Equal(t, http.StatusConflict, e.do("DELETE", path(types.KindUser, "carol"), adminTok, nil).code, "the claim still holds it")
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindMachineClaim, "c-carol"), adminTok, nil).code)
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindUser, "carol"), adminTok, nil).code)
}

// DELETE ?cascade=true deletes the user's sessions and claims with it, and
// nobody else's; a delete that is refused (the last admin) deletes none of
// them: hf-cli deleted them before asking, and released the last admin's
// machines for nothing.
func TestDeleteUserCascade(t *testing.T) {
	e, bearer := newBootstrappedEnv(t)
	e.do("POST", path(types.KindMachineTemplate), bearer, minimal(types.KindMachineTemplate, "small"))
	e.makeUser("carol", RoleUser)
	e.makeUser("dave", RoleUser)
	owned := func(kind, name, user string) {
		o := minimal(kind, name)
		o["spec"].(map[string]any)["user"] = user
		require.Equal(t, http.StatusCreated, e.do("POST", path(kind), bearer, o).code, "%s %s", kind, name)
	}
	owned(types.KindMachineClaim, "c-carol", "carol")
	owned(types.KindSession, "s-carol", "carol")
	owned(types.KindMachineClaim, "c-dave", "dave")
	owned(types.KindMachineClaim, "c-admin", AdminUser)
	exists := func(kind, name string) bool {
		_, err := e.st.Get(kind, name)
		return err == nil
	}

	r := e.do("DELETE", path(types.KindUser, "carol")+"?cascade=maybe", bearer, nil)
	require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
	assert.Equal(t, "cascade", r.errBody(t).Field)
	assert.True(t, exists(types.KindMachineClaim, "c-carol"))

	r = e.do("DELETE", path(types.KindUser, AdminUser)+"?cascade=true", bearer, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "last enabled user with role admin")
	assert.True(t, exists(types.KindMachineClaim, "c-admin"), "the refused delete took none of the admin's claims")

	r = e.do("DELETE", path(types.KindUser, "carol")+"?cascade=true", bearer, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.False(t, exists(types.KindUser, "carol"))
	assert.False(t, exists(types.KindMachineClaim, "c-carol"))
	assert.False(t, exists(types.KindSession, "s-carol"))
	assert.True(t, exists(types.KindMachineClaim, "c-dave"), "another user's claim stays")
	assert.Equal(t, http.StatusConflict, e.do("DELETE", path(types.KindUser, "dave"), bearer, nil).code, "without cascade a user holding claims stays")
}

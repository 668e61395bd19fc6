package openapi

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestLoadOrCreateAdminToken(t *testing.T) {
	t.Run("given is static and not written", func(t *testing.T) {
		dir, st := t.TempDir(), openStore(t)
		a, err := LoadOrCreateAdminToken(st, dir, "from-config", false)
		require.NoError(t, err)
		assert.Equal(t, NodeAdmin{Static: "from-config"}, a)
		assert.NoFileExists(t, filepath.Join(dir, AdminTokenFile))
		has, err := HasUsers(st)
		require.NoError(t, err)
		assert.False(t, has, "a static token makes no cluster user")
	})
	t.Run("first node: created once with 0600 in a 0700 dir, a cluster token, then read back", func(t *testing.T) {
		dir, st := filepath.Join(t.TempDir(), "data", "node"), openStore(t)
		a, err := LoadOrCreateAdminToken(st, dir, "", false)
		require.NoError(t, err)
		assert.True(t, a.Created)
		assert.Empty(t, a.Static, "the cluster's token, not this node's own")
		name, secret, ok := strings.Cut(a.Bearer, ".")
		require.True(t, ok, a.Bearer)
		assert.True(t, strings.HasPrefix(name, "admin-"), name)
		assert.Len(t, secret, 43)

		fi, err := os.Stat(filepath.Join(dir, AdminTokenFile))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

		tok, err := store.Get[types.Token](st, types.KindToken, name)
		require.NoError(t, err)
		user, err := store.Get[types.User](st, types.KindUser, AdminUser)
		require.NoError(t, err)
		assert.Equal(t, []string{RoleAdmin}, user.Spec.Roles)
		assert.Equal(t, types.TokenSpec{User: AdminUser, Role: RoleAdmin, Hash: tok.Spec.Hash, Salt: tok.Spec.Salt, UserCreatedAt: user.Metadata.CreatedAt}, tok.Spec)
		assert.NotContains(t, tok.Spec.Hash, secret)

		again, err := LoadOrCreateAdminToken(st, dir, "", false)
		require.NoError(t, err)
		assert.False(t, again.Created)
		assert.Equal(t, a.Bearer, again.Bearer)
		ver := tok.Metadata.Version
		tok, err = store.Get[types.Token](st, types.KindToken, name)
		require.NoError(t, err)
		assert.Equal(t, ver, tok.Metadata.Version, "a restart does not write the token again")
	})
	t.Run("a joining node makes none", func(t *testing.T) {
		dir, st := t.TempDir(), openStore(t)
		a, err := LoadOrCreateAdminToken(st, dir, "", true)
		require.NoError(t, err)
		assert.Empty(t, a.Bearer)
		assert.Empty(t, a.Static)
		assert.NoFileExists(t, filepath.Join(dir, AdminTokenFile))
	})
	t.Run("a node whose store holds the cluster's users makes none", func(t *testing.T) {
		dir, st := t.TempDir(), openStore(t)
		require.NoError(t, BootstrapAdmin(st, "admin-aaaaaa.secret"))
		a, err := LoadOrCreateAdminToken(st, dir, "", false)
		require.NoError(t, err)
		assert.Empty(t, a.Bearer)
		assert.NoFileExists(t, filepath.Join(dir, AdminTokenFile))
	})
	t.Run("a first node whose store lost its users gets its file's token back", func(t *testing.T) {
		dir := t.TempDir()
		a, err := LoadOrCreateAdminToken(openStore(t), dir, "", false)
		require.NoError(t, err)
		st := openStore(t)
		b, err := LoadOrCreateAdminToken(st, dir, "", false)
		require.NoError(t, err)
		assert.Equal(t, a.Bearer, b.Bearer)
		e := newTestEnvOn(t, st)
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", b.Bearer, nil).code)
	})
	t.Run("the file of an earlier release is a static token", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("  0123456789abcdef0123\n"), 0o600))
		a, err := LoadOrCreateAdminToken(openStore(t), dir, "", false)
		require.NoError(t, err)
		assert.False(t, a.Created)
		assert.Equal(t, "0123456789abcdef0123", a.Static)
	})
	t.Run("an empty file is an error, not a new token", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, AdminTokenFile), nil, 0o600))
		_, err := LoadOrCreateAdminToken(openStore(t), dir, "", false)
		assert.Error(t, err)
	})
	t.Run("an unreadable path is an error", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, AdminTokenFile), 0o700))
		_, err := LoadOrCreateAdminToken(openStore(t), dir, "", false)
		assert.Error(t, err)
	})
	t.Run("two tokens differ", func(t *testing.T) {
		a, err := LoadOrCreateAdminToken(openStore(t), t.TempDir(), "", false)
		require.NoError(t, err)
		b, err := LoadOrCreateAdminToken(openStore(t), t.TempDir(), "", false)
		require.NoError(t, err)
		assert.NotEqual(t, a.Bearer, b.Bearer)
	})
}

// makeUser creates a User with roles through the API, as the admin.
func (e *testEnv) makeUser(name string, roles ...string) {
	e.t.Helper()
	r := e.do("POST", path(types.KindUser), adminTok, map[string]any{
		"kind": types.KindUser, "metadata": map[string]any{"name": name}, "spec": map[string]any{"roles": roles}})
	require.Equal(e.t, http.StatusCreated, r.code, "%s", r.body)
}

// makeToken creates a Token of user with role through the API and returns
// its bearer string.
func (e *testEnv) makeToken(name, user, role string, extra ...string) string {
	e.t.Helper()
	spec := map[string]any{"user": user, "role": role}
	for i := 0; i+1 < len(extra); i += 2 {
		spec[extra[i]] = extra[i+1]
	}
	r := e.do("POST", path(types.KindToken), adminTok, map[string]any{
		"kind": types.KindToken, "metadata": map[string]any{"name": name}, "spec": spec})
	require.Equal(e.t, http.StatusCreated, r.code, "%s", r.body)
	bearer, _ := r.obj(e.t)["token"].(string)
	require.True(e.t, strings.HasPrefix(bearer, name+"."), bearer)
	return bearer
}

func TestClusterTokens(t *testing.T) {
	var now atomic.Pointer[time.Time]
	start := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	now.Store(&start)
	e := newTestEnv(t, func(c *Config) { c.Now = func() time.Time { return *now.Load() } })
	e.makeUser("carol", RoleUser, RoleOperator)
	bearer := e.makeToken("carol-laptop", "carol", RoleUser)

	t.Run("the token acts as its user and role", func(t *testing.T) {
		r := e.do("GET", "/api/v1/whoami", bearer, nil)
		require.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, map[string]any{"name": "carol-laptop", "user": "carol", "role": RoleUser}, r.obj(t))
		r = e.do("POST", path(types.KindMachineClaim), bearer, map[string]any{
			"kind": types.KindMachineClaim, "metadata": map[string]any{"name": "c1"}, "spec": map[string]any{"machineTemplate": "small"}})
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		assert.Equal(t, "carol", r.obj(t)["spec"].(map[string]any)["user"])
	})
	t.Run("nobody sees the hash, and it is not the secret", func(t *testing.T) {
		r := e.do("GET", path(types.KindToken, "carol-laptop"), adminTok, nil)
		require.Equal(t, http.StatusOK, r.code)
		assert.NotContains(t, string(r.body), "hash")
		assert.NotContains(t, string(r.body), "salt")
		assert.NotContains(t, string(r.body), "token\"")
		_, secret, _ := strings.Cut(bearer, ".")
		tok, err := store.Get[types.Token](e.st, types.KindToken, "carol-laptop")
		require.NoError(t, err)
		assert.NotEmpty(t, tok.Spec.Hash)
		assert.NotContains(t, tok.Spec.Hash+tok.Spec.Salt, secret)
		r = e.do("GET", path(types.KindToken), adminTok, nil)
		assert.NotContains(t, string(r.body), tok.Spec.Hash)
	})
	t.Run("a wrong secret or a made-up name is 401", func(t *testing.T) {
		for _, b := range []string{"carol-laptop.x", "carol-laptop." + strings.Repeat("A", 43), "nobody." + strings.Repeat("A", 43), "carol-laptop", "..", "Carol-Laptop.x"} {
			r := e.do("GET", "/api/v1/whoami", b, nil)
			assert.Equal(t, http.StatusUnauthorized, r.code, b)
			assert.Equal(t, "invalid bearer token", r.errBody(t).Message, b)
		}
	})
	t.Run("bad tokens are refused with the field named", func(t *testing.T) {
		for _, tc := range []struct {
			spec  map[string]any
			field string
		}{
			{map[string]any{"user": "nobody", "role": RoleUser}, "spec.user"},
			{map[string]any{"user": "carol", "role": RoleAdmin}, "spec.role"},
			{map[string]any{"user": "carol", "role": "root"}, "spec.role"},
			{map[string]any{"user": "carol", "role": RoleUser, "hash": "00"}, "spec.hash"},
			{map[string]any{"user": "carol", "role": RoleUser, "expiresAt": "2030-04-01T00:00:00Z"}, "spec.expiresAt"},
		} {
			r := e.do("POST", path(types.KindToken), adminTok, map[string]any{
				"kind": types.KindToken, "metadata": map[string]any{"name": "bad"}, "spec": tc.spec})
			assert.Equal(t, http.StatusBadRequest, r.code, "%v: %s", tc.spec, r.body)
			assert.Equal(t, tc.field, r.errBody(t).Field, "%v", tc.spec)
		}
		r := e.do("POST", path(types.KindUser), adminTok, map[string]any{
			"kind": types.KindUser, "metadata": map[string]any{"name": "dave"}, "spec": map[string]any{"roles": []string{"root"}}})
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Equal(t, "spec.roles[0]", r.errBody(t).Field)
	})
	t.Run("tokens cannot be changed", func(t *testing.T) {
		r := e.do("PUT", path(types.KindToken, "carol-laptop"), adminTok, map[string]any{
			"kind": types.KindToken, "metadata": map[string]any{"name": "carol-laptop"}, "spec": map[string]any{"user": "carol", "role": RoleOperator}})
		assert.Equal(t, http.StatusMethodNotAllowed, r.code)
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", bearer, nil).code)
	})
	t.Run("an operator runs the fleet but not users and tokens", func(t *testing.T) {
		op := e.makeToken("carol-ops", "carol", RoleOperator)
		assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), op, minimal(types.KindMachineTemplate, "small")).code)
		assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindAccessCode), op, minimal(types.KindAccessCode, "code")).code)
		r := e.do("GET", path(types.KindMachineClaim), op, nil)
		require.Equal(t, http.StatusOK, r.code)
		assert.Contains(t, string(r.body), `"c1"`, "an operator sees every user's claims")
		for _, kind := range []string{types.KindUser, types.KindToken} {
			assert.Equal(t, http.StatusForbidden, e.do("GET", path(kind), op, nil).code, kind)
			assert.Equal(t, http.StatusForbidden, e.do("POST", path(kind), op, minimal(kind, "x")).code, kind)
			assert.Equal(t, http.StatusForbidden, e.do("DELETE", path(kind, "carol-laptop"), op, nil).code, kind)
		}
		assert.Equal(t, http.StatusForbidden, e.do("GET", path(types.KindUser), bearer, nil).code)
	})
	t.Run("expiry, a disabled user and a lost role stop a token", func(t *testing.T) {
		exp := e.makeToken("carol-short", "carol", RoleUser, "expiresAt", "2030-05-01T13:00:00Z")
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", exp, nil).code)
		later := start.Add(time.Hour)
		now.Store(&later)
		r := e.do("GET", "/api/v1/whoami", exp, nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
		assert.Contains(t, r.errBody(t).Message, "expired")

		op := e.makeToken("carol-ops2", "carol", RoleOperator)
		user := map[string]any{"kind": types.KindUser, "metadata": map[string]any{"name": "carol"}, "spec": map[string]any{"roles": []string{RoleUser}}}
		require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindUser, "carol"), adminTok, user).code)
		r = e.do("GET", "/api/v1/whoami", op, nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
		assert.Contains(t, r.errBody(t).Message, "no longer has role operator")
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", bearer, nil).code)

		user["spec"] = map[string]any{"roles": []string{RoleUser}, "disabled": true}
		require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindUser, "carol"), adminTok, user).code)
		r = e.do("GET", "/api/v1/whoami", bearer, nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
		assert.Contains(t, r.errBody(t).Message, "disabled")
		user["spec"] = map[string]any{"roles": []string{RoleUser}}
		require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindUser, "carol"), adminTok, user).code)
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", bearer, nil).code)
	})
	t.Run("revoking is deleting, and takes effect at once", func(t *testing.T) {
		require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindToken, "carol-laptop"), adminTok, nil).code)
		r := e.do("GET", "/api/v1/whoami", bearer, nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
		assert.Contains(t, e.logs.String(), `method=DELETE path=/api/v1/tokens/carol-laptop status=200 token=admin role=admin`)
	})
}

// A user's tokens go with the user: deleting it deletes them, and a user
// made again under the name, with the roles of the old one, gets none of
// them back, though one survived the delete (as on a node the token's
// delete has not reached yet). (The tokens used to stay, and to work again
// for the new user.) A token of an earlier release, without
// spec.userCreatedAt, is held to its creation time instead.
func TestDeletedUserTakesItsTokens(t *testing.T) {
	e := newTestEnv(t)
	e.makeUser("dave", RoleUser)
	dave := e.makeToken("dave-2", "dave", RoleUser)
	e.makeUser("fay", RoleUser)
	fay := e.makeToken("fay-1", "fay", RoleUser)
	require.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", dave, nil).code)

	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindUser, "dave"), adminTok, nil).code)
	assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindToken, "dave-2"), adminTok, nil).code, "the user's token is deleted with it")
	r := e.do("GET", path(types.KindToken), adminTok, nil)
	require.Equal(t, http.StatusOK, r.code)
	assert.NotContains(t, string(r.body), `"dave-2"`)
	assert.Contains(t, string(r.body), `"fay-1"`, "another user's token stays")
	assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/api/v1/whoami", dave, nil).code)
	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", fay, nil).code)
	e.makeUser("dave", RoleUser)
	assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/api/v1/whoami", dave, nil).code, "a new dave does not revive the old one's token")

	// A token that survived its user's delete, of a role the new user holds.
	e.makeUser("erin", RoleAdmin, RoleUser)
	old := e.makeToken("erin-admin", "erin", RoleAdmin)
	require.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", old, nil).code)
	_, err := e.st.Delete(types.KindUser, "erin", types.Version{}) // the user only
	require.NoError(t, err)
	e.makeUser("erin", RoleAdmin, RoleUser)
	r = e.do("GET", "/api/v1/whoami", old, nil)
	assert.Equal(t, http.StatusUnauthorized, r.code)
	assert.Contains(t, r.errBody(t).Message, "user erin was deleted")
	fresh := e.makeToken("erin-admin-2", "erin", RoleAdmin)
	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", fresh, nil).code, "the new erin's own token works")

	r = e.do("POST", path(types.KindToken), adminTok, map[string]any{"kind": types.KindToken, "metadata": map[string]any{"name": "stamped"},
		"spec": map[string]any{"user": "erin", "role": RoleUser, "userCreatedAt": "2030-01-01T00:00:00Z"}})
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, "spec.userCreatedAt", r.errBody(t).Field)
}

// The last enabled user with role admin is not deleted (409 saying why):
// every admin token, the nodes' local ones too, would stop. (It was deleted,
// and re-making it revived the old admin tokens.)
func TestLastAdminIsNotDeleted(t *testing.T) {
	e, bearer := newBootstrappedEnv(t)

	r := e.do("DELETE", path(types.KindUser, AdminUser), bearer, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "last enabled user with role admin")
	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", bearer, nil).code)

	// A disabled admin does not count; an enabled one does.
	e.makeUser("spare", RoleAdmin)
	spare := map[string]any{"kind": types.KindUser, "metadata": map[string]any{"name": "spare"}, "spec": map[string]any{"roles": []string{RoleAdmin}, "disabled": true}}
	require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindUser, "spare"), bearer, spare).code)
	assert.Equal(t, http.StatusConflict, e.do("DELETE", path(types.KindUser, AdminUser), bearer, nil).code)
	e.makeUser("ops", RoleOperator)
	assert.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindUser, "ops"), bearer, nil).code, "not an admin")
	e.makeUser("root", RoleAdmin, RoleUser)
	assert.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindUser, AdminUser), bearer, nil).code, "root is an admin still")
	assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/api/v1/whoami", bearer, nil).code)
	r = e.do("DELETE", path(types.KindUser, "root"), adminTok, nil)
	assert.Equal(t, http.StatusConflict, r.code)
	assert.Contains(t, r.errBody(t).Message, "user root is the last")
	assert.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindUser, "spare"), adminTok, nil).code, "a disabled admin is not the last")
}

// The last enabled admin cannot demote or disable itself either: a PUT
// that did locked everybody out, as its delete did.
func TestLastAdminIsNotDemoted(t *testing.T) {
	e, bearer := newBootstrappedEnv(t)
	put := func(spec map[string]any) response {
		return e.do("PUT", path(types.KindUser, AdminUser), bearer, map[string]any{"kind": types.KindUser, "metadata": map[string]any{"name": AdminUser}, "spec": spec})
	}
	for field, spec := range map[string]map[string]any{
		"spec.roles":    {"roles": []string{RoleUser}},
		"spec.disabled": {"roles": []string{RoleAdmin}, "disabled": true},
	} {
		r := put(spec)
		require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
		assert.Equal(t, field, r.errBody(t).Field)
		assert.Contains(t, r.errBody(t).Message, "last enabled user with role admin")
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", bearer, nil).code)
	}
	require.Equal(t, http.StatusOK, put(map[string]any{"roles": []string{RoleAdmin, RoleUser}}).code, "keeping admin is fine")
	e.makeUser("root", RoleAdmin)
	require.Equal(t, http.StatusOK, put(map[string]any{"roles": []string{RoleUser}}).code, "root is an admin still")
	assert.Equal(t, http.StatusConflict, e.do("PUT", path(types.KindUser, "root"), adminTok,
		map[string]any{"kind": types.KindUser, "metadata": map[string]any{"name": "root"}, "spec": map[string]any{"roles": []string{RoleUser}}}).code)
}

// An open event stream ends when its token would be refused: revoked, its
// user disabled, or its user no longer holding its role; streams of other
// tokens go on. (Streams used to go on for as long as their client read,
// with the rights the token had when they opened.)
func TestStreamEndsWithItsToken(t *testing.T) {
	e := newTestEnv(t)
	e.makeUser("carol", RoleUser, RoleOperator)
	e.makeUser("dave", RoleUser)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(token string) <-chan sseEvent {
		ch, res := e.openStream(ctx, "/api/v1/events?kinds=MachineClaim", token)
		require.NotNil(t, ch, "status %d", res.StatusCode)
		return ch
	}
	ended := func(ch <-chan sseEvent) bool {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	other := open(e.makeToken("dave-laptop", "dave", RoleUser))

	revoked := open(e.makeToken("carol-laptop", "carol", RoleUser))
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindToken, "carol-laptop"), adminTok, nil).code)
	assert.True(t, ended(revoked), "the stream of a revoked token ended")

	demoted := open(e.makeToken("carol-ops", "carol", RoleOperator))
	user := map[string]any{"kind": types.KindUser, "metadata": map[string]any{"name": "carol"}, "spec": map[string]any{"roles": []string{RoleUser}}}
	require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindUser, "carol"), adminTok, user).code)
	assert.True(t, ended(demoted), "the stream of a token whose user lost its role ended")

	disabled := open(e.makeToken("carol-desk", "carol", RoleUser))
	user["spec"] = map[string]any{"roles": []string{RoleUser}, "disabled": true}
	require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindUser, "carol"), adminTok, user).code)
	assert.True(t, ended(disabled), "the stream of a disabled user's token ended")

	// Dave's stream saw all that go by and still works.
	r := e.do("POST", path(types.KindMachineClaim), adminTok, map[string]any{"kind": types.KindMachineClaim,
		"metadata": map[string]any{"name": "dave-c"}, "spec": map[string]any{"machineTemplate": "small", "user": "dave"}})
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case ev, ok := <-other:
			require.True(t, ok, "dave's stream ended")
			seen = ev.data.Name == "dave-c"
		case <-deadline:
			t.Fatal("dave's stream did not carry his claim")
		}
	}
}

// A token revoked on another node is refused here as soon as the deletion
// has reached this node's store, though this node had found it good
// before and remembers that.
func TestTokenRevokedElsewhere(t *testing.T) {
	e := newTestEnv(t)
	e.makeUser("carol", RoleUser)
	bearer := e.makeToken("carol-laptop", "carol", RoleUser)
	for range 3 {
		require.Equal(t, http.StatusOK, e.do("GET", "/api/v1/whoami", bearer, nil).code)
	}
	rec, err := e.st.Get(types.KindToken, "carol-laptop")
	require.NoError(t, err)
	gone := types.Version{HLC: rec.Version.HLC + 1, Node: "elsewhere"}
	changed, err := e.st.Apply(store.Record{Kind: types.KindToken, Name: "carol-laptop", Version: gone, Tomb: gone})
	require.NoError(t, err)
	require.True(t, changed)
	r := e.do("GET", "/api/v1/whoami", bearer, nil)
	assert.Equal(t, http.StatusUnauthorized, r.code)
	assert.Equal(t, "invalid bearer token", r.errBody(t).Message)
}

// Verifying a cluster token the first time is a store read of the token and
// of its user and one HMAC; after that, while no token or user changes, a
// map lookup.
func BenchmarkVerifyToken(b *testing.B) {
	st := openStore(b)
	bearer, err := NewBootstrapToken()
	require.NoError(b, err)
	require.NoError(b, BootstrapAdmin(st, bearer))
	a, err := newAuthenticator("", nil, st, time.Now)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.lookup(bearer); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifications/s")
}

// A joined node's host gets a local admin token once the cluster's admin
// user has reached the node, and not before; it works like any token.
func TestWaitLocalAdminToken(t *testing.T) {
	st, dir := openStore(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := WaitLocalAdminToken(ctx, st, dir, "n2", 10*time.Millisecond)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "no admin user yet")
	assert.NoFileExists(t, filepath.Join(dir, AdminTokenFile))

	first, err := NewBootstrapToken()
	require.NoError(t, err)
	require.NoError(t, BootstrapAdmin(st, first)) // as replication brings it
	path, err := WaitLocalAdminToken(context.Background(), st, dir, "n2", 10*time.Millisecond)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	bearer := strings.TrimSpace(string(b))
	assert.True(t, strings.HasPrefix(bearer, "local-n2."), bearer)
	e := newTestEnvOn(t, st)
	r := e.do("GET", "/api/v1/whoami", bearer, nil)
	require.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, map[string]any{"name": "local-n2", "user": "admin", "role": "admin"}, r.obj(t))
	again, err := WaitLocalAdminToken(context.Background(), st, dir, "n2", 10*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, path, again, "made once")

	// The token is stored before its file is written; a file that cannot be
	// written takes the token back.
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	_, err = WaitLocalAdminToken(context.Background(), st, filepath.Join(notDir, "data"), "n3", 10*time.Millisecond)
	require.Error(t, err)
	_, err = st.Get(types.KindToken, "local-n3")
	require.ErrorIs(t, err, store.ErrNotFound)
}

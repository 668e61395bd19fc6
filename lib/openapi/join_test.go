package openapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/pki"
	"github.com/hf-fleet/hf/lib/types"
)

const testFingerprint = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func withJoining(c *Config) {
	c.Joining = &Joining{
		Bundle: func() (JoinBundle, error) {
			return JoinBundle{CACert: "cert", CAKey: "key", GossipKeys: []string{"k1"}}, nil
		},
		Endpoint:      "https://127.0.0.1:7700",
		CAFingerprint: testFingerprint,
		GossipAddress: "127.0.0.1:7701",
	}
	c.Keyring = &memKeyring{keys: [][]byte{bytes.Repeat([]byte{7}, 32)}}
	c.MachineLogs = func(context.Context, string, drivers.LogOptions, io.Writer) error { return ErrLogsNotHere }
}

// A join token works for at least its TTL: its expiry, kept to the second,
// is rounded up. It was rounded down, so a token of 1s made at .6 s into a
// second worked for 0.4 s, and one under a second could be expired when made.
func TestJoinTokenExpiryRoundsUp(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 600_000_000, time.UTC)
	e := newTestEnv(t, withJoining, func(c *Config) { c.Now = func() time.Time { return at } })
	r := e.do("POST", "/api/v1/cluster/join-tokens", adminTok, map[string]any{"ttl": "1s"})
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	assert.Equal(t, "2030-01-01T00:00:02Z", r.obj(t)["expiresAt"])
	r = e.do("POST", "/api/v1/cluster/join-tokens", adminTok, map[string]any{"ttl": "999ms"})
	assert.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
	assert.Contains(t, string(r.body), "at least 1s")
}

// A join token is made by an admin, shown once with the command that uses
// it, fetches the cluster's secrets and does nothing else; it expires and
// is revoked like any token.
func TestJoinTokens(t *testing.T) {
	var now atomic.Pointer[time.Time]
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(&start)
	clock := func() time.Time { return *now.Load() }
	e := newTestEnv(t, withJoining, func(c *Config) { c.Now = clock })
	r := e.do("POST", "/api/v1/cluster/join-tokens", adminTok, map[string]any{"ttl": "1h"})
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	body := r.obj(t)
	token := body["token"].(string)
	assert.Equal(t, "2030-01-01T01:00:00Z", body["expiresAt"])
	assert.Equal(t, "hf-node --join 127.0.0.1:7701 --join-token "+token, body["command"])
	ep, fp, bearer, ok := ParseJoinToken(token)
	require.True(t, ok, token)
	assert.Equal(t, "https://127.0.0.1:7700", ep)
	assert.Equal(t, testFingerprint, fp)
	assert.True(t, strings.HasPrefix(bearer, body["name"].(string)+"."))

	r = e.do("POST", "/api/v1/cluster/join", bearer, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, map[string]any{"caCert": "cert", "caKey": "key", "gossipKeys": []any{"k1"}}, r.obj(t))
	for _, u := range []string{"/api/v1/whoami", path(types.KindMachineClaim), path(types.KindToken)} {
		assert.Equal(t, http.StatusForbidden, e.do("GET", u, bearer, nil).code, u)
	}
	assert.Equal(t, http.StatusForbidden, e.do("POST", "/api/v1/cluster/join", aliceTok, nil).code)
	assert.Equal(t, http.StatusForbidden, e.do("POST", "/api/v1/cluster/join-tokens", aliceTok, nil).code)
	assert.Contains(t, string(e.do("GET", path(types.KindToken), adminTok, nil).body), body["name"].(string), "a join token is a Token, listed and revoked as one")

	for _, bad := range []string{`{"ttl": "0s"}`, `{"ttl": "500ms"}`, `{"ttl": "200h"}`, `{"ttl": "soon"}`, `{"expires": "1h"}`, `{"ttl": 1}`} {
		r := e.do("POST", "/api/v1/cluster/join-tokens", adminTok, bad)
		assert.Equal(t, http.StatusBadRequest, r.code, bad)
		if bad != `{"expires": "1h"}` {
			assert.Equal(t, "ttl", r.errBody(t).Field, bad) // {"ttl": 1} named none
		}
	}
	r = e.do("POST", path(types.KindToken), adminTok, map[string]any{"kind": types.KindToken, "metadata": map[string]any{"name": "j"},
		"spec": map[string]any{"user": types.JoinUser, "role": types.RoleJoin}})
	assert.Equal(t, http.StatusBadRequest, r.code, "join tokens come from their own route")

	later := start.Add(2 * time.Hour)
	now.Store(&later)
	assert.Equal(t, http.StatusUnauthorized, e.do("POST", "/api/v1/cluster/join", bearer, nil).code, "expired")

	for _, s := range []string{"", "hfjoin1", "hfjoin1.x.y.z.w", "hfjoin2.aHR0cHM6Ly94." + testFingerprint + ".a.b", "hfjoin1.aHR0cHM6Ly94.short.a.b",
		FormatJoinToken("http://10.0.0.1:7700", testFingerprint, "a.b"), FormatJoinToken("file:///etc", testFingerprint, "a.b"),
		FormatJoinToken("https://", testFingerprint, "a.b")} {
		_, _, _, ok := ParseJoinToken(s)
		assert.False(t, ok, s)
	}
}

// memKeyring is a Keyring in memory, with memberlist's rules: a key is
// used only once installed, and the key in use cannot be removed.
type memKeyring struct {
	mu   sync.Mutex
	keys [][]byte
}

func (m *memKeyring) Keys() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.keys)
}

func (m *memKeyring) Install(k []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(m.keys, func(x []byte) bool { return bytes.Equal(x, k) }) {
		m.keys = append(m.keys, k)
	}
	return nil
}

func (m *memKeyring) Use(k []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.keys, func(x []byte) bool { return bytes.Equal(x, k) })
	if i < 0 {
		return errors.New("requested key is not in the keyring")
	}
	m.keys[0], m.keys[i] = m.keys[i], m.keys[0]
	return nil
}

func (m *memKeyring) Remove(k []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.keys) > 0 && bytes.Equal(m.keys[0], k) {
		return errors.New("removing the primary key is not allowed")
	}
	m.keys = slices.DeleteFunc(m.keys, func(x []byte) bool { return bytes.Equal(x, k) })
	return nil
}

// The gossip keys are shown by ID only; install, use and remove change
// them in that order; mistakes are 400 naming the field.
func TestGossipKeyRotation(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	kr := &memKeyring{keys: [][]byte{old}}
	e := newTestEnv(t, func(c *Config) { c.Keyring = kr })
	b64 := base64.StdEncoding.EncodeToString
	r := e.do("GET", "/api/v1/cluster/gossip-keys", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, map[string]any{"node": "n1", "primary": pki.KeyID(old), "keys": []any{pki.KeyID(old)}}, r.obj(t))
	assert.NotContains(t, string(r.body), b64(old))

	step := func(action string, key []byte) response {
		return e.do("POST", "/api/v1/cluster/gossip-keys", adminTok, map[string]any{"action": action, "key": b64(key)})
	}
	assert.Equal(t, http.StatusBadRequest, step("use", next).code, "not installed yet")
	require.Equal(t, http.StatusOK, step("install", next).code)
	assert.Equal(t, http.StatusBadRequest, step("remove", old).code, "still in use")
	r = step("use", next)
	require.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, pki.KeyID(next), r.obj(t)["primary"])
	require.Equal(t, http.StatusOK, step("remove", old).code)
	assert.Equal(t, [][]byte{next}, kr.Keys())
	third := bytes.Repeat([]byte{3}, 32)
	require.Equal(t, http.StatusOK, step("install", old).code)
	require.Equal(t, http.StatusOK, step("install", third).code)
	assert.Equal(t, http.StatusBadRequest, step("retire", old).code, "retire keeps the key in use only")
	require.Equal(t, http.StatusOK, step("retire", next).code)
	assert.Equal(t, [][]byte{next}, kr.Keys())

	for body, field := range map[string]string{`{"action": "burn", "key": "` + b64(next) + `"}`: "action",
		`{"action": "use", "key": "short"}`: "key", `{"action": "use"}`: "key"} {
		r := e.do("POST", "/api/v1/cluster/gossip-keys", adminTok, body)
		assert.Equal(t, http.StatusBadRequest, r.code, body)
		assert.Equal(t, field, r.errBody(t).Field, body)
	}
	assert.Equal(t, http.StatusForbidden, e.do("GET", "/api/v1/cluster/gossip-keys", aliceTok, nil).code)
	assert.Contains(t, e.logs.String(), "gossip keyring changed")
}

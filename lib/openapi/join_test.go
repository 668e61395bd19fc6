package openapi

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

	for _, bad := range []string{`{"ttl": "0s"}`, `{"ttl": "200h"}`, `{"ttl": "soon"}`, `{"expires": "1h"}`} {
		r := e.do("POST", "/api/v1/cluster/join-tokens", adminTok, bad)
		assert.Equal(t, http.StatusBadRequest, r.code, bad)
	}
	r = e.do("POST", path(types.KindToken), adminTok, map[string]any{"kind": types.KindToken, "metadata": map[string]any{"name": "j"},
		"spec": map[string]any{"user": types.JoinUser, "role": types.RoleJoin}})
	assert.Equal(t, http.StatusBadRequest, r.code, "join tokens come from their own route")

	later := start.Add(2 * time.Hour)
	now.Store(&later)
	assert.Equal(t, http.StatusUnauthorized, e.do("POST", "/api/v1/cluster/join", bearer, nil).code, "expired")

	for _, s := range []string{"", "hfjoin1", "hfjoin1.x.y.z.w", "hfjoin2.aHR0cHM6Ly94." + testFingerprint + ".a.b", "hfjoin1.aHR0cHM6Ly94.short.a.b"} {
		_, _, _, ok := ParseJoinToken(s)
		assert.False(t, ok, s)
	}
}

package openapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestAuthentication(t *testing.T) {
	e := newTestEnv(t)
	cases := []struct {
		name string
		hdr  []string
		code int
	}{
		{"no header", nil, 401},
		{"wrong token", []string{"Authorization", "Bearer nope"}, 401},
		{"prefix of a token", []string{"Authorization", "Bearer " + adminTok[:5]}, 401},
		{"basic scheme", []string{"Authorization", "Basic " + adminTok}, 401},
		{"no token", []string{"Authorization", "Bearer "}, 401},
		{"admin", []string{"Authorization", "Bearer " + adminTok}, 200},
		{"scheme is case-insensitive", []string{"Authorization", "bearer " + aliceTok}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", path(types.KindNode), "", nil, tc.hdr...)
			require.Equal(t, tc.code, r.code, "%s", r.body)
			if tc.code == 401 {
				assert.Equal(t, CodeUnauthorized, r.errBody(t).Code)
				assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			}
		})
	}
	t.Run("every api route needs a token", func(t *testing.T) {
		for _, rt := range e.srv.Routes() {
			if len(rt.Path) < len(apiPrefix) || rt.Path[:len(apiPrefix)] != apiPrefix {
				continue
			}
			r := e.do(rt.Method, replaceParams(rt.Path), "", nil)
			assert.Equal(t, http.StatusUnauthorized, r.code, "%s %s", rt.Method, rt.Path)
		}
	})
	t.Run("whoami", func(t *testing.T) {
		r := e.do("GET", "/api/v1/whoami", adminTok, nil)
		require.Equal(t, 200, r.code)
		assert.Equal(t, map[string]any{"name": "admin", "user": "admin", "role": "admin"}, r.obj(t))
		r = e.do("GET", "/api/v1/whoami", aliceTok, nil)
		require.Equal(t, 200, r.code)
		assert.Equal(t, map[string]any{"name": "alice-laptop", "user": "alice", "role": "user"}, r.obj(t))
	})
}

func replaceParams(p string) string {
	out := []byte{}
	for i := 0; i < len(p); i++ {
		if p[i] == ':' {
			out = append(out, "x"...)
			for i < len(p) && p[i] != '/' {
				i++
			}
			i--
			continue
		}
		out = append(out, p[i])
	}
	return string(out)
}

func TestNewRejectsBadTokens(t *testing.T) {
	st := openStore(t)
	cases := []struct {
		name   string
		admin  string
		tokens []Token
	}{
		{"empty secret", "a", []Token{{Name: "x", Role: RoleUser, User: "u"}}},
		{"bad role", "a", []Token{{Name: "x", Token: "t", Role: "root"}}},
		{"user without user", "a", []Token{{Name: "x", Token: "t", Role: RoleUser}}},
		{"duplicate secret", "a", []Token{{Name: "x", Token: "a", Role: RoleUser, User: "u"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{AdminToken: tc.admin, Tokens: tc.tokens}, nil, st)
			assert.Error(t, err)
		})
	}
	_, err := New(Config{Tokens: []Token{{Name: "ci", Token: "t", Role: RoleAdmin}}}, nil, st)
	assert.NoError(t, err, "an admin token from the list is enough")
	_, err = New(Config{}, nil, st)
	assert.NoError(t, err, "no static token: the cluster's tokens only")
}

// TestUserRole checks the rules of role user against admin-created objects.
func TestUserRole(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	e := newTestEnv(t, func(c *Config) { c.Now = func() time.Time { return now } })
	mk := func(kind, name string, mod func(map[string]any)) {
		o := minimal(kind, name)
		if mod != nil {
			mod(o)
		}
		r := e.do("POST", path(kind), adminTok, o)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	}
	user := func(u string) func(map[string]any) {
		return func(o map[string]any) { o["spec"].(map[string]any)["user"] = u }
	}
	mk(types.KindMachineClaim, "alice-1", user("alice"))
	mk(types.KindMachineClaim, "bob-1", user("bob"))
	mk(types.KindSession, "alice-s", user("alice"))
	mk(types.KindSession, "bob-s", user("bob"))
	mk(types.KindMachineTemplate, "small", nil)
	mk(types.KindAccessCode, "code1", func(o map[string]any) {
		o["spec"].(map[string]any)["code"] = "code1-secret"
		o["spec"].(map[string]any)["machineSets"] = []any{"pool"}
		o["spec"].(map[string]any)["scheduledEvents"] = []any{"ev"}
	})
	mk(types.KindAccessCode, "expired", func(o map[string]any) {
		o["spec"].(map[string]any)["code"] = "expired-secret"
		o["spec"].(map[string]any)["notAfter"] = "2029-01-01T00:00:00Z"
	})
	mk(types.KindAccessCode, "off", func(o map[string]any) {
		o["spec"].(map[string]any)["code"] = "off-secret"
		o["status"] = map[string]any{"phase": "Inactive"}
	})

	names := func(r response) []string {
		var out []string
		for _, it := range r.obj(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		return out
	}

	t.Run("lists show only own claims and sessions", func(t *testing.T) {
		assert.Equal(t, []string{"alice-1"}, names(e.do("GET", path(types.KindMachineClaim), aliceTok, nil)))
		assert.Equal(t, []string{"bob-1"}, names(e.do("GET", path(types.KindMachineClaim), bobTok, nil)))
		assert.Equal(t, []string{"alice-s"}, names(e.do("GET", path(types.KindSession), aliceTok, nil)))
		assert.Equal(t, []string{"alice-1", "bob-1"}, names(e.do("GET", path(types.KindMachineClaim), adminTok, nil)))
		assert.Equal(t, []string{"small"}, names(e.do("GET", path(types.KindMachineTemplate), aliceTok, nil)))
	})
	t.Run("others' claims and sessions are not found", func(t *testing.T) {
		assert.Equal(t, 200, e.do("GET", path(types.KindMachineClaim, "alice-1"), aliceTok, nil).code)
		assert.Equal(t, 404, e.do("GET", path(types.KindMachineClaim, "bob-1"), aliceTok, nil).code)
		assert.Equal(t, 404, e.do("GET", path(types.KindSession, "bob-s"), aliceTok, nil).code)
		assert.Equal(t, 404, e.do("DELETE", path(types.KindMachineClaim, "bob-1"), aliceTok, nil).code)
		assert.Equal(t, 200, e.do("GET", path(types.KindMachineClaim, "bob-1"), adminTok, nil).code, "bob's claim is still there")
	})
	t.Run("access codes are forbidden", func(t *testing.T) {
		for _, p := range []string{path(types.KindAccessCode), path(types.KindAccessCode, "code1"), path(types.KindAccessCode) + "?watch=true", "/api/v1/events?kinds=AccessCode"} {
			r := e.do("GET", p, aliceTok, nil)
			require.Equal(t, 403, r.code, p)
			assert.Equal(t, CodeForbidden, r.errBody(t).Code)
		}
	})
	t.Run("create own claim: user is set from the token", func(t *testing.T) {
		o := minimal(types.KindMachineClaim, "alice-2")
		delete(o["spec"].(map[string]any), "user")
		r := e.do("POST", path(types.KindMachineClaim), aliceTok, o)
		require.Equal(t, 201, r.code, "%s", r.body)
		assert.Equal(t, "alice", r.obj(t)["spec"].(map[string]any)["user"])
		r = e.do("DELETE", path(types.KindMachineClaim, "alice-2"), aliceTok, nil)
		require.Equal(t, 200, r.code)
	})
	t.Run("create for another user is forbidden", func(t *testing.T) {
		o := minimal(types.KindMachineClaim, "alice-3")
		o["spec"].(map[string]any)["user"] = "bob"
		r := e.do("POST", path(types.KindMachineClaim), aliceTok, o)
		require.Equal(t, 403, r.code)
		assert.Equal(t, "spec.user", r.errBody(t).Field)
		s := minimal(types.KindSession, "alice-s2")
		s["spec"].(map[string]any)["user"] = "bob"
		assert.Equal(t, 403, e.do("POST", path(types.KindSession), aliceTok, s).code)
	})
	t.Run("own session", func(t *testing.T) {
		s := minimal(types.KindSession, "alice-s3")
		delete(s["spec"].(map[string]any), "user")
		require.Equal(t, 201, e.do("POST", path(types.KindSession), aliceTok, s).code)
		require.Equal(t, 200, e.do("DELETE", path(types.KindSession, "alice-s3"), aliceTok, nil).code)
	})
	t.Run("every other write is forbidden", func(t *testing.T) {
		for _, kind := range types.Kinds() {
			if kind != types.KindMachineClaim && kind != types.KindSession {
				assert.Equal(t, 403, e.do("POST", path(kind), aliceTok, minimal(kind, "x")).code, kind)
				assert.Equal(t, 403, e.do("DELETE", path(kind, "small"), aliceTok, nil).code, kind)
			}
			assert.Equal(t, 403, e.do("PUT", path(kind, "x"), aliceTok, minimal(kind, "x")).code, kind)
		}
		assert.Equal(t, 403, e.do("PUT", path(types.KindMachineClaim, "alice-1"), aliceTok, minimal(types.KindMachineClaim, "alice-1")).code)
	})
	t.Run("access codes gate claims", func(t *testing.T) {
		ev := map[string]any{"kind": "ScheduledEvent", "metadata": map[string]any{"name": "ev"},
			"spec": map[string]any{"startTime": now.Add(-time.Hour).Format(time.RFC3339), "endTime": now.Add(time.Hour).Format(time.RFC3339)}}
		require.Equal(t, 201, e.do("POST", path(types.KindScheduledEvent), adminTok, ev).code)
		claim := func(name, code string, mod func(map[string]any)) response {
			o := minimal(types.KindMachineClaim, name)
			o["spec"].(map[string]any)["accessCode"] = code
			if mod != nil {
				mod(o["spec"].(map[string]any))
			}
			return e.do("POST", path(types.KindMachineClaim), aliceTok, o)
		}
		cases := []struct {
			name, code string
			mod        func(map[string]any)
			status     int
			field      string
		}{
			{"granted", "code1-secret", func(s map[string]any) { s["machineSets"] = []any{"pool"}; s["scheduledEvent"] = "ev" }, 201, ""},
			{"unknown code", "nope", nil, 403, "spec.accessCode"},
			{"the object name is not the code", "code1", nil, 403, "spec.accessCode"},
			{"expired code", "expired-secret", nil, 403, "spec.accessCode"},
			{"inactive code", "off-secret", nil, 403, "spec.accessCode"},
			{"set not granted", "code1-secret", func(s map[string]any) { s["machineSets"] = []any{"pool", "other"} }, 403, "spec.accessCode"}, // a user is not told which
			{"event not granted", "code1-secret", func(s map[string]any) { s["scheduledEvent"] = "other" }, 403, "spec.accessCode"},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := claim("gated-"+string(rune('a'+i)), tc.code, tc.mod)
				require.Equal(t, tc.status, r.code, "%s", r.body)
				if tc.status == 403 {
					assert.Equal(t, tc.field, r.errBody(t).Field)
				}
			})
		}
	})
}

package openapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// Every route of openapi.yaml under /api, with no token, a bad token, a
// revoked token, a user's, an operator's and an admin's: no, a bad or a
// revoked token is 401 everywhere; a user gets 403 on every write but to
// their own claims and sessions (and never reads access codes, users or
// tokens); an operator is refused users and tokens only; an admin is never
// refused; nobody gets a 5xx.
func TestEveryRouteByRole(t *testing.T) {
	e := newTestEnv(t, withJoining)
	e.makeUser("olga", RoleOperator)
	opTok := e.makeToken("olga-1", "olga", RoleOperator)
	revoked := e.makeToken("olga-old", "olga", RoleOperator)
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindToken, "olga-old"), adminTok, nil).code)
	spec := loadSpec(t)
	checked := 0
	for _, p := range spec.Paths.InMatchingOrder() {
		if !strings.HasPrefix(p, apiPrefix) {
			continue
		}
		item := spec.Paths.Value(p)
		for method := range item.Operations() {
			url := strings.NewReplacer("{name}", "x").Replace(p)
			kind := kindOfPath(p)
			var body any
			if method == http.MethodPost || method == http.MethodPut {
				if kind != "" && !strings.Contains(p, "}/") {
					body = minimal(kind, "x")
				} else {
					body = map[string]any{}
				}
			}
			if strings.Contains(url, "watch") || p == apiPrefix+"/events" {
				continue // streams: TestWatchAuth
			}
			for _, tok := range []string{"", "not-a-token-at-all-0000", revoked} {
				r := e.do(method, url, tok, body)
				assert.Equal(t, http.StatusUnauthorized, r.code, "%s %s with token %q", method, url, tok)
			}
			r := e.do(method, url, aliceTok, body)
			assert.Less(t, r.code, 500, "%s %s as a user", method, url)
			write := method != http.MethodGet
			owned := kind == types.KindMachineClaim || kind == types.KindSession
			adminOnly := adminKind(kind) || p == apiPrefix+"/audit" || strings.HasPrefix(p, apiPrefix+"/cluster/")
			switch {
			case p == apiPrefix+streamTicketsPath:
				assert.Equal(t, http.StatusCreated, r.code, "%s %s: every role streams", method, url)
			case adminOnly:
				assert.Equal(t, http.StatusForbidden, r.code, "%s %s: admins' only", method, url)
			case kind == types.KindAccessCode:
				assert.Equal(t, http.StatusForbidden, r.code, "%s %s: access codes are admins'", method, url)
			case write && !owned:
				assert.Equal(t, http.StatusForbidden, r.code, "%s %s: admin only", method, url)
			case !write:
				assert.Contains(t, []int{http.StatusOK, http.StatusNotFound}, r.code, "%s %s as a user", method, url)
			}
			checked++
			r = e.do(method, url, opTok, body)
			assert.Less(t, r.code, 500, "%s %s as an operator", method, url)
			if adminOnly || strings.HasSuffix(p, "/shell") {
				assert.Equal(t, http.StatusForbidden, r.code, "%s %s: admins' only (shells: and the machine's user's)", method, url)
			} else {
				assert.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.code, "%s %s as an operator: %s", method, url, r.body)
			}
			r = e.do(method, url, adminTok, body)
			assert.Less(t, r.code, 500, "%s %s as an admin", method, url)
			assert.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.code, "%s %s as an admin: %s", method, url, r.body)
		}
	}
	assert.Greater(t, checked, 50, "every kind's five routes and the actions")
	// Every write is logged with who made it.
	logs := e.logs.String()
	assert.Contains(t, logs, `msg="api write" method=POST path=/api/v1/machineclaims status=`)
	assert.Contains(t, logs, "token=alice-laptop role=user user=alice")
	assert.Contains(t, logs, "token=admin role=admin")
	assert.Contains(t, logs, "token=olga-1 role=operator user=olga")
}

// kindOfPath is the kind of an /api/v1/<plural>[/...] path, or "".
func kindOfPath(p string) string {
	parts := strings.Split(strings.TrimPrefix(p, apiPrefix+"/"), "/")
	if k, ok := types.KindForPlural(parts[0]); ok && slices.Contains(types.Kinds(), k) {
		return k
	}
	return ""
}

package openapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestDrainAndUndrain(t *testing.T) {
	e := newTestEnv(t)
	e.reportNode("n1", types.NodeUp)

	r := e.do(http.MethodPost, "/api/v1/nodes/n1/drain", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	assert.Equal(t, true, r.obj(t)["spec"].(map[string]any)["maintenance"])
	// Draining twice is fine.
	r = e.do(http.MethodPost, "/api/v1/nodes/n1/drain", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, string(r.body))

	r = e.do(http.MethodPost, "/api/v1/nodes/n1/undrain", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	assert.Nil(t, r.obj(t)["spec"].(map[string]any)["maintenance"])

	for _, tc := range []struct {
		name, path, token string
		code              int
	}{
		{"unknown node", "/api/v1/nodes/nope/drain", adminTok, http.StatusNotFound},
		{"bad name", "/api/v1/nodes/No_Such/drain", adminTok, http.StatusNotFound},
		{"user role", "/api/v1/nodes/n1/drain", aliceTok, http.StatusForbidden},
		{"no token", "/api/v1/nodes/n1/undrain", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(http.MethodPost, tc.path, tc.token, nil)
			assert.Equal(t, tc.code, r.code, string(r.body))
			r.errBody(t)
		})
	}
}

package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func auditItems(t *testing.T, r response) []AuditRecord {
	t.Helper()
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	var body struct{ Items []AuditRecord }
	require.NoError(t, json.Unmarshal(r.body, &body))
	return body.Items
}

// Every write is kept as a record of who changed what, which an admin
// queries by user, kind, name, time and count; reads are not recorded.
func TestAuditRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.log")
	e := newTestEnv(t, func(c *Config) { c.AuditFile = file })
	t.Cleanup(func() { _ = e.srv.Close() })
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small")).code)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "a1")).code)
	require.Equal(t, http.StatusForbidden, e.do("DELETE", path(types.KindMachineTemplate, "small"), aliceTok, nil).code)
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindMachineClaim, "a1"), aliceTok, nil).code)
	e.do("GET", path(types.KindMachineClaim), aliceTok, nil)

	all := auditItems(t, e.do("GET", "/api/v1/audit", adminTok, nil))
	require.Len(t, all, 4, "writes only: %v", all)
	assert.Equal(t, AuditRecord{Time: all[1].Time, Node: "n1", Method: "POST", Path: "/api/v1/machineclaims", Kind: types.KindMachineClaim, Name: "a1",
		Status: http.StatusCreated, Token: "alice-laptop", Role: RoleUser, User: "alice"}, all[1])
	assert.Equal(t, "small", all[2].Name)
	assert.Equal(t, http.StatusForbidden, all[2].Status, "refused writes are recorded too")

	alice := auditItems(t, e.do("GET", "/api/v1/audit?user=alice&kind=machineclaims", adminTok, nil))
	require.Len(t, alice, 2)
	assert.Equal(t, "DELETE", alice[1].Method)
	assert.Equal(t, "a1", alice[1].Name)
	assert.Len(t, auditItems(t, e.do("GET", "/api/v1/audit?name=small", adminTok, nil)), 2, "its create and the refused delete")
	last := auditItems(t, e.do("GET", "/api/v1/audit?limit=1", adminTok, nil))
	require.Len(t, last, 1)
	assert.Equal(t, all[3], last[0], "limit keeps the newest")
	assert.Empty(t, auditItems(t, e.do("GET", "/api/v1/audit?since=2999-01-01T00:00:00Z", adminTok, nil)))

	for q, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "since=yesterday": "since", "kind=gadgets": "kind"} {
		r := e.do("GET", "/api/v1/audit?"+q, adminTok, nil)
		assert.Equal(t, http.StatusBadRequest, r.code, q)
		assert.Equal(t, field, r.errBody(t).Field, q)
	}
	assert.Equal(t, http.StatusForbidden, e.do("GET", "/api/v1/audit", aliceTok, nil).code)

	// The record outlives the server: a new one on the same file reads it.
	require.NoError(t, e.srv.Close())
	again := newTestEnv(t, func(c *Config) { c.AuditFile = file })
	t.Cleanup(func() { _ = again.srv.Close() })
	assert.Len(t, auditItems(t, again.do("GET", "/api/v1/audit", adminTok, nil)), 4)
}

// The file is rotated at its size cap, keeping the one before: the newest
// records stay queryable and the disk use stays bounded.
func TestAuditRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.log")
	e := newTestEnv(t, func(c *Config) { c.AuditFile = file; c.AuditMaxBytes = 4 << 10 })
	t.Cleanup(func() { _ = e.srv.Close() })
	for i := range 100 {
		e.do("POST", path(types.KindProvider), adminTok, minimal(types.KindProvider, fmt.Sprintf("p-%03d", i)))
	}
	for _, p := range []string{file, file + ".1"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.LessOrEqual(t, fi.Size(), int64(4<<10), p)
	}
	recs := auditItems(t, e.do("GET", "/api/v1/audit?limit=10000", adminTok, nil))
	require.NotEmpty(t, recs)
	assert.Less(t, len(recs), 100, "the oldest went with the rotation")
	assert.Equal(t, "p-099", recs[len(recs)-1].Name)
}

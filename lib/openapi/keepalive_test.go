package openapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// The test runs on clocks before, near and long after the day it was written:
// it once compared a fixed date with the store's wall-clock stamps and failed
// from that date on.
func TestSessionKeepalive(t *testing.T) {
	for _, day := range []time.Time{
		time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC),
		time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		time.Date(2121, 6, 7, 8, 9, 10, 0, time.UTC),
	} {
		t.Run(day.Format("2006-01-02"), func(t *testing.T) { testSessionKeepalive(t, day) })
	}
}

func testSessionKeepalive(t *testing.T, now time.Time) {
	// One clock for the store (it stamps createdAt) and the API (it stamps the
	// keepalive): the session's last sign of life is read across both.
	e := newTestEnvOn(t, openStoreAt(t, func() time.Time { return now }))
	sess := map[string]any{"kind": "Session", "metadata": map[string]any{"name": "s1"}, "spec": map[string]any{"machineTemplate": "t"}}
	r := e.do(http.MethodPost, "/api/v1/sessions", aliceTok, sess)
	require.Equal(t, http.StatusCreated, r.code, string(r.body))

	now = now.Add(time.Minute)
	r = e.do(http.MethodPost, "/api/v1/sessions/s1/keepalive", aliceTok, nil)
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	got, err := store.Get[types.Session](e.st, types.KindSession, "s1")
	require.NoError(t, err)
	assert.Equal(t, now, got.LastSeen().UTC())

	assert.Equal(t, http.StatusNotFound, e.do(http.MethodPost, "/api/v1/sessions/s1/keepalive", bobTok, nil).code, "another user's session")
	assert.Equal(t, http.StatusNotFound, e.do(http.MethodPost, "/api/v1/sessions/nope/keepalive", aliceTok, nil).code)
	assert.Equal(t, http.StatusUnauthorized, e.do(http.MethodPost, "/api/v1/sessions/s1/keepalive", "", nil).code)

	// A paused session takes keepalives (they resume it).
	_, err = store.Update(e.st, types.KindSession, "s1", func(o *types.Session) error {
		o.Status.Phase = types.SessionPhasePaused
		return nil
	})
	require.NoError(t, err)
	now = now.Add(time.Minute)
	r = e.do(http.MethodPost, "/api/v1/sessions/s1/keepalive", aliceTok, nil)
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	got, err = store.Get[types.Session](e.st, types.KindSession, "s1")
	require.NoError(t, err)
	assert.Equal(t, now, got.LastSeen().UTC())

	_, err = store.Update(e.st, types.KindSession, "s1", func(o *types.Session) error {
		o.Status.Phase = types.SessionPhaseEnded
		return nil
	})
	require.NoError(t, err)
	r = e.do(http.MethodPost, "/api/v1/sessions/s1/keepalive", aliceTok, nil)
	assert.Equal(t, http.StatusConflict, r.code)
	assert.Equal(t, "status.phase", r.errBody(t).Field)
}

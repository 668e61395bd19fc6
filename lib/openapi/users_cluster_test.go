package openapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/cluster/clustertest"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// meeting holds every change that passed the admin check until two have,
// or for a second: two changes each checked while the other's admin was
// still there, as when they reach two nodes within a millisecond. (Checked
// and written by one node, one at a time, the second is checked only once
// the first is written: the first waits its second out alone.)
type meeting struct {
	n    atomic.Int32
	both chan struct{}
}

func newMeeting() *meeting { return &meeting{both: make(chan struct{})} }

func (m *meeting) arrive() {
	if m.n.Add(1) == 2 {
		close(m.both)
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-m.both:
	case <-t.C:
	}
}

// apiFleet is n nodes (clustertest) with an API server on each, wired as
// hf-node wires them: AtOwner is the node's Ask, and every node decides
// UsersKey's asks with its own server. While meet holds a meeting, every
// change that passes the admin check arrives at it.
type apiFleet struct {
	*clustertest.Fleet
	apis []*testEnv
	meet atomic.Pointer[meeting]
}

func startAPIFleet(t *testing.T, n int) *apiFleet {
	t.Helper()
	f := &apiFleet{Fleet: clustertest.Start(t, n, clustertest.Options{
		// Tests start with the nodes just joined: no wait before the owner decides.
		Node: func(_ int, cfg *cluster.Config) { cfg.OwnerSettle = time.Millisecond },
	})}
	for _, h := range f.Hosts {
		logs := &syncbuf.Buffer{}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		srv, err := New(Config{AdminToken: adminTok, Tokens: testTokens(), NodeName: h.Name, AtOwner: h.Node.Ask}, log, h.Store)
		require.NoError(t, err)
		// Set before the server serves anything.
		srv.adminLeft = func(string) {
			if m := f.meet.Load(); m != nil {
				m.arrive()
			}
		}
		h.Node.HandleAsks(UsersKey, srv.DecideUserChange)
		e := &testEnv{t: t, srv: srv, st: h.Store, logs: logs}
		e.http = httptest.NewServer(srv.Handler())
		t.Cleanup(e.http.Close)
		f.apis = append(f.apis, e)
	}
	return f
}

// owner is the index of the node that decides UsersKey.
func (f *apiFleet) owner() int {
	return slices.IndexFunc(f.Hosts, func(h *clustertest.Host) bool { return h.Name == scheduler.Owner(UsersKey, f.UpNames()) })
}

// admins are the enabled admins node i's store holds, sorted.
func admins(t *testing.T, st *store.Store) []string {
	users, err := store.List[types.User](st, types.KindUser)
	require.NoError(t, err)
	var out []string
	for _, u := range users {
		if enabledAdmin(u) {
			out = append(out, u.Metadata.Name)
		}
	}
	slices.Sort(out)
	return out
}

// waitAdmins waits until every node holds exactly want as its enabled admins.
func (f *apiFleet) waitAdmins(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Hosts {
			assert.Equal(c, want, admins(t, h.Store), "enabled admins on %s", h.Name)
		}
	}, 10*time.Second, 10*time.Millisecond)
}

// sendAsAdmin sends a request with the admin token off the test goroutine: no require, no spec check.
func sendAsAdmin(e *testEnv, method, path string, body any) (int, string, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, "", err
		}
	}
	req, err := http.NewRequest(method, e.http.URL+path, bytes.NewReader(raw))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+adminTok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.http.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, string(out), err
}

// userOp is a change of one user that takes its admin role away.
type userOp struct {
	method string
	spec   map[string]any // a PUT's spec
}

var (
	opDelete  = userOp{method: http.MethodDelete}
	opDisable = userOp{method: http.MethodPut, spec: map[string]any{"roles": []string{RoleAdmin}, "disabled": true}}
	opDemote  = userOp{method: http.MethodPut, spec: map[string]any{"roles": []string{RoleOperator}}}
)

func (o userOp) do(e *testEnv, user string) (int, string, error) {
	var body any
	if o.spec != nil {
		body = map[string]any{"kind": types.KindUser, "metadata": map[string]any{"name": user}, "spec": o.spec}
	}
	return sendAsAdmin(e, o.method, path(types.KindUser, user), body)
}

// Two changes that each take one of the last two admins away, sent to two
// nodes at once (each checked while the other admin was still there), do
// not both pass: one node decides them, one after the other, and the
// second is refused with the single node's 409. They both passed: each
// node counted the admins in its own copy, where the other's change had
// not arrived, and the cluster was left with no admin user.
func TestLastAdminsChangedOnTwoNodesAtOnce(t *testing.T) {
	f := startAPIFleet(t, 2)
	for i, tc := range []struct {
		name   string
		first  userOp
		second userOp
	}{
		{"delete and delete", opDelete, opDelete},
		{"disable and demote", opDisable, opDemote},
		{"demote and delete", opDemote, opDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := "admin-a"+string(rune('0'+i)), "admin-b"+string(rune('0'+i))
			f.apis[0].makeUser(a, RoleAdmin)
			f.apis[1].makeUser(b, RoleAdmin)
			// The admins a case before left go: a and b are the last two.
			for _, old := range admins(t, f.Hosts[0].Store) {
				if old != a && old != b {
					require.Equal(t, http.StatusOK, f.apis[0].do(http.MethodDelete, path(types.KindUser, old), adminTok, nil).code)
				}
			}
			f.waitAdmins(t, a, b)

			f.meet.Store(newMeeting())
			type result struct {
				code int
				body string
				err  error
			}
			var res [2]result
			var wg sync.WaitGroup
			for j, op := range []userOp{tc.first, tc.second} {
				user := []string{a, b}[j]
				wg.Go(func() {
					code, body, err := op.do(f.apis[j], user)
					res[j] = result{code, body, err}
				})
			}
			wg.Wait()
			f.meet.Store(nil)
			var codes []int
			for j, r := range res {
				require.NoError(t, r.err)
				codes = append(codes, r.code)
				if r.code == http.StatusConflict {
					assert.Contains(t, r.body, "is the last enabled user with role admin", "on %s", f.Hosts[j].Name)
				}
			}
			slices.Sort(codes)
			assert.Equal(t, []int{http.StatusOK, http.StatusConflict}, codes, "one change passes, the other is refused: %+v", res)
			// Whatever passed, every node ends with one enabled admin.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				got0, got1 := admins(t, f.Hosts[0].Store), admins(t, f.Hosts[1].Store)
				assert.Equal(c, got0, got1, "the nodes agree")
				assert.Len(c, got0, 1, "one enabled admin is left")
			}, 10*time.Second, 10*time.Millisecond)
		})
	}
}

// The node that takes a user change which may take an admin away answers
// 503 when the node deciding such changes cannot be reached, and changes
// nothing; once it can, the change goes through. A change that keeps an
// admin an enabled admin is written where it is made, owner or not.
func TestUserChangeOwnerUnreachable(t *testing.T) {
	f := startAPIFleet(t, 2)
	owner := f.owner()
	require.GreaterOrEqual(t, owner, 0)
	other := 1 - owner
	f.apis[0].makeUser("keep", RoleAdmin)
	f.apis[0].makeUser("gone", RoleAdmin)
	f.waitAdmins(t, "gone", "keep")

	f.Net.Cut(f.Hosts[0].Name, f.Hosts[1].Name)
	r := f.apis[other].do(http.MethodDelete, path(types.KindUser, "gone"), adminTok, nil)
	require.Equal(t, http.StatusServiceUnavailable, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "decided by one node for the whole cluster")
	assert.Contains(t, r.errBody(t).Message, "the delete of user gone is decided", "it says what was not decided (it said any such change \"may take an admin away\", of a user who is no admin too)")
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	r = f.apis[other].do(http.MethodPut, path(types.KindUser, "gone"), adminTok, map[string]any{
		"kind": types.KindUser, "metadata": map[string]any{"name": "gone"}, "spec": map[string]any{"roles": []string{RoleAdmin, RoleUser}}})
	require.Equal(t, http.StatusOK, r.code, "a change that keeps the admin needs no owner: %s", r.body)
	assert.Equal(t, []string{"gone", "keep"}, admins(t, f.Hosts[other].Store), "nothing was taken away")

	f.Heal()
	require.Eventually(t, func() bool {
		code, _, err := sendAsAdmin(f.apis[other], http.MethodDelete, path(types.KindUser, "gone"), nil)
		return err == nil && code == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond, "the delete never went through after the heal")
	f.waitAdmins(t, "keep")
	r = f.apis[other].do(http.MethodDelete, path(types.KindUser, "keep"), adminTok, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "user keep is the last enabled user with role admin")
}

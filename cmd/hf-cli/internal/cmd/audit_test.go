package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// fakeAuditNodes is a transport that answers GET /api/v1/audit for each host as
// that node would (the fake server has no audit), and passes every other
// request to the fake server.
type fakeAuditNodes map[string]func() *http.Response

func (a fakeAuditNodes) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != "/api/v1/audit" {
		return http.DefaultTransport.RoundTrip(req)
	}
	resp := a[req.URL.Host]()
	resp.Request = req
	return resp, nil
}

func auditAnswer(status int, body any) func() *http.Response {
	return func() *http.Response {
		raw, _ := json.Marshal(body)
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(string(raw)))}
	}
}

// audit asks every Up node; a node that fails is a warning while another
// answers, and when every node fails the command fails with their errors
// and the exit code of the error (4 for a token that may not read the
// audit), never an empty table and 0.
func TestAuditFailsWhenEveryNodeFails(t *testing.T) {
	forbidden := auditAnswer(http.StatusForbidden, map[string]any{"error": map[string]string{"code": "forbidden", "message": "forbidden"}})
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	records := auditAnswer(http.StatusOK, map[string]any{"items": []types.AuditRecord{
		{Time: at, Node: "n2", User: "alice", Role: "admin", Method: http.MethodPost, Path: "/api/v1/machineclaims", Status: 201}}})
	for _, tc := range []struct {
		name     string
		n2       func() *http.Response
		local    bool
		code     int
		out      []string // substrings of stdout
		errLines []string // substrings, one per stderr line
	}{
		{name: "every node forbidden", n2: forbidden, code: ExitAuth,
			errLines: []string{"hf-cli: {self}: forbidden: forbidden", "hf-cli: http://n2.test:7700: forbidden: forbidden", "hf-cli: http://n3.test:7700: forbidden: forbidden"}},
		{name: "one node answers", n2: records, code: ExitOK, out: []string{"TIME", "alice"},
			errLines: []string{"warning: {self}: forbidden: forbidden", "warning: http://n3.test:7700: forbidden: forbidden"}},
		{name: "local forbidden", n2: records, local: true, code: ExitAuth, errLines: []string{"hf-cli: forbidden: forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			self, err := url.Parse(c.srv.URL)
			require.NoError(t, err)
			for _, n := range []struct{ name, addr string }{{"n1", self.Host}, {"n2", "n2.test:7700"}, {"n3", "n3.test:7700"}} {
				c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: n.name},
					Spec: types.NodeSpec{APIAddress: n.addr}, Status: types.NodeStatus{Phase: types.NodeUp}})
			}
			c.transport = fakeAuditNodes{self.Host: forbidden, "n2.test:7700": tc.n2, "n3.test:7700": forbidden}
			args := []string{"audit"}
			if tc.local {
				args = append(args, "--local")
			}
			r := c.run(args...)
			assert.Equal(t, tc.code, r.code, r.err)
			for _, s := range tc.out {
				assert.Contains(t, r.out, s)
			}
			if tc.code != ExitOK {
				assert.Empty(t, r.out, "no table when no node answered")
			}
			got := lines(r.err)
			if assert.Len(t, got, len(tc.errLines), r.err) {
				for i, want := range tc.errLines {
					assert.Contains(t, got[i], strings.ReplaceAll(want, "{self}", c.srv.URL))
				}
			}
		})
	}
}

// A drained node runs and answers: audit asks it like any other. A node that
// is Down is not asked, and audit says its records are missing; rotate-key
// refuses while one is Down (it could not take the new key), naming it.
func TestAuditAsksDrainedNodesAndNamesDownOnes(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	recordsOf := func(node string) func() *http.Response {
		return auditAnswer(http.StatusOK, map[string]any{"items": []types.AuditRecord{
			{Time: at, Node: node, User: "alice", Role: "admin", Method: http.MethodPost, Path: "/api/v1/machineclaims", Status: 201}}})
	}
	c := newCLI(t)
	self, err := url.Parse(c.srv.URL)
	require.NoError(t, err)
	for _, n := range []struct {
		name, addr string
		phase      types.NodePhase
	}{{"n1", self.Host, types.NodeUp}, {"n2", "n2.test:7700", types.NodeDraining}, {"n3", "n3.test:7700", types.NodeDown}} {
		c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: n.name},
			Spec: types.NodeSpec{APIAddress: n.addr}, Status: types.NodeStatus{Phase: n.phase}})
	}
	c.transport = fakeAuditNodes{self.Host: recordsOf("n1"), "n2.test:7700": recordsOf("n2"), "n3.test:7700": recordsOf("n3")}
	r := c.run("audit")
	require.Equal(t, ExitOK, r.code, r.err)
	rows := lines(r.out)
	require.Len(t, rows, 3, r.out)
	assert.Contains(t, rows[1]+rows[2], "\tn2\t", "the drained node is asked")
	assert.NotContains(t, r.out, "\tn3\t")
	assert.Equal(t, []string{"warning: node n3 (Down) is not asked: its records are not in this list"}, lines(r.err))

	r = c.run("cluster", "rotate-key")
	assert.Equal(t, ExitError, r.code, r.err)
	assert.Contains(t, r.err, "cannot reach node n3 (Down) to give it the new key")
	assert.NotContains(t, r.err, "n2", "a drained node is no reason to refuse")
}

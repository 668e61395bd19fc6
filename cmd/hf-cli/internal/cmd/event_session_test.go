package cmd

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/types"
)

const eventYAML = `kind: ScheduledEvent
metadata:
  name: ws-may
  labels: {team: edu}
spec:
  startTime: 2026-05-01T10:00:00Z
  endTime: "2026-05-01T12:00:00Z"
  expirationStrategy: Soft
  requiredMachines:
    - machineTemplate: small
      count: 3
      createMachineSet: true
    - {machineTemplate: big, count: 1}
`

// The event and session commands are the generic resource commands; these
// tests pin that they work end to end for those kinds.
func TestEventCreateListGetDelete(t *testing.T) {
	c := newCLI(t)
	path := filepath.Join(t.TempDir(), "event.yaml")
	require.NoError(t, os.WriteFile(path, []byte(eventYAML), 0o600))

	r := c.run("event", "create", "-f", path)
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "scheduledevent/ws-may created\n", r.out)
	o, ok := c.srv.Object(types.KindScheduledEvent, "ws-may")
	require.True(t, ok)
	ev := o.(*types.ScheduledEvent)
	assert.True(t, ev.Spec.StartTime.Equal(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)), ev.Spec.StartTime)
	assert.Equal(t, types.ExpireSoft, ev.Spec.ExpirationStrategy)
	require.Len(t, ev.Spec.RequiredMachines, 2)
	assert.True(t, ev.Spec.RequiredMachines[0].Creates())
	assert.Equal(t, map[string]string{"team": "edu"}, ev.Metadata.Labels)

	// Creating it again conflicts.
	r = c.run("event", "create", "-f", path)
	assert.Equal(t, ExitConflict, r.code)

	r = c.run("events", "list", "-l", "team=edu")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 2, r.out)
	assert.Equal(t, "NAME\tDISPLAY-NAME\tPHASE\tSTART\tEND\tMACHINES\tCREATED", got[0])
	assert.Regexp(t, `^ws-may\t\t\t2026-05-01T10:00:00Z\t2026-05-01T12:00:00Z\t4\t\S+$`, got[1])

	r = c.run("scheduledevent", "get", "ws-may", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var back types.ScheduledEvent
	require.NoError(t, json.Unmarshal([]byte(r.out), &back), r.out)
	assert.Equal(t, "big", back.Spec.RequiredMachines[1].MachineTemplate)

	r = c.run("event", "get", "nope")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Equal(t, "hf-cli: not_found: scheduledevent \"nope\" not found\n", r.err)

	r = c.run("event", "delete", "ws-may")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "scheduledevent/ws-may deleted\n", r.out)
	_, ok = c.srv.Object(types.KindScheduledEvent, "ws-may")
	assert.False(t, ok)
	r = c.run("event", "delete", "ws-may")
	assert.Equal(t, ExitNotFound, r.code)
}

func TestEventCreateInvalid(t *testing.T) {
	c := newCLI(t)
	// The server refuses an event that ends before it starts (422): exit 1
	// with the server's reason.
	c.stdin = "metadata: {name: bad}\nspec: {startTime: 2026-05-01T12:00:00Z, endTime: 2026-05-01T10:00:00Z}\n"
	r := c.run("event", "create", "-f", "-")
	assert.Equal(t, ExitError, r.code)
	assert.Contains(t, r.err, "spec.endTime: must be after spec.startTime")
	_, ok := c.srv.Object(types.KindScheduledEvent, "bad")
	assert.False(t, ok)

	r = c.run("event", "create")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.err, "needs -f FILE")
}

func TestSessionListGet(t *testing.T) {
	c := newCLI(t)
	for _, s := range []*types.Session{
		{Metadata: types.ObjectMeta{Name: "s1", Labels: map[string]string{"event": "ws"}},
			Spec:   types.SessionSpec{User: "alice", OnEnd: types.EndDelete},
			Status: types.SessionStatus{Phase: types.SessionPhaseActive, MachineClaim: "c1"}},
		{Metadata: types.ObjectMeta{Name: "s2"},
			Spec:   types.SessionSpec{User: "bob"},
			Status: types.SessionStatus{Phase: types.SessionPhaseEnded}},
	} {
		s.Kind = types.KindSession
		c.srv.Put(s)
	}

	r := c.run("session", "list")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 3, r.out)
	assert.Equal(t, "NAME\tUSER\tPHASE\tCLAIM\tON-END\tCREATED", got[0])
	assert.Regexp(t, `^s1\talice\tActive\tc1\tDelete\t\S+$`, got[1])
	assert.Regexp(t, `^s2\tbob\tEnded\t\tDelete\t\S+$`, got[2])

	r = c.run("sessions", "ls", "-l", "event=ws", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var list struct {
		Kind  string          `json:"kind"`
		Items []types.Session `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &list), r.out)
	assert.Equal(t, "SessionList", list.Kind)
	require.Len(t, list.Items, 1)
	assert.Equal(t, "c1", list.Items[0].Status.MachineClaim)

	r = c.run("session", "get", "s2", "-o", "yaml")
	require.Equal(t, 0, r.code, r.err)
	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.out), &y), r.out)
	assert.Equal(t, "Session", y["kind"])
	assert.Equal(t, "bob", y["spec"].(map[string]any)["user"])

	r = c.run("session", "get", "s1", "s9")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Equal(t, "hf-cli: not_found: session \"s9\" not found (did you mean s1, s2?)\n", r.err)
	assert.Len(t, lines(r.out), 2, "the session found is still shown")
}

func TestSessionKeepalive(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(&types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: "s1"},
		Spec: types.SessionSpec{User: "alice", OnEnd: types.EndPause}})
	r := c.run("session", "keepalive", "s1")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "session/s1 kept alive\n", r.out)
	o, _ := c.srv.Object(types.KindSession, "s1")
	assert.WithinDuration(t, time.Now(), o.(*types.Session).LastSeen(), 5*time.Second)

	r = c.run("session", "keepalive", "s1", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got types.Session
	require.NoError(t, json.Unmarshal([]byte(r.out), &got))
	assert.NotEmpty(t, got.Metadata.Annotations[types.AnnotationKeepalive])

	r = c.run("session", "keepalive", "ghost")
	assert.Equal(t, ExitNotFound, r.code)
	reqs := c.srv.Requests()
	assert.Equal(t, "/api/v1/sessions/s1/keepalive", reqs[0].Path)
	assert.Equal(t, "POST", reqs[0].Method)
}

// overCapacity plays a server that accepts an event over capacity when the
// create says capacityCheck=warn, as lib/openapi does: with a Warning.
type overCapacity struct{}

func (overCapacity) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && (req.Method == http.MethodPost || req.Method == http.MethodPut) && req.URL.Query().Get("capacityCheck") == "warn" {
		resp.Header.Add("Warning", `199 hf "scheduled event ws-may needs cpu 121.0 of 24.0"`)
	}
	return resp, err
}

// The capacity refusal tells the user to create the event with
// capacityCheck=warn: create and apply -f (top level and the event's own)
// pass --capacity-check to the API, and print the warning the server
// accepts the event with.
func TestCreateWithCapacityCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		query string // the create's query
		warn  bool
	}{
		{name: "create", args: []string{"create", "-f", "{}"}, query: ""},
		{name: "create warn", args: []string{"create", "-f", "{}", "--capacity-check", "warn"}, query: "capacityCheck=warn", warn: true},
		{name: "apply warn", args: []string{"apply", "-f", "{}", "--capacity-check", "warn"}, query: "capacityCheck=warn", warn: true},
		{name: "event create off", args: []string{"event", "create", "-f", "{}", "--capacity-check", "off"}, query: "capacityCheck=off"},
		{name: "event apply warn", args: []string{"event", "apply", "-f", "{}", "--capacity-check", "warn"}, query: "capacityCheck=warn", warn: true},
		{name: "unknown value", args: []string{"create", "-f", "{}", "--capacity-check", "maybe"}, code: ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.transport = overCapacity{}
			path := filepath.Join(t.TempDir(), "event.yaml")
			require.NoError(t, os.WriteFile(path, []byte(eventYAML), 0o600))
			args := slices.Clone(tc.args)
			args[slices.Index(args, "{}")] = path
			r := c.run(args...)
			require.Equal(t, tc.code, r.code, r.err)
			var posts []string
			for _, rq := range c.srv.Requests() {
				if rq.Method == http.MethodPost {
					posts = append(posts, rq.Query)
				}
			}
			if tc.code != ExitOK {
				assert.Contains(t, r.err, `--capacity-check must be one of refuse, warn, off, got "maybe"`)
				assert.Empty(t, posts, "nothing sent")
				return
			}
			assert.Equal(t, []string{tc.query}, posts)
			_, ok := c.srv.Object(types.KindScheduledEvent, "ws-may")
			assert.True(t, ok, "created")
			if tc.warn {
				assert.Equal(t, "warning: scheduled event ws-may needs cpu 121.0 of 24.0\n", r.err)
			} else {
				assert.Empty(t, r.err)
			}
		})
	}
}

// apply -f of an event that exists passes --capacity-check on the update
// as on the create: an update that raises what the event needs is checked
// by the server as a create is. The flag did nothing for an event that
// existed.
func TestApplyUpdateWithCapacityCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		query string // the update's query
		warn  bool
	}{
		{name: "default", args: []string{"apply", "-f", "{}"}, query: ""},
		{name: "warn", args: []string{"apply", "-f", "{}", "--capacity-check", "warn"}, query: "capacityCheck=warn", warn: true},
		{name: "event apply off", args: []string{"event", "apply", "-f", "{}", "--capacity-check", "off"}, query: "capacityCheck=off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			c.transport = overCapacity{}
			dir := t.TempDir()
			first, more := filepath.Join(dir, "event.yaml"), filepath.Join(dir, "more.yaml")
			require.NoError(t, os.WriteFile(first, []byte(eventYAML), 0o600))
			require.NoError(t, os.WriteFile(more, []byte(strings.Replace(eventYAML, "count: 3", "count: 300", 1)), 0o600))
			r := c.run("apply", "-f", first)
			require.Equal(t, ExitOK, r.code, r.err)
			args := slices.Clone(tc.args)
			args[slices.Index(args, "{}")] = more
			r = c.run(args...)
			require.Equal(t, ExitOK, r.code, r.err)
			assert.Equal(t, "scheduledevent/ws-may configured\n", r.out)
			var puts []string
			for _, rq := range c.srv.Requests() {
				if rq.Method == http.MethodPut {
					puts = append(puts, rq.Query)
				}
			}
			assert.Equal(t, []string{tc.query}, puts)
			if tc.warn {
				assert.Equal(t, "warning: scheduled event ws-may needs cpu 121.0 of 24.0\n", r.err)
			} else {
				assert.Empty(t, r.err)
			}
		})
	}
}

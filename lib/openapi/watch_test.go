package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/leakcheck"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestWatchKind(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "t0")).code)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true", adminTok)
	require.NotNil(t, ch)

	ev := next(t, ch)
	assert.Equal(t, "put", ev.name, "the stream starts with the current objects")
	assert.Equal(t, "t0", ev.data.Name)

	e.reportNode("n1", types.NodeUp)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "t1")).code)
	ev = next(t, ch)
	assert.Equal(t, "put", ev.name, "the node is not in this stream")
	assert.Equal(t, WatchEvent{Type: "put", Kind: types.KindMachineTemplate, Name: "t1", Seq: ev.data.Seq, Version: ev.data.Version, Object: ev.data.Object}, ev.data)
	assert.Equal(t, ev.data.Version, ev.id, "the id is the record version, the same on every node")
	assert.Contains(t, string(ev.data.Object), `"version":"`+ev.data.Version+`"`)
	assert.Contains(t, string(ev.data.Object), `"name":"t1"`)
	putSeq := ev.data.Seq

	require.Equal(t, 200, e.do("DELETE", path(types.KindMachineTemplate, "t1"), adminTok, nil).code)
	ev = next(t, ch)
	assert.Equal(t, "delete", ev.name)
	assert.Equal(t, "t1", ev.data.Name)
	assert.Greater(t, ev.data.Seq, putSeq)
	assert.Empty(t, ev.data.Object)

	require.Equal(t, int64(1), e.srv.ActiveStreams())
	cancel()
	require.Eventually(t, func() bool { return e.srv.ActiveStreams() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// A stream without a resume point starts with the objects that exist: no
// deletion of one deleted before it opened (its replay skips tombstones),
// while a resumed stream still carries the deletions since its point.
func TestFreshStreamSendsNoOldDeletions(t *testing.T) {
	e := newTestEnv(t)
	for _, n := range []string{"t0", "t1"} {
		require.Equal(t, 201, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, n)).code)
	}
	resumeFrom := e.st.Seq()
	require.Equal(t, 200, e.do("DELETE", path(types.KindMachineTemplate, "t1"), adminTok, nil).code)

	events := func(query string) []string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, _ := e.openStream(ctx, "/api/v1/events?kinds=MachineTemplate"+query, adminTok)
		require.NotNil(t, ch)
		var got []string
		for ev := nextEvent(t, ch); ev.name != WatchSynced; ev = nextEvent(t, ch) {
			got = append(got, ev.name+" "+ev.data.Name)
		}
		return got
	}
	assert.Equal(t, []string{"put t0"}, events(""))
	assert.Equal(t, []string{"delete t1"}, events("&since="+strconv.FormatUint(resumeFrom, 10)))
}

func TestWatchEventsKindsAndResume(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, "/api/v1/events?kinds=MachineClaim,machines", adminTok)
	e.reportNode("n1", types.NodeUp)
	require.Equal(t, 201, e.do("POST", path(types.KindMachine), adminTok, minimal(types.KindMachine, "m1")).code)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, minimal(types.KindMachineClaim, "c1")).code)
	ev := next(t, ch)
	assert.Equal(t, types.KindMachine, ev.data.Kind)
	ev = next(t, ch)
	assert.Equal(t, types.KindMachineClaim, ev.data.Kind)
	lastSeq := strconv.FormatUint(ev.data.Seq, 10)
	cancel()

	// Changes while disconnected arrive on resume, and nothing before them.
	require.Equal(t, 200, e.do("DELETE", path(types.KindMachine, "m1"), adminTok, nil).code)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, minimal(types.KindMachineClaim, "c2")).code)
	for _, resume := range [][]string{{"?since=" + lastSeq}, {"", "Last-Event-ID", lastSeq}} {
		ctx, cancel := context.WithCancel(context.Background())
		ch, _ := e.openStream(ctx, "/api/v1/events"+resume[0], adminTok, resume[1:]...)
		ev = next(t, ch)
		assert.Equal(t, "delete", ev.name)
		assert.Equal(t, "m1", ev.data.Name)
		ev = next(t, ch)
		assert.Equal(t, "put", ev.name)
		assert.Equal(t, "c2", ev.data.Name)
		cancel()
	}
}

func TestWatchUserSeesOnlyOwnObjects(t *testing.T) {
	e := newTestEnv(t)
	claim := func(name, user string) map[string]any {
		o := minimal(types.KindMachineClaim, name)
		o["spec"].(map[string]any)["user"] = user
		return o
	}
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, claim("bob-0", "bob")).code)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, claim("alice-0", "alice")).code)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, claim("alice-00", "alice")).code)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, "/api/v1/events", aliceTok)
	ev := next(t, ch)
	assert.Equal(t, "alice-0", ev.data.Name, "replay skips bob's claim")
	ev = next(t, ch)
	assert.Equal(t, "alice-00", ev.data.Name)

	// The user's objects the snapshot sent are known: their deletion is sent.
	require.Equal(t, 200, e.do("DELETE", path(types.KindMachineClaim, "alice-00"), adminTok, nil).code)
	ev = next(t, ch)
	assert.Equal(t, "delete", ev.name)
	assert.Equal(t, "alice-00", ev.data.Name)

	require.Equal(t, 201, e.do("POST", path(types.KindAccessCode), adminTok, minimal(types.KindAccessCode, "code1")).code)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, claim("bob-1", "bob")).code)
	require.Equal(t, 200, e.do("DELETE", path(types.KindMachineClaim, "bob-0"), adminTok, nil).code)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), aliceTok, claim("alice-1", "alice")).code)
	ev = next(t, ch)
	assert.Equal(t, "put", ev.name)
	assert.Equal(t, "alice-1", ev.data.Name, "no access code, none of bob's claims")

	// A claim given to bob disappears for alice.
	// (A claim's spec cannot change through the API; a store write, as
	// replication brings any, gives it to bob.)
	_, err := store.UpdateFacet(e.st, types.KindMachineClaim, "alice-0", types.FacetSpec, func(o *types.MachineClaim) error {
		o.Spec.User = "bob"
		return nil
	})
	require.NoError(t, err)
	ev = next(t, ch)
	assert.Equal(t, "delete", ev.name)
	assert.Equal(t, "alice-0", ev.data.Name)

	require.Equal(t, 200, e.do("DELETE", path(types.KindMachineClaim, "alice-1"), aliceTok, nil).code)
	ev = next(t, ch)
	assert.Equal(t, "delete", ev.name)
	assert.Equal(t, "alice-1", ev.data.Name)
	cancel()

	// A user's resumed stream cannot tell whose deletions it missed: resync.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch, _ = e.openStream(ctx2, "/api/v1/events?since="+strconv.FormatUint(ev.data.Seq, 10), aliceTok)
	ev = next(t, ch)
	assert.Equal(t, "resync", ev.name)
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), aliceTok, claim("alice-2", "alice")).code)
	ev = next(t, ch)
	assert.Equal(t, "alice-2", ev.data.Name)
}

func TestWatchHeartbeat(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.Heartbeat = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, path(types.KindNode)+"?watch=1", adminTok)
	assert.Equal(t, WatchSynced, nextEvent(t, ch).name, "an empty snapshot")
	for range 2 {
		select {
		case ev := <-ch:
			assert.True(t, ev.comment, "only heartbeats on an empty store, got %+v", ev)
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no heartbeat")
		}
	}
}

// TestWatchLeaksNothing: streams that clients leave release their goroutines
// and store watchers.
func TestWatchLeaksNothing(t *testing.T) {
	e := newTestEnv(t)
	e.reportNode("n1", types.NodeUp)
	e.http.Client().CloseIdleConnections()
	base := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		ch, _ := e.openStream(ctx, "/api/v1/events", aliceTok)
		next(t, ch)
	}
	require.Equal(t, int64(5), e.srv.ActiveStreams())
	for _, c := range cancels {
		c()
	}
	require.Eventually(t, func() bool {
		e.http.Client().CloseIdleConnections()
		return e.srv.ActiveStreams() == 0
	}, 5*time.Second, 20*time.Millisecond)
	e.http.Client().CloseIdleConnections()
	leakcheck.Goroutines(t, base, 5*time.Second)
}

func TestWatchEndsWhenStoreCloses(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, "/api/v1/events", adminTok)
	require.Equal(t, int64(1), e.srv.ActiveStreams())
	require.NoError(t, e.st.Close())
	require.Eventually(t, func() bool {
		select {
		case _, ok := <-ch:
			return !ok
		default:
			return false
		}
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(0), e.srv.ActiveStreams())
	r := e.do("GET", path(types.KindNode), adminTok, nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
}

// TestServeShutsDownWithOpenStreams: Serve returns promptly when its ctx ends,
// even with an event stream open, and the stream ends.
func TestServeShutsDownWithOpenStreams(t *testing.T) {
	e := newTestEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ctx, ln) }()

	base := "http://" + ln.Addr().String()
	req, err := http.NewRequest("GET", base+"/api/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode)
	ch := readSSE(t, res.Body)
	require.Equal(t, int64(1), e.srv.ActiveStreams())

	res2, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	require.Equal(t, 200, res2.StatusCode)
	require.NoError(t, res2.Body.Close())

	start := time.Now()
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Serve did not return")
	}
	t.Logf("Serve returned %s after stop", time.Since(start))
	require.Eventually(t, func() bool {
		select {
		case _, ok := <-ch:
			return !ok
		default:
			return false
		}
	}, 5*time.Second, 10*time.Millisecond, "the stream ends")
	assert.Equal(t, int64(0), e.srv.ActiveStreams())
	_, err = http.Get(base + "/healthz")
	assert.Error(t, err, "the listener is closed")
}

// TestEventEncoding: the stream's encoder writes an event as encoding/json
// does, objects with spaces and HTML in them included.
func TestEventEncoding(t *testing.T) {
	for _, ev := range []WatchEvent{
		{Type: WatchResync},
		{Type: WatchPut, Kind: "MachineClaim", Name: "c-1", Seq: 7, Version: "12@n1", Object: json.RawMessage(`{"kind": "MachineClaim", "metadata": {"name": "c-1", "labels": {"a": "<b>&"}}}`)},
		{Type: WatchDelete, Kind: "Machine", Name: "m-ö", Seq: 1 << 40, Version: "1@n<1>"},
	} {
		want, err := json.Marshal(ev)
		require.NoError(t, err)
		got, err := fastjson.Marshal(ev)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}

// An event written while more wait is flushed with them; when the ones after
// it are all filtered out, it is flushed once none wait, not left in the
// buffer until the next event or heartbeat (seen: hf-cli bench waited 2 s
// for a Bound claim whose event sat behind other kinds' changes).
func TestWatchFlushesBeforeFilteredEvents(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.Heartbeat = time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, "/api/v1/events?kinds=machineclaims", adminTok)
	for round := range 5 {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 40 {
					tmpl := minimal(types.KindMachineTemplate, fmt.Sprintf("t-%d-%d-%d", round, g, i))
					obj, err := types.New(types.KindMachineTemplate)
					require.NoError(t, err)
					b, _ := json.Marshal(tmpl)
					require.NoError(t, json.Unmarshal(b, obj))
					_, err = e.st.Put(obj, store.PutOptions{Create: true})
					require.NoError(t, err)
				}
			})
		}
		// The claim's event lands amid the templates', which the stream
		// filters out.
		time.Sleep(time.Millisecond)
		claim, err := types.New(types.KindMachineClaim)
		require.NoError(t, err)
		b, _ := json.Marshal(minimal(types.KindMachineClaim, fmt.Sprintf("c-%d", round)))
		require.NoError(t, json.Unmarshal(b, claim))
		_, err = e.st.Put(claim, store.PutOptions{Create: true})
		require.NoError(t, err)
		wg.Wait()
		ev := next(t, ch)
		assert.Equal(t, fmt.Sprintf("c-%d", round), ev.data.Name, "round %d", round)
	}
}

// A user's stream that fell behind (resync) missed claim changes: what it
// knew of the user's machines is read again, so a machine whose claim went
// to another user meanwhile is not sent to the first.
func TestWatchResyncForgetsTheUsersMachines(t *testing.T) {
	e := newTestEnv(t)
	put := func(o types.Object) store.Record { return putRecord(t, e.st, o) }
	claim := func(user string) *types.MachineClaim {
		c := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: "c1"},
			Spec: types.MachineClaimSpec{MachineTemplate: "small", User: user}}
		c.Status.Binding = &types.ClaimBinding{Round: 1, Node: "n1", Driver: "test", Machine: "m1", Phase: types.BindingBound}
		return c
	}
	machine := func(reason string) *types.Machine {
		return &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m1"},
			Spec:   types.MachineSpec{MachineTemplate: "small", MachineType: types.MachineTypeUser, Node: "n1", Driver: "test", Claim: "c1"},
			Status: types.MachineStatus{Reason: reason}}
	}
	put(claim("alice"))
	f := &streamFilter{p: Principal{Name: "alice-laptop", User: "alice", Role: RoleUser}, sight: e.srv.sight(Principal{User: "alice", Role: RoleUser}),
		kinds: map[string]bool{types.KindMachine: true}, known: map[string]bool{}}
	_, sent := f.apply(store.Event{Type: store.EventPut, Record: put(machine("first"))}, t.Logf)
	require.True(t, sent, "alice's machine")

	// The stream falls behind; meanwhile the claim becomes bob's. The
	// stream reseeds, as it does on a resync, then the machine changes.
	put(claim("bob"))
	require.NoError(t, f.seed(e.st))
	out, sent := f.apply(store.Event{Type: store.EventPut, Record: put(machine("second"))}, t.Logf)
	assert.False(t, sent, "bob's machine was sent to alice after a resync: %s %s", out.Type, out.Name)
}

// A machine is made before its claim names it, so its events reach a
// user's stream while it is not theirs to see: when the claim comes to
// name it, the stream sends the machine as it is then, once, and skips
// the machine's older events still queued.
func TestWatchRevealsTheMachineOfTheUsersNewClaim(t *testing.T) {
	e := newTestEnv(t)
	put := func(o types.Object) store.Record { return putRecord(t, e.st, o) }
	claim := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: "c1"},
		Spec: types.MachineClaimSpec{MachineTemplate: "small", User: "alice"}}
	machine := func(phase types.MachinePhase) *types.Machine {
		return &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m1"},
			Spec:   types.MachineSpec{MachineTemplate: "small", MachineType: types.MachineTypeUser, Node: "n1", Driver: "test", Claim: "c1"},
			Status: types.MachineStatus{Phase: phase}}
	}
	alice := Principal{Name: "alice-laptop", User: "alice", Role: RoleUser}
	for _, kinds := range [][]string{{types.KindMachine}, {types.KindMachine, types.KindMachineClaim}} {
		t.Run(strings.Join(kinds, ","), func(t *testing.T) {
			f := &streamFilter{p: alice, sight: e.srv.sight(alice), kinds: map[string]bool{}, known: map[string]bool{}, st: e.st}
			for _, k := range kinds {
				f.kinds[k] = true
			}
			put(claim) // Requested: it names no machine yet
			pending := put(machine(types.MachinePending))
			assert.Empty(t, f.events(store.Event{Type: store.EventPut, Record: pending}, t.Logf), "not alice's yet")
			running := put(machine(types.MachineRunning))

			b := *claim
			bound := &b
			bound.Status.Binding = &types.ClaimBinding{Round: 1, Node: "n1", Driver: "test", Machine: "m1", Phase: types.BindingBound}
			bound.Status.Phase, bound.Status.Machine = types.ClaimBound, "m1"
			out := f.events(store.Event{Type: store.EventPut, Record: put(bound)}, t.Logf)
			var got []string
			for _, ev := range out {
				got = append(got, ev.Type+" "+ev.Kind+"/"+ev.Name)
			}
			want := []string{"put Machine/m1"}
			if f.kinds[types.KindMachineClaim] {
				want = []string{"put MachineClaim/c1", "put Machine/m1"}
			}
			require.Equal(t, want, got)
			var m types.Machine
			require.NoError(t, json.Unmarshal(out[len(out)-1].Object, &m))
			assert.Equal(t, types.MachineRunning, m.Status.Phase, "the machine as it is now")

			// The machine's Running event, still queued, is not sent again;
			// its next change is.
			assert.Empty(t, f.events(store.Event{Type: store.EventPut, Record: running}, t.Logf))
			later := machine(types.MachineRunning)
			later.Status.Reason = "still running"
			out = f.events(store.Event{Type: store.EventPut, Record: put(later)}, t.Logf)
			require.Len(t, out, 1)
			assert.Equal(t, "Machine", out[0].Kind)
			// The claim's next change sends no machine again.
			bound.Metadata.Labels = map[string]string{"x": "y"}
			out = f.events(store.Event{Type: store.EventPut, Record: put(bound)}, t.Logf)
			for _, ev := range out {
				assert.NotEqual(t, "Machine", ev.Kind)
			}
			for _, k := range []string{types.KindMachine, types.KindMachineClaim} {
				_, err := e.st.Delete(k, map[string]string{types.KindMachine: "m1", types.KindMachineClaim: "c1"}[k], types.Version{})
				require.NoError(t, err)
			}
		})
	}
}

// putRecord stores o and returns its record.
func putRecord(t *testing.T, st *store.Store, o types.Object) store.Record {
	t.Helper()
	rec, err := st.Put(o, store.PutOptions{})
	require.NoError(t, err)
	return rec
}

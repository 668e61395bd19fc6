package openapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/pki"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A body sent a byte at a time does not hold a connection: the read gives
// up at BodyTimeout with 408.
func TestSlowBodyTimesOut(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.http.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	body := `{"metadata":{"name":"slow"},"spec":{"machineTemplate":"small"}}`
	_, err = fmt.Fprintf(conn, "POST /api/v1/machineclaims HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", adminTok, len(body))
	require.NoError(t, err)
	start := time.Now()
	go func() {
		for i := range body {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Less(t, time.Since(start), 5*time.Second, "answered long before the body would have arrived (6 s)")
	b, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(b), "did not arrive within")
}

// Event streams: a token holds at most MaxStreamsPerToken open (429 after);
// a client that stops reading is dropped once a write blocks for
// StreamWriteTimeout, so unread streams do not pile up.
func TestStreamLimits(t *testing.T) {
	e := newTestEnvOn(t, openDiskStore(t), func(c *Config) {
		c.MaxStreamsPerToken = 3
		c.StreamWriteTimeout = 200 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var open []*http.Response
	for range 3 {
		_, res := e.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true", aliceTok)
		require.Equal(t, http.StatusOK, res.StatusCode)
		open = append(open, res)
	}
	r := e.do("GET", path(types.KindMachineTemplate)+"?watch=true", aliceTok, nil)
	assert.Equal(t, http.StatusTooManyRequests, r.code)
	assert.Equal(t, http.StatusOK, e.do("GET", path(types.KindMachineTemplate), aliceTok, nil).code, "other requests go on")
	_, other := e.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true", bobTok)
	assert.Equal(t, http.StatusOK, other.StatusCode, "another token has its own")
	open[0].Body.Close()
	require.Eventually(t, func() bool {
		_, res := e.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true", aliceTok)
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			return false
		}
		open[0] = res
		return true
	}, 15*time.Second, 50*time.Millisecond, "a closed stream frees its place")
	// These streams do not read either: were they open below, the flood
	// could drop one of them too, and the count would never come back to
	// where it was (a CI run failed so).
	for _, res := range append(open, other) {
		res.Body.Close()
	}
	require.Eventually(t, func() bool { return e.srv.ActiveStreams() == 0 }, 15*time.Second, 10*time.Millisecond, "closed streams end")

	// A raw client that never reads while big events pour in.
	before := e.srv.ActiveStreams() // read before it opens: it may be counted at once
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.http.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /api/v1/machinetemplates?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", adminTok)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.srv.ActiveStreams() > before }, 15*time.Second, 10*time.Millisecond)
	// Loopback's socket buffers can take megabytes: write until the stream
	// is dropped (or 64 MiB went by).
	for i := 0; i < 4000 && e.srv.ActiveStreams() > before; i++ {
		o := &types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: fmt.Sprintf("t-%03d", i),
			Annotations: map[string]string{"pad": strings.Repeat("x", 16<<10)}},
			Spec: types.MachineTemplateSpec{ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage("{}")}}}
		_, err := e.st.Put(o, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return e.srv.ActiveStreams() == before }, 10*time.Second, 20*time.Millisecond,
		"the stream that does not read was dropped")
}

// A user holds at most MaxClaimsPerUser live claims (429 past it); ending
// one frees a place; admins have no cap. The claims are counted from the
// store, or from a node's index (ClaimsOf, read-your-writes: each create
// right after the last).
func TestClaimQuota(t *testing.T) {
	t.Run("store", func(t *testing.T) { testClaimQuota(t, newTestEnv(t, func(c *Config) { c.MaxClaimsPerUser = 2 })) })
	t.Run("index", func(t *testing.T) {
		st := openStore(t)
		claimsOf, calls := indexedOf(t, st, types.KindMachineClaim, func(c *types.MachineClaim) string { return c.Spec.User })
		testClaimQuota(t, newTestEnvOn(t, st, func(c *Config) { c.MaxClaimsPerUser = 2; c.ClaimsOf = claimsOf }))
		assert.Positive(t, calls.Load(), "the index counted them")
	})
	t.Run("live count", func(t *testing.T) {
		st := openStore(t)
		liveOf, calls := indexedLiveClaims(t, st)
		testClaimQuota(t, newTestEnvOn(t, st, func(c *Config) { c.MaxClaimsPerUser = 2; c.LiveClaimsOf = liveOf }))
		assert.Positive(t, calls.Load(), "the indexes counted them")
	})
}

// indexedLiveClaims is a node's LiveClaimsOf over a packed cache of st with
// a user and a phase index, and how often it was called.
func indexedLiveClaims(t *testing.T, st *store.Store) (func(context.Context, string) (int, error), *atomic.Int64) {
	c := cache.New(st, slog.New(slog.DiscardHandler))
	c.Pack(types.KindMachineClaim, 1, nil)
	c.Index("user", types.KindMachineClaim, func(o types.Object) []string { return []string{o.(*types.MachineClaim).Spec.User} })
	c.Index("phase", types.KindMachineClaim, func(o types.Object) []string { return []string{string(o.(*types.MachineClaim).Status.Phase)} })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Wait() })
	require.NoError(t, c.Start(ctx))
	calls := new(atomic.Int64)
	return func(ctx context.Context, user string) (int, error) {
		calls.Add(1)
		if err := c.WaitSeq(ctx, st.Seq()); err != nil {
			return 0, err
		}
		return len(c.Intersect("user", user, "phase", string(types.ClaimRequested), string(types.ClaimBound))), nil
	}, calls
}

// indexedOf is a node's ClaimsOf or SessionsOf over a cache of st with an
// index of kind by user, and how often it was called.
func indexedOf[T types.Object](t *testing.T, st *store.Store, kind string, user func(T) string) (func(context.Context, string) ([]T, error), *atomic.Int64) {
	c := cache.New(st, slog.New(slog.DiscardHandler))
	c.Index("user", kind, func(o types.Object) []string { return []string{user(o.(T))} })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Wait() })
	require.NoError(t, c.Start(ctx))
	calls := new(atomic.Int64)
	return func(ctx context.Context, u string) ([]T, error) {
		calls.Add(1)
		objs, err := c.ByIndexNow(ctx, "user", u)
		if err != nil {
			return nil, err
		}
		return types.Cast[T](objs), nil
	}, calls
}

func testClaimQuota(t *testing.T, e *testEnv) {
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	for _, n := range []string{"a1", "a2"} {
		require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, n)).code)
	}
	r := e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "a3"))
	require.Equal(t, http.StatusTooManyRequests, r.code)
	assert.Contains(t, r.errBody(t).Message, "user alice holds 2 live claims")
	as := func(name, user string) map[string]any {
		o := minimal(types.KindMachineClaim, name)
		o["spec"].(map[string]any)["user"] = user
		return o
	}
	assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), bobTok, as("b1", "bob")).code, "per user")
	for _, n := range []string{"x1", "x2", "x3"} {
		assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), adminTok, as(n, "ops")).code, "no cap for admins")
	}
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindMachineClaim, "a1"), aliceTok, nil).code)
	assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "a3")).code)
}

// A session makes a claim for its user: until it has, it counts as one of
// the user's claims, and a user holds no more sessions not yet ended than
// claims (110 sessions of a user capped at 100 claims once made 110 claims).
// The sessions are counted from the store, or from a node's index.
func TestSessionsCountAgainstClaimQuota(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprintf("indexed=%v", indexed), func(t *testing.T) {
			st := openStore(t)
			var calls *atomic.Int64
			e := newTestEnvOn(t, st, func(c *Config) {
				c.MaxClaimsPerUser = 2
				if indexed {
					c.SessionsOf, calls = indexedOf(t, st, types.KindSession, func(s *types.Session) string { return s.Spec.User })
				}
			})
			testSessionQuota(t, e)
			if indexed {
				assert.Positive(t, calls.Load(), "the index counted them")
			}
		})
	}
}

func testSessionQuota(t *testing.T, e *testEnv) {
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	session := func(name string) map[string]any {
		o := minimal(types.KindSession, name)
		o["spec"].(map[string]any)["machineTemplate"] = "small"
		return o
	}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "a1")).code)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), aliceTok, session("s1")).code)
	r := e.do("POST", path(types.KindSession), aliceTok, session("s2"))
	require.Equal(t, http.StatusTooManyRequests, r.code, "a claim and a session waiting for its claim")
	assert.Contains(t, r.errBody(t).Message, "user alice holds 2 live claims")
	assert.Equal(t, http.StatusTooManyRequests, e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "a2")).code,
		"the session's claim is on its way")

	// The session made its claim (a1 stands for it) and the user ended a1:
	// the session still counts, as a session not yet ended.
	_, err := store.UpdateFacet(e.st, types.KindSession, "s1", types.FacetStatus, func(o *types.Session) error {
		o.Status.Phase, o.Status.MachineClaim = types.SessionPhaseActive, "a1"
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindMachineClaim, "a1"), aliceTok, nil).code)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), aliceTok, session("s2")).code)
	_, err = store.UpdateFacet(e.st, types.KindSession, "s2", types.FacetStatus, func(o *types.Session) error {
		o.Status.Phase, o.Status.MachineClaim = types.SessionPhaseActive, "gone"
		return nil
	})
	require.NoError(t, err)
	r = e.do("POST", path(types.KindSession), aliceTok, session("s3"))
	require.Equal(t, http.StatusTooManyRequests, r.code)
	assert.Contains(t, r.errBody(t).Message, "user alice holds 2 sessions not yet ended")
	_, err = store.UpdateFacet(e.st, types.KindSession, "s1", types.FacetStatus, func(o *types.Session) error {
		o.Status.Phase = types.SessionPhaseEnded
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), aliceTok, session("s3")).code)
	for _, n := range []string{"x1", "x2", "x3"} {
		o := session(n)
		o["spec"].(map[string]any)["user"] = "ops"
		assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), adminTok, o).code, "no cap for admins")
	}
	// A session without a template makes no claim: it takes no claim's place.
	bare := minimal(types.KindSession, "bob-bare")
	bare["spec"].(map[string]any)["user"] = "bob"
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindSession), bobTok, bare).code)
	for _, n := range []string{"b1", "b2"} {
		c := minimal(types.KindMachineClaim, n)
		c["spec"].(map[string]any)["user"] = "bob"
		assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), bobTok, c).code, n)
	}
}

// Counts and durations have upper bounds, so no arithmetic on them
// overflows (an event count of 3*2^61 once wrapped the capacity check
// negative and was accepted).
func TestUpperBounds(t *testing.T) {
	e := newTestEnv(t)
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	event := func(count any, users any) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "ev"}, "spec": map[string]any{
			"startTime": "2030-01-01T10:00:00Z", "endTime": "2030-01-01T12:00:00Z", "expectedUsers": users,
			"requiredMachines": []any{map[string]any{"machineTemplate": "small", "count": count, "createMachineSet": map[string]any{}}}}}
	}
	set := func(min, max any) map[string]any {
		o := minimal(types.KindMachineSet, "s")
		o["spec"].(map[string]any)["minAvailable"], o["spec"].(map[string]any)["maxProvisioned"] = min, max
		return o
	}
	claim := minimal(types.KindMachineClaim, "c")
	claim["spec"].(map[string]any)["bindTimeout"] = "25h"
	for _, tc := range []struct {
		kind  string
		body  map[string]any
		field string
	}{
		{types.KindScheduledEvent, event(int64(3)<<61, 1), "spec.requiredMachines[0].count"},
		{types.KindScheduledEvent, event(10001, 1), "spec.requiredMachines[0].count"},
		{types.KindScheduledEvent, event(1, 1000000), "spec.expectedUsers"},
		{types.KindMachineSet, set(1, 20000), "spec.maxProvisioned"},
		{types.KindMachineSet, set(20000, 0), "spec.minAvailable"},
		{types.KindMachineClaim, claim, "spec.bindTimeout"},
		{types.KindSession, func() map[string]any {
			s := minimal(types.KindSession, "s")
			s["spec"].(map[string]any)["timeout"] = "999999h"
			return s
		}(), "spec.timeout"},
		{types.KindMachineClaim, func() map[string]any {
			c := minimal(types.KindMachineClaim, "c")
			c["spec"].(map[string]any)["bindTimeout"] = 1e10 // seconds past what a duration holds
			return c
		}(), "spec.bindTimeout"},
	} {
		r := e.do("POST", path(tc.kind), adminTok, tc.body)
		if assert.Equal(t, http.StatusBadRequest, r.code, "%s %s: %s", tc.kind, tc.field, r.body) {
			assert.Equal(t, tc.field, r.errBody(t).Field)
			assert.NotContains(t, r.errBody(t).Message, "negative", "an overflow is not called negative")
		}
	}
}

// A template's driver entries are checked by the node's drivers when it is
// written: a bad entry is a 400 naming the field, not a failure at claim
// time.
func TestTemplateValidatedByDriversOnWrite(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		c.ValidateTemplate = func(tmpl types.MachineTemplate) error {
			if strings.Contains(string(tmpl.Spec.ProviderConfiguration["docker"]), "file://") {
				return types.Invalid("spec.providerConfiguration.docker.image.url", "want an http or https URL")
			}
			return nil
		}
	})
	bad := minimal(types.KindMachineTemplate, "shadow")
	bad["spec"].(map[string]any)["providerConfiguration"] = map[string]any{"docker": map[string]any{"image": map[string]any{"url": "file:///etc/shadow"}}}
	r := e.do("POST", path(types.KindMachineTemplate), adminTok, bad)
	require.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, "spec.providerConfiguration.docker.image.url", r.errBody(t).Field)
	assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "fine")).code)
	r = e.do("PUT", path(types.KindMachineTemplate, "fine"), adminTok, func() map[string]any { bad["metadata"].(map[string]any)["name"] = "fine"; return bad }())
	assert.Equal(t, http.StatusBadRequest, r.code, "on update too")
}

// labelSelector takes Kubernetes' syntax in full, parsed by Kubernetes'
// own parser, on lists and on watches (an object that stops matching is
// sent as deleted); what it cannot parse is a 400.
func TestLabelSelectors(t *testing.T) {
	e := newTestEnv(t)
	for name, tier := range map[string]string{"a": "gold", "b": "silver", "c": ""} {
		o := minimal(types.KindMachineTemplate, name)
		if tier != "" {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"tier": tier}
		}
		require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, o).code)
	}
	list := func(sel string) []string {
		r := e.do("GET", path(types.KindMachineTemplate)+"?labelSelector="+url.QueryEscape(sel), adminTok, nil)
		require.Equal(t, http.StatusOK, r.code, "%s: %s", sel, r.body)
		var out []string
		for _, it := range r.obj(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"a"}, list("tier=gold"))
	assert.Equal(t, []string{"a"}, list("tier==gold"))
	assert.Equal(t, []string{"b", "c"}, list("tier!=gold"), "!= matches objects without the key, as in Kubernetes")
	assert.Equal(t, []string{"a", "b"}, list("tier in (gold,silver)"))
	assert.Equal(t, []string{"b", "c"}, list("tier notin (gold)"))
	assert.Equal(t, []string{"a", "b"}, list("tier"))
	assert.Equal(t, []string{"c"}, list("!tier"))
	for _, bad := range []string{"tier in (gold", "tier in gold", "ti er=gold", "=gold"} {
		r := e.do("GET", path(types.KindMachineTemplate)+"?labelSelector="+url.QueryEscape(bad), adminTok, nil)
		if assert.Equal(t, http.StatusBadRequest, r.code, bad) {
			assert.Equal(t, "labelSelector", r.errBody(t).Field)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events, res := e.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true&labelSelector="+url.QueryEscape("tier=gold"), adminTok)
	defer res.Body.Close()
	assert.Equal(t, "a", nextPut(t, events).Name, "the snapshot holds only what matches")
	o := minimal(types.KindMachineTemplate, "a")
	o["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "bronze"}
	require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindMachineTemplate, "a"), adminTok, o).code)
	for {
		ev := next(t, events)
		if ev.name == WatchPut {
			assert.Failf(t, "a put of an object that does not match", "%s", ev.data.Name)
		}
		if ev.name == WatchDelete {
			assert.Equal(t, "a", ev.data.Name, "it stopped matching: deleted, to this stream")
			break
		}
	}
}

// Concurrent creates of one user through one node cannot all pass the cap.
func TestClaimQuotaUnderConcurrency(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.MaxClaimsPerUser = 5 })
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	var wg sync.WaitGroup
	codes := make([]int, 40)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, fmt.Sprintf("c%02d", i))).code
		}()
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		if c == http.StatusCreated {
			created++
		} else {
			assert.Equal(t, http.StatusTooManyRequests, c)
		}
	}
	assert.Equal(t, 5, created)
}

// serveTLS serves e's API with Serve (the node's own http.Server) over TLS on
// a loopback port until the test ends. It returns the address and a client
// config that trusts the server.
func (e *testEnv) serveTLS(t *testing.T) (string, *tls.Config) {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue("n1", []string{"127.0.0.1"}, time.Now())
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.srv.Serve(ctx, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}}))
	}()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	return ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
}

// sendSlowBody sends the headers of a request whose body is 200,000 bytes
// long, and one byte of it, on a new TLS connection to addr; the test then
// waits for the server. hdr are further header lines.
func sendSlowBody(t *testing.T, addr string, cfg *tls.Config, method, target string, hdr ...string) *tls.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	head := method + " " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	if !slices.Contains(hdr, "Transfer-Encoding: chunked") {
		head += "Content-Length: 200000\r\n"
	}
	for _, h := range hdr {
		head += h + "\r\n"
	}
	_, err = io.WriteString(conn, head+"\r\n{")
	require.NoError(t, err)
	return conn
}

// answeredAndClosed reads the server's answer on conn and then waits for the
// connection to close, both within a few seconds (the body deadline is far
// shorter). It returns the answer's status code.
func answeredAndClosed(t *testing.T, conn *tls.Conn) int {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "the server answers without waiting for the body")
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	assert.True(t, resp.Close, "the answer says Connection: close")
	_, err = br.ReadByte()
	require.Error(t, err)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the server closes the connection")
	return resp.StatusCode
}

// A request that never sends its body does not hold its connection,
// whatever the route and whether or not it has a token: the server answers
// without reading the rest of the body and closes the connection once
// BodyTimeout has passed since the headers (it used to read the body first,
// with no deadline: the connection stayed open for good).
func TestUnsentBodyDoesNotHoldConnection(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond; c.ShutdownTimeout = time.Second })
	addr, cfg := e.serveTLS(t)
	for _, tc := range []struct {
		name, method, target string
		hdr                  []string
		code                 int
	}{
		{"no token", "POST", "/api/v1/machineclaims", nil, http.StatusUnauthorized},
		{"chunked", "POST", "/api/v1/machineclaims", []string{"Transfer-Encoding: chunked"}, http.StatusUnauthorized},
		{"no route", "POST", "/nonexistent", nil, http.StatusNotFound},
		{"healthz", "GET", "/healthz", nil, http.StatusOK},
		{"token", "POST", "/api/v1/machineclaims", []string{"Authorization: Bearer " + adminTok}, http.StatusRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := sendSlowBody(t, addr, cfg, tc.method, tc.target, tc.hdr...)
			assert.Equal(t, tc.code, answeredAndClosed(t, conn))
		})
	}
}

// Bodies that are read keep their connection alive: two writes and a read
// go over one connection, the second after the first's BodyTimeout passed.
func TestKeepAliveAfterBody(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond; c.ShutdownTimeout = time.Second })
	addr, cfg := e.serveTLS(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
	send := func(method, target string, body any) int {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, "https://"+addr+target, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+adminTok)
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		_, err = io.Copy(io.Discard, res.Body)
		require.NoError(t, err)
		assert.False(t, res.Close, "%s %s: the connection is kept", method, target)
		return res.StatusCode
	}
	assert.Equal(t, http.StatusCreated, send("POST", path(types.KindMachineTemplate), minimal(types.KindMachineTemplate, "a")))
	time.Sleep(3 * e.srv.cfg.BodyTimeout)
	assert.Equal(t, http.StatusCreated, send("POST", path(types.KindMachineTemplate), minimal(types.KindMachineTemplate, "b")))
	assert.Equal(t, http.StatusOK, send("GET", path(types.KindMachineTemplate), nil))
	assert.Equal(t, []bool{false, true, true}, reused, "one connection")
}

// A watch has no body: BodyTimeout does not end it.
func TestWatchOutlivesBodyTimeout(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond; c.ShutdownTimeout = time.Second })
	addr, cfg := e.serveTLS(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+addr+path(types.KindMachineTemplate)+"?watch=true", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	events := readSSE(t, res.Body)
	time.Sleep(5 * e.srv.cfg.BodyTimeout)
	_, err = e.st.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: "late"},
		Spec: types.MachineTemplateSpec{ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage("{}")}}}, store.PutOptions{Create: true})
	require.NoError(t, err)
	assert.Equal(t, "late", nextPut(t, events).Name, "the stream still runs")
}

// Object metadata and a claim's set list are bounded, as a user-role token
// sends them (each write copies and stores them whole: 60 claims of a
// 1,000 KiB annotation once took a node from 108 MB to 1.1 GB): at most 64
// labels and 64 annotations, annotation keys as Kubernetes' qualified
// names, annotation keys and values at most 256 KiB in all and UTF-8, at
// most 16 distinct bindStrategyMachineSets. Each limit is a 400 naming the
// field; its edge is accepted.
func TestMetadataAndSetListLimits(t *testing.T) {
	e := newTestEnvOn(t, openDiskStore(t)) // objects over 1 KiB
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small")).code)
	many := func(n int, value string) map[string]any {
		m := make(map[string]any, n)
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = value
		}
		return m
	}
	sets := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("set-%d", i)
		}
		return out
	}
	// 256 KiB of keys and values in all.
	full := map[string]any{"a": strings.Repeat("x", 128<<10-1), "b": strings.Repeat("y", 128<<10-1)}
	over := map[string]any{"a": strings.Repeat("x", 128<<10-1), "b": strings.Repeat("y", 128<<10)}
	n := 0
	claim := func(meta, spec map[string]any) map[string]any {
		n++
		o := minimal(types.KindMachineClaim, fmt.Sprintf("c%d", n))
		maps.Copy(o["metadata"].(map[string]any), meta)
		maps.Copy(o["spec"].(map[string]any), spec)
		return o
	}
	for _, tc := range []struct {
		name  string
		kind  string
		body  map[string]any
		field string // "" = accepted
	}{
		{"64 labels", types.KindMachineClaim, claim(map[string]any{"labels": many(64, "v")}, nil), ""},
		{"65 labels", types.KindMachineClaim, claim(map[string]any{"labels": many(65, "v")}, nil), "metadata.labels"},
		{"5,000 labels", types.KindMachineClaim, claim(map[string]any{"labels": many(5000, "v")}, nil), "metadata.labels"},
		{"64 annotations", types.KindMachineClaim, claim(map[string]any{"annotations": many(64, "v")}, nil), ""},
		{"65 annotations", types.KindMachineClaim, claim(map[string]any{"annotations": many(65, "v")}, nil), "metadata.annotations"},
		{"256 KiB of annotations", types.KindMachineClaim, claim(map[string]any{"annotations": full}, nil), ""},
		{"a byte more", types.KindMachineClaim, claim(map[string]any{"annotations": over}, nil), "metadata.annotations"},
		{"a 1,000 KiB annotation", types.KindMachineClaim, claim(map[string]any{"annotations": map[string]any{"blob": strings.Repeat("x", 1000<<10)}}, nil), "metadata.annotations"},
		{"qualified keys", types.KindMachineClaim, claim(map[string]any{"annotations": map[string]any{
			"example.com/" + strings.Repeat("n", 63): "x", "note_1.a-b": "any text: $(id) ../.."}}, nil), ""},
		{"a key that is no name", types.KindMachineClaim, claim(map[string]any{"annotations": map[string]any{"$(id) ../..": "x"}}, nil), "metadata.annotations.$(id) ../.."},
		{"a 64-character name", types.KindMachineClaim, claim(map[string]any{"annotations": map[string]any{strings.Repeat("n", 64): "x"}}, nil), "metadata.annotations." + strings.Repeat("n", 64)},
		{"16 sets", types.KindMachineClaim, claim(nil, map[string]any{"bindStrategy": "PreferMachineSets", "bindStrategyMachineSets": sets(16)}), ""},
		{"17 sets", types.KindMachineClaim, claim(nil, map[string]any{"bindStrategy": "PreferMachineSets", "bindStrategyMachineSets": sets(17)}), "spec.bindStrategyMachineSets"},
		{"20,000 sets", types.KindMachineClaim, claim(nil, map[string]any{"bindStrategy": "RequireMachineSets", "bindStrategyMachineSets": sets(20000)}), "spec.bindStrategyMachineSets"},
		{"a set twice", types.KindMachineClaim, claim(nil, map[string]any{"bindStrategy": "RequireMachineSets", "bindStrategyMachineSets": []any{"pool", "lab", "pool"}}), "spec.bindStrategyMachineSets[2]"},
		{"a set that is no name", types.KindMachineClaim, claim(nil, map[string]any{"bindStrategyMachineSets": []any{"Pool"}}), "spec.bindStrategyMachineSets[0]"},
		{"another kind", types.KindSession, func() map[string]any {
			o := minimal(types.KindSession, "s1")
			o["metadata"].(map[string]any)["annotations"] = many(65, "v")
			return o
		}(), "metadata.annotations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", path(tc.kind), aliceTok, tc.body)
			if tc.field == "" {
				assert.Equal(t, http.StatusCreated, r.code, "%.300s", r.body)
				return
			}
			require.Equal(t, http.StatusBadRequest, r.code, "%.300s", r.body)
			assert.Equal(t, tc.field, r.errBody(t).Field)
		})
	}

	t.Run("on update too", func(t *testing.T) {
		o := minimal(types.KindMachineTemplate, "small")
		o["metadata"].(map[string]any)["annotations"] = map[string]any{"a b": "x"}
		r := e.do("PUT", path(types.KindMachineTemplate, "small"), adminTok, o)
		require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
		assert.Equal(t, "metadata.annotations.a b", r.errBody(t).Field)
	})

	// A string that is not UTF-8 is refused, not stored with U+FFFD in its
	// place; a literal U+FFFD, an escaped one and a surrogate pair are text.
	for _, tc := range []struct {
		name, annotations, field string
	}{
		{"a value's bytes", "{\"note\":\"a\xffb\"}", "metadata.annotations.note"},
		{"a key's bytes", "{\"no\xfete\":\"x\"}", "metadata.annotations"},
		{"a lone surrogate", `{"note":"a\ud800b"}`, "metadata.annotations.note"},
		{"a lone low surrogate", `{"note":"\uDC00"}`, "metadata.annotations.note"},
		{"U+FFFD as sent", `{"note":"\ufffd ` + "\uFFFD" + ` \\ud800 \ud83d\ude00"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n++
			body := fmt.Sprintf(`{"metadata":{"name":"u%d","annotations":%s},"spec":{"machineTemplate":"small"}}`, n, tc.annotations)
			r := e.do("POST", path(types.KindMachineClaim), aliceTok, body)
			if tc.field == "" {
				require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
				assert.Equal(t, "\uFFFD \uFFFD \\ud800 \U0001F600", r.obj(t)["metadata"].(map[string]any)["annotations"].(map[string]any)["note"])
				return
			}
			require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
			assert.Equal(t, tc.field, r.errBody(t).Field)
			assert.Contains(t, r.errBody(t).Message, "UTF-8")
		})
	}
	t.Run("in any field", func(t *testing.T) {
		r := e.do("POST", path(types.KindMachineClaim), aliceTok, "{\"metadata\":{\"name\":\"u0\"},\"spec\":{\"machineTemplate\":\"small\",\"bindStrategyMachineSets\":[\"a\",\"\xc3\"]}}")
		require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
		assert.Equal(t, "spec.bindStrategyMachineSets[1]", r.errBody(t).Field)
		assert.Contains(t, r.errBody(t).Message, "UTF-8", "said as such, not as a bad name")
	})
}

// A user's writes through a node are paced (api.user_writes_per_second, in
// bursts of five seconds' worth, at least 10): past the burst a write is a
// 429 with Retry-After, and not done; reads, and admins' writes, are not
// paced, nor are other users'.
func TestUserWritesArePaced(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.UserWritesPerSecond = 0.1 }) // a token every 10 s: none comes back during the test
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	for i := range 10 {
		r := e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, fmt.Sprintf("a%d", i)))
		require.Equal(t, http.StatusCreated, r.code, "write %d of the burst: %s", i, r.body)
	}
	r := e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "a10"))
	require.Equal(t, http.StatusTooManyRequests, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "api.user_writes_per_second")
	wait, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, 10, wait, 2, "a token comes back every 10 s")
	assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindMachineClaim, "a10"), aliceTok, nil).code, "the refused write was not done")
	assert.Equal(t, http.StatusOK, e.do("GET", path(types.KindMachineClaim, "a0"), aliceTok, nil).code, "reads are not paced")
	assert.Equal(t, http.StatusTooManyRequests, e.do("DELETE", path(types.KindMachineClaim, "a0"), aliceTok, nil).code, "deletes are writes")
	as := func(name, user string) map[string]any {
		o := minimal(types.KindMachineClaim, name)
		o["spec"].(map[string]any)["user"] = user
		return o
	}
	assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), bobTok, as("b1", "bob")).code, "per user")
	for i := range 20 {
		assert.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), adminTok, as(fmt.Sprintf("x%d", i), "ops")).code, "admins are not paced")
	}
}

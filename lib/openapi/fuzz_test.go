package openapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/types"
)

// FuzzDecodeObject sends arbitrary create and update bodies for every kind
// through the whole handler (decode, checks, validation, store): the answer is
// always 200, 201 or a 4xx in the error shape, never a panic or a 500.
func FuzzDecodeObject(f *testing.F) {
	kinds := types.Kinds()
	for i, kind := range kinds {
		m := minimal(kind, "fuzz")
		b, err := json.Marshal(m)
		require.NoError(f, err)
		f.Add(uint8(i), false, b)
		f.Add(uint8(i), true, b)
	}
	// Full objects, status and all.
	for _, o := range fullObjects(f) {
		o.Meta().Name = "fuzz"
		b, err := json.Marshal(o)
		require.NoError(f, err)
		for i, k := range kinds {
			if k == o.GetKind() {
				f.Add(uint8(i), false, b)
				f.Add(uint8(i), true, b)
			}
		}
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `"x"`, `{"kind":"Node"}`, `{"metadata":null}`,
		`{"metadata":{"name":"fuzz","version":"1@"}}`,
		`{"metadata":{"name":"fuzz","labels":{"a":null}},"spec":null}`,
		`{"metadata":{"name":"fuzz"},"spec":{"resources":{"cpu":1e400,"ramGB":1},"providerConfiguration":{"x":{}}}}`,
		`{"metadata":{"name":"fuzz"},"spec":{"startTime":"0000-01-01T00:00:00+23:59","endTime":"9999-12-31T23:59:59-23:59"}}`,
		`{"metadata":{"name":"fuzz"},"spec":{"machineTemplate":"t","bindTimeout":1e300}}`,
		`{"metadata":{"name":"fuzz"},"spec":{"providerConfiguration":{"":[[[[[[]]]]]]}}}`,
		`{"metadata":{"name":"fuzz","annotations":{"a":"<<<<>>>>&&&&\u2028"}},"spec":{"code":"abcd"}}`,
		`{"metadata":{"name":"fuzz"}} trailing`,
		`{"metadata":{"name":"fuzz","name":"fuzz2"},"spec":{"a":[{"b":1,"\u0062":2}]}}`,
		"{\"metadata\":{\"name\":\"fuzz\xff\"}}",
	} {
		for i := range kinds {
			f.Add(uint8(i), false, []byte(s))
			f.Add(uint8(i), true, []byte(s))
		}
	}

	logs := &syncbuf.Buffer{}
	srv, err := New(Config{AdminToken: adminTok}, slog.New(slog.NewTextHandler(logs, nil)), openDiskStore(f))
	require.NoError(f, err)
	h := srv.Handler()
	call := func(method, p string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, p, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminTok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	f.Fuzz(func(t *testing.T, k uint8, update bool, body []byte) {
		kind := kinds[int(k)%len(kinds)]
		method, p, ok := "POST", path(kind), http.StatusCreated
		if update {
			method, p, ok = "PUT", path(kind, "fuzz"), http.StatusOK
			// Something to update: the minimal object (ignore 409, it may exist).
			b, _ := json.Marshal(minimal(kind, "fuzz"))
			call("POST", path(kind), b)
		}
		rec := call(method, p, body)
		if rec.Code != ok && (rec.Code < 400 || rec.Code > 499) {
			t.Fatalf("%s %s %q -> %d %s\nlog: %s", method, p, body, rec.Code, rec.Body, logs.String())
		}
		if rec.Code >= 400 {
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%s %s %q -> %d without the error shape: %s", method, p, body, rec.Code, rec.Body)
			}
		}
		if rec.Code == http.StatusCreated {
			// Keep the store small and the name free: delete what was made
			// (the body may name another object than "fuzz").
			var made struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &made); err != nil || made.Metadata.Name == "" {
				t.Fatalf("create answered without a name: %s", rec.Body)
			}
			if d := call("DELETE", path(kind, made.Metadata.Name), nil); d.Code != http.StatusOK {
				t.Fatalf("delete after create -> %d %s", d.Code, d.Body)
			}
		}
		if strings.Contains(logs.String(), "handler panic") {
			t.Fatalf("panic: %s", logs.String())
		}
	})
}

// fuzzRoutes are the routes whose input is not an object body: queries of
// lists, watches' parameters and the audit record, and the bodies of the
// actions and cluster routes.
var fuzzRoutes = []struct{ method, path string }{
	{"GET", "/api/v1/machineclaims"},
	{"GET", "/api/v1/audit"},
	{"POST", "/api/v1/cluster/join-tokens"},
	{"POST", "/api/v1/cluster/gossip-keys"},
	{"POST", "/api/v1/cluster/join"},
	{"POST", "/api/v1/sessions/s1/keepalive"},
	{"POST", "/api/v1/nodes/n1/drain"},
	{"GET", "/api/v1/machinetemplates/x"},
	{"POST", "/api/v1/stream-tickets"},
}

// FuzzRequests sends arbitrary query strings and bodies to every route
// that takes no object body, as an admin: never a panic or a 5xx, and
// every error in the error shape. (Watches are left out: a valid one
// streams until its client leaves.)
func FuzzRequests(f *testing.F) {
	for i := range fuzzRoutes {
		for _, q := range []string{"", "limit=1", "limit=-1&continue=zz", "labelSelector=a%20in%20(b", "labelSelector=tier!=gold,x",
			"user=alice&kind=claims&since=2030-01-01T00:00:00Z", "kind=%ff", "since=0000-00-00", "fieldSelector=x",
			"fieldSelector=spec.user%3Dalice,status.phase!%3DBound", "fieldSelector=spec.nope%3D1", "fieldSelector=metadata.name%3D%3D%3D", "ticket=x"} {
			f.Add(uint8(i), q, []byte(`{"ttl":"1h"}`))
		}
		for _, b := range []string{``, `{}`, `null`, `[]`, `{"action":"install","key":"AAAA"}`, `{"ttl":"-1h"}`, `{"ttl":"99999999h"}`, "{\"ttl\":\"\xff\"}"} {
			f.Add(uint8(i), "", []byte(b))
		}
	}
	logs := &syncbuf.Buffer{}
	srv, err := New(Config{AdminToken: adminTok, Keyring: &memKeyring{keys: [][]byte{bytes.Repeat([]byte{7}, 32)}}, Joining: &Joining{
		Bundle: func() (JoinBundle, error) { return JoinBundle{CACert: "c", CAKey: "k"}, nil }, Endpoint: "https://127.0.0.1:1",
		CAFingerprint: testFingerprint, GossipAddress: "127.0.0.1:2"}}, slog.New(slog.NewTextHandler(logs, nil)), openDiskStore(f))
	require.NoError(f, err)
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, r uint8, query string, body []byte) {
		route := fuzzRoutes[int(r)%len(fuzzRoutes)]
		if strings.ContainsAny(query, "# \r\n\t") {
			query = url.QueryEscape(query)
		}
		req := httptest.NewRequest(route.method, "http://x"+route.path, bytes.NewReader(body))
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+adminTok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s?%s %q -> %d %s\nlog: %s", route.method, route.path, query, body, rec.Code, rec.Body, logs.String())
		}
		if rec.Code >= 400 {
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%s %s?%s -> %d without the error shape: %s", route.method, route.path, query, rec.Code, rec.Body)
			}
		}
		if strings.Contains(logs.String(), "handler panic") {
			t.Fatalf("panic: %s", logs.String())
		}
	})
}

// FuzzDecodeFastMatchesChecked: whatever the fast decode (goccy) accepts,
// the checked one (encoding/json, strict) accepts too, as the same object.
func FuzzDecodeFastMatchesChecked(f *testing.F) {
	kinds := types.Kinds()
	for i, kind := range kinds {
		b, err := json.Marshal(minimal(kind, "fuzz"))
		require.NoError(f, err)
		f.Add(uint8(i), b)
	}
	for _, o := range fullObjects(f) {
		b, err := json.Marshal(o)
		require.NoError(f, err)
		f.Add(uint8(slices.Index(kinds, o.GetKind())), b)
	}
	for _, s := range []string{
		`{"metadata":{"name":"fuzz"},"spec":{"resources":{"cpu":1e400,"ramGB":1}}}`,
		`{"metadata":{"name":"fu\u00e9zz"},"Spec":{}}`,
		`{"metadata":{"name":"a","name":"b"}}`,
		"{\"metadata\":{\"name\":\"fuzz\xff\"}}",
		`{"metadata":{"name":"x","labels":{"a":"\ud800"}}}`,
		`{"kind":null,"metadata":{"name":"x"}}`,
		`{"metadata":{"name":"x","createdAt":"2026-01-01T00:00:00Z"},"spec":{"bindTimeout":"1h"}}`,
	} {
		for i := range kinds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := kinds[int(k)%len(kinds)]
		fast, ok := decodeObjectFast(kind, body)
		if !ok {
			return
		}
		checked, err := decodeObjectChecked(kind, body)
		require.NoError(t, err, "the fast decode took what the checked one refuses")
		a, err := json.Marshal(fast)
		require.NoError(t, err)
		b, err := json.Marshal(checked)
		require.NoError(t, err)
		require.JSONEq(t, string(b), string(a))
	})
}

// FuzzParseJoinToken: a join token is what an operator pastes into
// --join-token. Whatever it holds, parsing fails or gives an https endpoint,
// a 64-hex-digit pin and a bearer that make the same token again.
func FuzzParseJoinToken(f *testing.F) {
	f.Add(FormatJoinToken("https://127.0.0.1:7700", testFingerprint, "join-1.secret"))
	f.Add(FormatJoinToken("http://127.0.0.1:7700", testFingerprint, "join-1.secret"))
	f.Add("hfjoin1.aHR0cHM6Ly94.short.a.b")
	f.Add(" hfjoin1..." + testFingerprint + "..\n")
	f.Fuzz(func(t *testing.T, s string) {
		ep, fp, bearer, ok := ParseJoinToken(s)
		if !ok {
			return
		}
		if u, err := url.Parse(ep); err != nil || u.Scheme != "https" || u.Host == "" {
			t.Fatalf("endpoint %q is not an https URL", ep)
		}
		if _, err := hex.DecodeString(fp); err != nil || len(fp) != 64 {
			t.Fatalf("pin %q", fp)
		}
		ep2, fp2, bearer2, ok := ParseJoinToken(FormatJoinToken(ep, fp, bearer))
		if !ok || ep2 != ep || fp2 != fp || bearer2 != bearer {
			t.Fatalf("%q does not make the same token again: %q %q %q", s, ep2, fp2, bearer2)
		}
	})
}

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

func newClient(t *testing.T, srv *clienttest.Server, token string) *client.Client {
	t.Helper()
	c, err := client.New(srv.URL, token)
	require.NoError(t, err)
	return c
}

func claim(name, template string, labels map[string]string) *types.MachineClaim {
	return &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: labels},
		Spec:     types.MachineClaimSpec{MachineTemplate: template},
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		wantErr  bool
		want     string
	}{
		{"plain", "http://127.0.0.1:7700", false, "http://127.0.0.1:7700"},
		{"trailing slash", "http://127.0.0.1:7700/", false, "http://127.0.0.1:7700"},
		{"prefix", "https://hf.example/api-gw/", false, "https://hf.example/api-gw"},
		{"no scheme", "127.0.0.1:7700", true, ""},
		{"ftp", "ftp://host", true, ""},
		{"no host", "http://", true, ""},
		{"garbage", "http://[::1", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(tt.endpoint, "tok")
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.Endpoint())
		})
	}
}

func TestCRUD(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ctx := context.Background()

	created, err := c.Create(ctx, claim("c1", "small", map[string]string{"team": "a"}))
	require.NoError(t, err)
	cl, ok := created.(*types.MachineClaim)
	require.True(t, ok, "create returns a *MachineClaim, got %T", created)
	assert.Equal(t, "c1", cl.Metadata.Name)
	assert.False(t, cl.Metadata.Version.IsZero(), "server stamps a version")
	assert.False(t, cl.Metadata.CreatedAt.IsZero(), "server stamps createdAt")

	_, err = c.Create(ctx, claim("c2", "big", map[string]string{"team": "b"}))
	require.NoError(t, err)

	got, err := c.Get(ctx, types.KindMachineClaim, "c1")
	require.NoError(t, err)
	assert.Equal(t, "small", got.(*types.MachineClaim).Spec.MachineTemplate)

	t.Run("list all", func(t *testing.T) {
		all, err := c.List(ctx, "machineclaims", nil)
		require.NoError(t, err)
		require.Len(t, all, 2)
		assert.Equal(t, "c1", all[0].Meta().Name)
		assert.Equal(t, types.KindMachineClaim, all[1].GetKind())
	})
	t.Run("list by selector", func(t *testing.T) {
		sel, err := c.List(ctx, types.KindMachineClaim, map[string]string{"team": "b"})
		require.NoError(t, err)
		require.Len(t, sel, 1)
		assert.Equal(t, "c2", sel[0].Meta().Name)
		reqs := srv.Requests()
		assert.Equal(t, "labelSelector=team%3Db&limit=500", reqs[len(reqs)-1].Query)
	})
	t.Run("list follows pages", func(t *testing.T) {
		for i := range 5 {
			_, err := c.Create(ctx, claim(fmt.Sprintf("p%d", i), "small", nil))
			require.NoError(t, err)
		}
		paged, err := client.New(srv.URL, clienttest.Token, client.WithListPage(2))
		require.NoError(t, err)
		before := len(srv.Requests())
		all, err := paged.List(ctx, types.KindMachineClaim, nil)
		require.NoError(t, err)
		var names []string
		for _, o := range all {
			names = append(names, o.Meta().Name)
		}
		assert.Equal(t, []string{"c1", "c2", "p0", "p1", "p2", "p3", "p4"}, names)
		reqs := srv.Requests()[before:]
		require.Len(t, reqs, 4, "7 objects in pages of 2")
		assert.Equal(t, "continue=c2&limit=2", reqs[1].Query)
		for _, name := range []string{"p0", "p1", "p2", "p3", "p4"} {
			require.NoError(t, c.Delete(ctx, types.KindMachineClaim, name))
		}
	})
	t.Run("update sends If-Match", func(t *testing.T) {
		cl := got.(*types.MachineClaim)
		cl.Spec.User = "alice"
		upd, err := c.Update(ctx, cl)
		require.NoError(t, err)
		assert.Equal(t, "alice", upd.(*types.MachineClaim).Spec.User)
		assert.Equal(t, 1, upd.Meta().Version.Compare(cl.Metadata.Version), "version moves on")
		reqs := srv.Requests()
		assert.Equal(t, cl.Metadata.Version.String(), reqs[len(reqs)-1].IfMatch)

		// The version we held is now stale.
		cl.Spec.User = "bob"
		_, err = c.Update(ctx, cl)
		assert.True(t, client.IsConflict(err), "stale If-Match: %v", err)
	})
	t.Run("update without version is unconditional", func(t *testing.T) {
		_, err := c.Update(ctx, claim("c2", "big", nil))
		require.NoError(t, err)
		reqs := srv.Requests()
		assert.Empty(t, reqs[len(reqs)-1].IfMatch)
	})
	t.Run("update of a missing object", func(t *testing.T) {
		_, err := c.Update(ctx, claim("nope", "big", nil))
		assert.True(t, client.IsNotFound(err), "%v", err)
	})
	t.Run("create twice", func(t *testing.T) {
		_, err := c.Create(ctx, claim("c1", "small", nil))
		assert.True(t, client.IsConflict(err), "%v", err)
		assert.Contains(t, err.Error(), "already exists")
	})
	t.Run("delete", func(t *testing.T) {
		require.NoError(t, c.Delete(ctx, types.KindMachineClaim, "c1"))
		_, err := c.Get(ctx, types.KindMachineClaim, "c1")
		require.Error(t, err)
		assert.True(t, client.IsNotFound(err))
		assert.True(t, errors.Is(err, client.ErrNotFound))
		assert.Equal(t, `not_found: machineclaim "c1" not found`, err.Error())
		var apiErr *client.APIError
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusNotFound, apiErr.Status)

		assert.True(t, client.IsNotFound(c.Delete(ctx, types.KindMachineClaim, "c1")))
	})
}

func TestCreateFillsKindFromGoType(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	tpl := &types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "small"},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: 1, RAMGB: 2},
			ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)},
		},
	}
	got, err := c.Create(context.Background(), tpl)
	require.NoError(t, err)
	assert.Equal(t, types.KindMachineTemplate, got.GetKind())
}

func TestCreateRaw(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ctx := context.Background()

	got, err := c.CreateRaw(ctx, "MachineClaim", []byte(`{"kind":"MachineClaim","metadata":{"name":"raw"},"spec":{"machineTemplate":"small"}}`))
	require.NoError(t, err)
	assert.Equal(t, "raw", got.Meta().Name)

	_, err = c.CreateRaw(ctx, "MachineClaim", []byte(`{"kind":"MachineClaim","metadata":{"name":"Bad Name"},"spec":{"machineTemplate":"small"}}`))
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, client.CodeInvalid, apiErr.Code)
	assert.Equal(t, "metadata.name", apiErr.Field)
	assert.True(t, errors.Is(err, client.ErrInvalid))

	_, err = c.CreateRaw(ctx, "Gadget", []byte(`{}`))
	assert.ErrorIs(t, err, client.ErrUnknownKind)
}

func TestAuthErrors(t *testing.T) {
	srv := clienttest.New(t)
	ctx := context.Background()

	_, err := newClient(t, srv, "wrong").List(ctx, types.KindNode, nil)
	assert.True(t, client.IsUnauthorized(err), "%v", err)
	_, err = newClient(t, srv, "").List(ctx, types.KindNode, nil)
	assert.True(t, client.IsUnauthorized(err), "%v", err)

	ro := newClient(t, srv, clienttest.ReadOnlyToken)
	_, err = ro.List(ctx, types.KindNode, nil)
	assert.NoError(t, err)
	_, err = ro.Create(ctx, claim("c1", "small", nil))
	assert.True(t, client.IsForbidden(err), "%v", err)
	assert.False(t, client.IsUnauthorized(err))
}

func TestErrorBodies(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantCode string
		wantMsg  string
		is       error
	}{
		{"api error", 409, `{"error":{"code":"conflict","message":"machineclaim \"x\" changed","field":"metadata.version"}}`,
			"conflict", `conflict: machineclaim "x" changed`, client.ErrConflict},
		{"field named", 400, `{"error":{"code":"bad_request","message":"must be a number","field":"since"}}`,
			"bad_request", `bad_request: since: must be a number`, client.ErrInvalid},
		{"field already in message", 422, `{"error":{"code":"invalid","message":"spec.cpu: must be positive","field":"spec.cpu"}}`,
			"invalid", `invalid: spec.cpu: must be positive`, client.ErrInvalid},
		{"proxy html", 502, `<html><body>Bad Gateway</body></html>`, "internal", "internal: bad gateway", nil},
		{"plain text 404", 404, "404 page not found\n", "not_found", "not_found: 404 page not found", client.ErrNotFound},
		{"empty 401", 401, "", "unauthorized", "unauthorized: unauthorized", client.ErrUnauthorized},
		{"empty 403", 403, "", "forbidden", "forbidden: forbidden", client.ErrForbidden},
		{"too large", 413, "", "too_large", "too_large: request entity too large", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(hs.Close)
			c, err := client.New(hs.URL, "tok")
			require.NoError(t, err)
			_, err = c.Get(context.Background(), types.KindNode, "n1")
			var apiErr *client.APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tt.status, apiErr.Status)
			assert.Equal(t, tt.wantCode, apiErr.Code)
			assert.Equal(t, tt.wantMsg, err.Error())
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
		})
	}
}

func TestTransportErrorKeepsContext(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, "tok")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Get(ctx, types.KindNode, "n1")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "get /api/v1/nodes/n1")
}

func TestPathPrefixAndEscaping(t *testing.T) {
	var paths []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"a/b"}}`))
	}))
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL+"/gw/", "tok")
	require.NoError(t, err)
	_, err = c.Get(context.Background(), "nodes", "a/b")
	require.NoError(t, err)
	assert.Equal(t, []string{"/gw/api/v1/nodes/a%2Fb"}, paths)
}

func TestHealthWhoAmIDrain(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ctx := context.Background()

	require.NoError(t, c.Health(ctx))
	require.NoError(t, c.Ready(ctx))
	who, err := c.WhoAmI(ctx)
	require.NoError(t, err)
	assert.Equal(t, "admin", who["role"])

	srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"}})
	n, err := c.Drain(ctx, "n1")
	require.NoError(t, err)
	require.NotNil(t, n)
	assert.True(t, n.Spec.Maintenance)
	n, err = c.Undrain(ctx, "n1")
	require.NoError(t, err)
	require.NotNil(t, n)
	assert.False(t, n.Spec.Maintenance)
	_, err = c.Drain(ctx, "ghost")
	assert.True(t, client.IsNotFound(err), "%v", err)
}

func TestDrainEmptyResponse(t *testing.T) {
	var method, path string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path = r.Method, r.URL.Path
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, "tok")
	require.NoError(t, err)
	n, err := c.Drain(context.Background(), "n1")
	require.NoError(t, err)
	assert.Nil(t, n)
	assert.Equal(t, "POST", method)
	assert.Equal(t, "/api/v1/nodes/n1/drain", path)
}

func TestSelectors(t *testing.T) {
	assert.Equal(t, "a=1,b=2", client.FormatSelector(map[string]string{"b": "2", "a": "1"}))
	assert.Equal(t, "", client.FormatSelector(nil))

	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"a=1, b=2", map[string]string{"a": "1", "b": "2"}, false},
		{"", map[string]string{}, false},
		{"a=", map[string]string{"a": ""}, false},
		{"a", nil, true},
		{"=1", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := client.ParseSelector(tt.in)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// warnOnPost answers every POST as the server it passes it to does, with the
// Warning header values added.
type warnOnPost []string

func (w warnOnPost) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		for _, v := range w {
			resp.Header.Add("Warning", v)
		}
	}
	return resp, err
}

// CreateRawWith passes the create's options as query parameters (an event
// over capacity is created with capacityCheck=warn), and each Warning the
// answer carries reaches the warning handler as its text.
func TestCreateOptionsAndWarnings(t *testing.T) {
	event := func(name string) []byte {
		return []byte(`{"kind":"ScheduledEvent","metadata":{"name":"` + name + `"},` +
			`"spec":{"startTime":"2026-06-01T10:00:00Z","endTime":"2026-06-01T12:00:00Z"}}`)
	}
	for i, tc := range []struct {
		name    string
		opts    client.CreateOptions
		query   string
		headers []string
		want    []string
	}{
		{name: "default", query: ""},
		{name: "warn", opts: client.CreateOptions{CapacityCheck: "warn"}, query: "capacityCheck=warn",
			headers: []string{`199 hf "needs cpu 121.0 of 24.0"`}, want: []string{"needs cpu 121.0 of 24.0"}},
		{name: "off", opts: client.CreateOptions{CapacityCheck: "off"}, query: "capacityCheck=off"},
		{name: "warning forms", headers: []string{`199 hf "a \"quoted\" word" "Sat, 01 Jun 2026 10:00:00 GMT"`, `199 hf "one"`, "not a warning"},
			want: []string{`a "quoted" word`, "one", "not a warning"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := clienttest.New(t)
			var got []string
			c, err := client.New(srv.URL, clienttest.Token, client.WithHTTPClient(&http.Client{Transport: warnOnPost(tc.headers)}),
				client.WithWarningHandler(func(text string) { got = append(got, text) }))
			require.NoError(t, err)
			obj, err := c.CreateRawWith(context.Background(), "scheduledevents", event(fmt.Sprintf("ev%d", i)), tc.opts)
			require.NoError(t, err)
			assert.Equal(t, types.KindScheduledEvent, obj.GetKind())
			reqs := srv.Requests()
			require.NotEmpty(t, reqs)
			last := reqs[len(reqs)-1]
			assert.Equal(t, http.MethodPost, last.Method)
			assert.Equal(t, tc.query, last.Query)
			assert.Equal(t, tc.want, got)
		})
	}
}

package testdriver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/types"
)

// template builds a template with the given providerConfiguration entries.
func template(name string, pc map[string]string) types.MachineTemplate {
	t := types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: 1, RAMGB: 2, DiskGB: 10},
			ProviderConfiguration: map[string]json.RawMessage{},
			ClaimMetadata:         []types.MetadataKey{{Name: "claim"}, {Name: "lab_user"}},
		},
	}
	for k, v := range pc {
		t.Spec.ProviderConfiguration[k] = json.RawMessage(v)
	}
	return t
}

// prepared returns a prepared test driver on dir with cfg.
func prepared(t *testing.T, dir, cfg string) *Driver {
	t.Helper()
	d := newDriver(drivers.Env{Instance: "test", DataDir: dir, NodeName: "node-a"})
	require.NoError(t, d.Prepare(t.Context(), []byte(cfg)))
	return d
}

var plain = template("plain", map[string]string{"test": `{}`})

func TestAllocateFillsResource(t *testing.T) {
	d := prepared(t, t.TempDir(), `{}`)
	meta := map[string]string{"claim": "c1", "lab_user": "bob", "HF_CLAIM": "c1"}
	r, err := d.Allocate(t.Context(), plain, map[string]string{"claim": "c1", "lab_user": "bob", "HF_CLAIM": "c1",
		"undeclared": "x", "LD_PRELOAD": "/evil.so"})
	require.NoError(t, err)

	assert.Regexp(t, regexp.MustCompile(`^test-[0-9a-f]{16}$`), r.ID)
	assert.Equal(t, "test", r.Driver)
	assert.Equal(t, map[string]string{"host": "node-a", "id": r.ID}, r.Info)
	assert.Equal(t, []types.Endpoint{{Protocol: "test", Address: "test://node-a/" + r.ID}}, r.Endpoints)
	assert.Equal(t, plain.Spec.Resources, r.Resources)
	var data resourceData
	require.NoError(t, json.Unmarshal(r.Data, &data))
	assert.Equal(t, resourceData{Template: "plain", Meta: meta}, data, "declared keys and the node's HF_* keys only")

	// The caller's copy is its own: changing it does not change what is held.
	r.Info["host"] = "elsewhere"
	list, err := d.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "node-a", list[0].Info["host"])
	assert.Equal(t, 1, Held(d))
}

func TestDelay(t *testing.T) {
	slow := template("slow", map[string]string{"test": `{"delay": "1h"}`})
	fast := template("fast", map[string]string{"test": `{"delay": "0s"}`})

	t.Run("driver delay is honoured", func(t *testing.T) {
		d := prepared(t, t.TempDir(), `{"delay": "40ms"}`)
		start := time.Now()
		_, err := d.Allocate(t.Context(), plain, nil)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	})
	t.Run("template delay overrides the driver's", func(t *testing.T) {
		d := prepared(t, t.TempDir(), `{"delay": "1h"}`)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := d.Allocate(ctx, fast, nil)
		require.NoError(t, err)
	})
	for _, tc := range []struct {
		name   string
		cfg    string
		tmpl   types.MachineTemplate
		cancel func(context.CancelFunc)
		want   error
	}{
		{"deadline during driver delay", `{"delay": "1h"}`, plain, nil, context.DeadlineExceeded},
		{"deadline during template delay", `{}`, slow, nil, context.DeadlineExceeded},
		{"cancel during delay", `{"delay": "1h"}`, plain, func(c context.CancelFunc) { time.AfterFunc(20*time.Millisecond, c) }, context.Canceled},
		{"cancelled before the call", `{}`, plain, func(c context.CancelFunc) { c() }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := prepared(t, t.TempDir(), tc.cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if tc.cancel != nil {
				ctx, cancel = context.WithCancel(t.Context())
				defer cancel()
				tc.cancel(cancel)
			}
			start := time.Now()
			r, err := d.Allocate(ctx, tc.tmpl, nil)
			assert.ErrorIs(t, err, tc.want)
			assert.Nil(t, r)
			assert.Less(t, time.Since(start), 10*time.Second, "allocate returns when the context ends")
			assert.Equal(t, 0, d.Held())
		})
	}
}

func TestFailures(t *testing.T) {
	t.Run("failure rate 1 always fails and leaves nothing", func(t *testing.T) {
		dir := t.TempDir()
		d := prepared(t, dir, `{"failure_rate": 1}`)
		for range 20 {
			r, err := d.Allocate(t.Context(), plain, nil)
			require.ErrorIs(t, err, ErrInjectedFailure)
			require.Nil(t, r)
		}
		assert.Equal(t, 0, d.Held())
		assert.Equal(t, 0, prepared(t, dir, `{}`).Held(), "nothing reached the state file")
	})
	t.Run("failure rate follows the injected randomness", func(t *testing.T) {
		d := prepared(t, t.TempDir(), `{"failure_rate": 0.5}`)
		rolls := []float64{0.7, 0.2, 0.5, 0.49, 0.99}
		d.roll = func() float64 { v := rolls[0]; rolls = rolls[1:]; return v }
		var got []bool
		for range 5 {
			_, err := d.Allocate(t.Context(), plain, nil)
			got = append(got, err == nil)
		}
		assert.Equal(t, []bool{true, false, true, false, true}, got)
		assert.Equal(t, 3, d.Held())
	})
	t.Run("failure rate 0 never rolls", func(t *testing.T) {
		d := prepared(t, t.TempDir(), `{}`)
		d.roll = func() float64 { panic("roll called with failure rate 0") }
		_, err := d.Allocate(t.Context(), plain, nil)
		require.NoError(t, err)
	})
	t.Run("template fail", func(t *testing.T) {
		d := prepared(t, t.TempDir(), `{}`)
		r, err := d.Allocate(t.Context(), template("bad", map[string]string{"test": `{"fail": true}`}), nil)
		require.ErrorIs(t, err, ErrInjectedFailure)
		assert.Contains(t, err.Error(), `template "bad" asks to fail`)
		assert.Nil(t, r)
		assert.Equal(t, 0, d.Held())
	})
}

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	d := prepared(t, dir, `{}`)
	var rs []*types.Resource
	for i := range 3 {
		r, err := d.Allocate(t.Context(), plain, map[string]string{"i": string(rune('a' + i))})
		require.NoError(t, err)
		rs = append(rs, r)
	}
	require.NoError(t, d.Deallocate(t.Context(), rs[1]))
	want, err := d.List(t.Context())
	require.NoError(t, err)
	require.Len(t, want, 2)
	// List hands out what Allocate did (the driver holds less of it).
	assert.ElementsMatch(t, []types.Resource{*rs[0], *rs[2]}, want)

	again := prepared(t, dir, `{}`)
	got, err := again.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Under another node name, what an earlier one made stays as it was.
	renamed := newDriver(drivers.Env{Instance: "test", DataDir: dir, NodeName: "node-b"})
	require.NoError(t, renamed.Prepare(t.Context(), []byte(`{}`)))
	got, err = renamed.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, "node-a", got[0].Info["host"])
	phase, err := again.Status(t.Context(), rs[0])
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase)
	_, err = again.Status(t.Context(), rs[1])
	assert.ErrorIs(t, err, drivers.ErrNotFound)

	st, err := os.Stat(filepath.Join(dir, StateFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary files are left behind")
}

func TestCorruptState(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"not json", `{"version": 1, "resources": [`, "corrupt file"},
		{"empty", ``, "corrupt file (repair or remove it): empty"},
		{"unknown key", `{"version": 1, "machines": []}`, `unknown key "machines"`},
		{"wrong version", `{"version": 7, "resources": []}`, "version 7, want 1"},
		{"missing id", `{"version": 1, "resources": [{"driver": "test"}]}`, "resource 0 has no id"},
		{"duplicate", `{"version": 1, "resources": [{"id": "a"}, {"id": "a"}]}`, "resource a listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, StateFile)
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			d := New(drivers.Env{Instance: "test", DataDir: dir, NodeName: "n"})
			err := d.Prepare(t.Context(), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.want)
			_, err = d.List(t.Context())
			assert.ErrorIs(t, err, drivers.ErrNotPrepared, "a failed Prepare leaves the driver unusable")
		})
	}
}

func TestNotPrepared(t *testing.T) {
	d := New(drivers.Env{DataDir: t.TempDir()})
	_, err := d.Allocate(t.Context(), plain, nil)
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	_, err = d.Status(t.Context(), &types.Resource{ID: "x"})
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	assert.ErrorIs(t, d.Deallocate(t.Context(), &types.Resource{ID: "x"}), drivers.ErrNotPrepared)
	_, err = d.List(t.Context())
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
}

func TestWithoutDataDir(t *testing.T) {
	d := prepared(t, "", `{}`)
	r, err := d.Allocate(t.Context(), plain, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, d.Held())
	require.NoError(t, d.Deallocate(t.Context(), r))
	assert.Equal(t, 0, d.Held())
}

func TestHeld(t *testing.T) {
	reg := drivers.NewRegistry()
	require.NoError(t, reg.Register(Type, New))
	d, err := reg.New(Type, drivers.Env{NodeName: "n"})
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context(), nil))
	assert.Equal(t, "test", d.Name())
	assert.False(t, d.IsRemote())
	assert.Equal(t, 0, Held(d))
	_, err = d.Allocate(t.Context(), plain, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, Held(d))
	assert.Equal(t, -1, Held(notTest{d}))
}

// notTest wraps a driver so it is not a *Driver.
type notTest struct{ drivers.Driver }

// BenchmarkAllocateDeallocate measures one allocate + deallocate pair, each of
// which appends a line to the journal; "memory" has no data dir.
func BenchmarkAllocateDeallocate(b *testing.B) {
	for _, bc := range []struct {
		name string
		dir  func() string
	}{{"disk", b.TempDir}, {"memory", func() string { return "" }}} {
		b.Run(bc.name, func(b *testing.B) {
			d := newDriver(drivers.Env{Instance: "test", DataDir: bc.dir(), NodeName: "n"})
			require.NoError(b, d.Prepare(b.Context(), nil))
			for b.Loop() {
				r, err := d.Allocate(b.Context(), plain, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Deallocate(b.Context(), r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Cool copies what the driver holds and changes none of it: the list, each
// resource's status and a release after it are as before.
func TestCoolKeepsHoldings(t *testing.T) {
	dir := t.TempDir()
	d := prepared(t, dir, `{}`)
	var rs []*types.Resource
	for range 3 {
		r, err := d.Allocate(t.Context(), plain, map[string]string{"claim": "c1"})
		require.NoError(t, err)
		rs = append(rs, r)
	}
	before, err := d.List(t.Context())
	require.NoError(t, err)
	data := func() *byte { d.mu.Lock(); defer d.mu.Unlock(); return &d.held[rs[0].ID].Data[0] }
	was := data()
	d.Cool(intern.New())
	assert.True(t, was != data(), "what is held is copied afresh")
	after, err := d.List(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, before, after)
	st, err := d.Status(t.Context(), rs[0])
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, st)
	require.NoError(t, d.Deallocate(t.Context(), rs[1]))
	assert.Equal(t, 2, Held(d))
	// What the driver keeps on disk follows too.
	d2 := prepared(t, dir, `{}`)
	assert.Equal(t, 2, Held(d2))
}

package cmd

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func newSet(name, template string, min, max int) *types.MachineSet {
	return &types.MachineSet{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineSet},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineSetSpec{
			AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool},
			MachineTemplate:           template, MinAvailable: min, MaxProvisioned: max,
		},
	}
}

func storedSet(t *testing.T, c *cli, name string) *types.MachineSet {
	t.Helper()
	o, ok := c.srv.Object(types.KindMachineSet, name)
	require.True(t, ok, name)
	return o.(*types.MachineSet)
}

func TestSetScale(t *testing.T) {
	c := newCLI(t)
	s := newSet("pool", "small", 1, 5)
	s.Status = types.MachineSetStatus{Provisioned: 2, Available: 1}
	read := c.srv.Put(s).Meta().Version

	r := c.run("set", "scale", "pool", "--min", "3", "--max", "8")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool scaled (min 3, max 8)\n", r.out)
	got := storedSet(t, c, "pool")
	assert.Equal(t, 3, got.Spec.MinAvailable)
	assert.Equal(t, 8, got.Spec.MaxProvisioned)
	assert.Equal(t, "small", got.Spec.MachineTemplate, "the rest of the spec is kept")
	assert.Equal(t, 2, got.Status.Provisioned, "status is kept")

	// One GET, then a PUT conditional on the version the GET returned.
	reqs := c.srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "GET /api/v1/machinesets/pool", reqs[0].Method+" "+reqs[0].Path)
	assert.Equal(t, "PUT /api/v1/machinesets/pool", reqs[1].Method+" "+reqs[1].Path)
	assert.Equal(t, read.String(), reqs[1].IfMatch)

	// --min alone keeps the set's max; --max 0 lifts the limit.
	r = c.run("set", "scale", "pool", "--min", "4")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool scaled (min 4, max 8)\n", r.out)
	r = c.run("sets", "scale", "pool", "--min", "20", "--max", "0")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool scaled (min 20, max 0)\n", r.out)
	r = c.run("machineset", "scale", "pool", "--max", "30")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool scaled (min 20, max 30)\n", r.out)

	// -o json prints the updated set.
	r = c.run("set", "scale", "pool", "--min", "2", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var out types.MachineSet
	require.NoError(t, json.Unmarshal([]byte(r.out), &out), r.out)
	assert.Equal(t, 2, out.Spec.MinAvailable)
	assert.Equal(t, 30, out.Spec.MaxProvisioned)
	assert.Equal(t, storedSet(t, c, "pool").Metadata.Version, out.Metadata.Version)
}

func TestSetScaleUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no flags", []string{"pool"}, "set scale needs --min N, --max M or both"},
		{"no name", []string{"--min", "1"}, "needs one NAME"},
		{"two names", []string{"a", "b", "--min", "1"}, "needs one NAME"},
		{"negative min", []string{"pool", "--min", "-1"}, "--min must not be negative"},
		{"negative max", []string{"pool", "--min", "1", "--max", "-2"}, "--max must not be negative"},
		{"min above max", []string{"pool", "--min", "5", "--max", "3"}, "--min 5 exceeds --max 3"},
		{"not a number", []string{"pool", "--min", "lots"}, `invalid argument "lots" for "--min"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t)
			r := c.run(append([]string{"set", "scale"}, tt.args...)...)
			assert.Equal(t, ExitUsage, r.code, r.err)
			assert.Contains(t, r.err, tt.want)
			assert.Empty(t, c.srv.Requests(), "nothing reaches the server")
		})
	}
}

// --max alone is a scale of its own (the set's minAvailable kept), as the
// command has always done it; its usage line, its help and its error said
// that --min was required ("scale NAME --min N [--max M]").
func TestSetScaleMaxAlone(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(newSet("pool", "small", 2, 5))
	r := c.run("set", "scale", "pool", "--max", "3")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineset/pool scaled (min 2, max 3)\n", r.out)
	got := storedSet(t, c, "pool")
	assert.Equal(t, 2, got.Spec.MinAvailable, "kept")
	assert.Equal(t, 3, got.Spec.MaxProvisioned)

	r = c.run("set", "scale", "--help")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "hf-cli set scale NAME [--min N] [--max M]")
	assert.Contains(t, r.out, "give one or both. A flag left out keeps the set's value")
	assert.Contains(t, r.out, "hf-cli set scale pool --max 0")
}

func TestSetScaleAgainstTheStoredSet(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"min above the set's max", []string{"--min", "7"}, "--min 7 exceeds the set's maxProvisioned 5 (raise it with --max)"},
		{"max below the set's min", []string{"--max", "2"}, "--max 2 is below the set's minAvailable 3 (lower it with --min)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t)
			c.srv.Put(newSet("pool", "small", 3, 5))
			r := c.run(append([]string{"set", "scale", "pool"}, tt.args...)...)
			assert.Equal(t, ExitUsage, r.code, r.err)
			assert.Equal(t, "hf-cli: "+tt.want+"\n", r.err)
			reqs := c.srv.Requests()
			require.Len(t, reqs, 1, "read, never written")
			assert.Equal(t, http.MethodGet, reqs[0].Method)
			assert.Equal(t, 3, storedSet(t, c, "pool").Spec.MinAvailable)
		})
	}
}

func TestSetScaleNotFound(t *testing.T) {
	c := newCLI(t)
	r := c.run("set", "scale", "ghost", "--min", "1")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Equal(t, "hf-cli: not_found: machineset \"ghost\" not found\n", r.err)
	assert.Empty(t, r.out)
}

// writeBeforePut is a transport that lets the cluster write once, just before
// the first PUT goes out: the object changes between the command's read and
// its write.
type writeBeforePut struct {
	once  sync.Once
	write func()
}

func (w *writeBeforePut) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		w.once.Do(w.write)
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestSetScaleConflictsWithAConcurrentWrite(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(newSet("pool", "small", 1, 5))
	c.transport = &writeBeforePut{write: func() {
		// This runs on the command's goroutine: no require here.
		o, _ := c.srv.Object(types.KindMachineSet, "pool")
		s := o.(*types.MachineSet)
		s.Status.Available = 1
		c.srv.Put(s)
	}}
	r := c.run("set", "scale", "pool", "--min", "3")
	assert.Equal(t, ExitConflict, r.code, r.err)
	assert.Contains(t, r.err, `hf-cli: conflict: machineset "pool" changed`)
	assert.Empty(t, r.out)
	got := storedSet(t, c, "pool")
	assert.Equal(t, 1, got.Spec.MinAvailable, "the scale was not applied over the other write")
	assert.Equal(t, 1, got.Status.Available, "the other write survives")
}

func TestScaleSpec(t *testing.T) {
	tests := []struct {
		name             string
		min, max         int
		setMin, setMax   bool
		wantMin, wantMax int
		wantErr          string
	}{
		{name: "min only", min: 4, setMin: true, wantMin: 4, wantMax: 5},
		{name: "max only", max: 9, setMax: true, wantMin: 2, wantMax: 9},
		{name: "both", min: 0, max: 1, setMin: true, setMax: true, wantMin: 0, wantMax: 1},
		{name: "unlimited max", min: 50, max: 0, setMin: true, setMax: true, wantMin: 50, wantMax: 0},
		{name: "min equals max", min: 5, setMin: true, wantMin: 5, wantMax: 5},
		{name: "min over kept max", min: 6, setMin: true, wantErr: "--min 6 exceeds the set's maxProvisioned 5"},
		{name: "max under kept min", max: 1, setMax: true, wantErr: "--max 1 is below the set's minAvailable 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := types.MachineSetSpec{MinAvailable: 2, MaxProvisioned: 5}
			err := scaleSpec(&spec, &scaleOptions{min: tt.min, max: tt.max, setMin: tt.setMin, setMax: tt.setMax})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, ExitUsage, ExitCode(err))
				assert.Equal(t, types.MachineSetSpec{MinAvailable: 2, MaxProvisioned: 5}, spec, "unchanged on error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantMin, spec.MinAvailable)
			assert.Equal(t, tt.wantMax, spec.MaxProvisioned)
		})
	}
}

package drivertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

// breakEnv names the defect the fake driver has in a child test process.
const breakEnv = "HF_DRIVERTEST_BREAK"

// host is what the fake driver keeps "on disk": one per data dir.
type host struct {
	mu   sync.Mutex
	held map[string]types.Resource
}

var (
	hostsMu sync.Mutex
	hosts   = map[string]*host{}
	nextID  atomic.Int64
)

func hostFor(dir string, fresh bool) *host {
	hostsMu.Lock()
	defer hostsMu.Unlock()
	h, ok := hosts[dir]
	if !ok || fresh {
		h = &host{held: map[string]types.Resource{}}
		hosts[dir] = h
	}
	return h
}

// fake is a minimal correct driver that can be given one defect (brk).
type fake struct {
	h   *host
	brk string
}

func (f *fake) Name() string                          { return "fake" }
func (f *fake) Prepare(context.Context, []byte) error { return nil }
func (f *fake) IsRemote() bool                        { return false }
func (f *fake) HostCapacity() types.Capacity {
	if f.brk == "negative-capacity" {
		return types.Capacity{Usable: types.Resources{CPU: -1}}
	}
	return types.Capacity{Total: types.Resources{CPU: 2, RAMGB: 4}, Usable: types.Resources{CPU: 2, RAMGB: 4}}
}

func (f *fake) ValidateTemplate(types.MachineTemplate) error {
	if f.brk == "bad-template" {
		return errors.New("template rejected")
	}
	return nil
}

func (f *fake) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	if f.brk != "ignore-cancel" {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	id := fmt.Sprintf("fake-%d", nextID.Add(1))
	if f.brk == "dup-ids" {
		id = "fake-same"
	}
	r := types.Resource{ID: id, Driver: "fake", Info: meta, Resources: t.Spec.Resources}
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	f.h.held[id] = r
	return &r, nil
}

func (f *fake) Status(_ context.Context, r *types.Resource) (types.MachinePhase, error) {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	if _, ok := f.h.held[r.ID]; !ok {
		return "", drivers.ErrNotFound
	}
	return types.MachineRunning, nil
}

func (f *fake) Deallocate(_ context.Context, r *types.Resource) error {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	if _, ok := f.h.held[r.ID]; !ok {
		if f.brk == "gone-errors" {
			return drivers.ErrNotFound
		}
		return nil
	}
	if f.brk != "leaky" {
		delete(f.h.held, r.ID)
	}
	return nil
}

func (f *fake) List(context.Context) ([]types.Resource, error) {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	out := make([]types.Resource, 0, len(f.h.held))
	for _, r := range f.h.held {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// TestFakeDriver runs the harness on the fake driver: correct in a normal run,
// with the defect named by breakEnv when TestHarnessCatchesDefects runs it in a
// child process.
func TestFakeDriver(t *testing.T) {
	brk := os.Getenv(breakEnv)
	meta := map[string]string{"claim": "c1"}
	var running, gone atomic.Int64
	drivertest.Conformance(t, drivertest.Harness{
		New: func(t *testing.T, dataDir string) drivers.Driver {
			return &fake{h: hostFor(dataDir, brk == "forgetful"), brk: brk}
		},
		Template: types.MachineTemplate{Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 1, RAMGB: 1}}},
		Meta:     meta,
		CheckRunning: func(t *testing.T, r types.Resource) {
			running.Add(1)
			assert.Equal(t, meta, r.Info)
		},
		CheckGone: func(t *testing.T, r types.Resource) {
			gone.Add(1)
			for dir, h := range snapshotHosts() {
				h.mu.Lock()
				_, held := h.held[r.ID]
				h.mu.Unlock()
				assert.False(t, held, "%s still held on %s", r.ID, dir)
			}
		},
		Concurrency: 6,
		Timeout:     300 * time.Millisecond,
	})
	if brk == "" {
		assert.EqualValues(t, 1, running.Load(), "CheckRunning runs in the lifecycle check")
		assert.EqualValues(t, 1+1+6, gone.Load(), "CheckGone runs after lifecycle, restart and every concurrent machine")
	}
}

func snapshotHosts() map[string]*host {
	hostsMu.Lock()
	defer hostsMu.Unlock()
	out := make(map[string]*host, len(hosts))
	for k, v := range hosts {
		out[k] = v
	}
	return out
}

// TestHarnessCatchesDefects proves each check bites: the fake driver with one
// defect must fail the harness in the named subtest.
func TestHarnessCatchesDefects(t *testing.T) {
	if os.Getenv(breakEnv) != "" {
		return // the child process runs TestFakeDriver only
	}
	for _, tc := range []struct{ brk, subtest string }{
		{"bad-template", "ValidateTemplate"},
		{"negative-capacity", "HostCapacity"},
		{"leaky", "Lifecycle"},
		{"gone-errors", "Lifecycle"},
		{"forgetful", "Restart"},
		{"dup-ids", "Concurrent"},
		{"ignore-cancel", "CancelledContext"},
	} {
		t.Run(tc.brk, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFakeDriver$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), breakEnv+"="+tc.brk)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the harness must fail a driver with defect %q; output:\n%s", tc.brk, out)
			assert.Contains(t, string(out), "--- FAIL: TestFakeDriver/"+tc.subtest+" ")
		})
	}
}

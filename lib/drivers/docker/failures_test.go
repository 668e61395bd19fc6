package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/drivers/fetch"
	"github.com/hf-fleet/hf/lib/types"
)

// TestAllocateFailures: each way an allocation can fail reports the reason
// (the engine's, the download's or the container's) and leaves nothing.
func TestAllocateFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := dockertest.BuildImage(t, "")
	srv := dockertest.NewFileServer(t, img.Path)
	wrongSum := "sha256:" + strings.Repeat("0", 64)
	entry := func(e map[string]any) string { b, _ := json.Marshal(e); return string(b) }
	local := map[string]string{"tag": f.image.Tag}

	for _, tc := range []struct {
		name  string
		entry map[string]any
		ram   float64  // GiB; 0.1 when 0
		is    error    // errors.Is target, if any
		want  []string // substrings of the error
	}{
		{"bad url", map[string]any{"image": map[string]string{"url": srv.URL + ".missing", "sum": img.Sum}},
			0, fetch.ErrStatus, []string{"404 Not Found"}},
		{"wrong sha256", map[string]any{"image": map[string]string{"url": srv.URL, "sum": wrongSum}},
			0, fetch.ErrMismatch, []string{"sha256 mismatch", img.Sum[len("sha256:"):]}},
		{"unknown local tag", map[string]any{"image": map[string]string{"tag": "hf-test/nope:" + f.ns}},
			0, ErrImageNotFound, []string{"No such image: hf-test/nope:" + f.ns, "never pulled"}},
		{"exits at once", map[string]any{"image": local, "command": []string{"false"}},
			0, ErrExited, []string{"exited at once with code 1"}},
		{"exits at once with a message", map[string]any{"image": local,
			"command": []string{"sh", "-c", "echo starting; echo config missing >&2; exit 3"}},
			0, ErrExited, []string{"code 3", "last log lines: ", "starting", "config missing"}}, // stdout and stderr in any order
		{"command not in the image", map[string]any{"image": local, "command": []string{"/no/such/binary"}},
			0, nil, []string{"start:", "/no/such/binary", "no such file or directory"}},
		{"too little memory for the engine", map[string]any{"image": local, "volumes": []string{"/data"}},
			0.001, nil, []string{"create container", "Minimum memory limit allowed is 6MB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := f.driver(t, "node-a", "docker", nil)
			res := types.Resources{CPU: 0.1, RAMGB: 0.1}
			if tc.ram != 0 {
				res.RAMGB = tc.ram
			}
			tmpl := template("bad", res, map[string]string{Type: entry(tc.entry)})
			require.NoError(t, d.ValidateTemplate(tmpl), "the template is valid; the allocation fails")
			start := time.Now()
			r, err := d.Allocate(t.Context(), tmpl, map[string]string{"HF_CLAIM": "c"})
			deallocateLater(t, d, r)
			require.Error(t, err)
			assert.Nil(t, r)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Less(t, time.Since(start), 20*time.Second)
			list, lerr := d.List(t.Context())
			require.NoError(t, lerr)
			assert.Empty(t, list)
			f.assertNothingLeft(t)
			t.Logf("reason: %v", err)
		})
	}
}

// TestExitedContainersReport: a container that stops after it was reported
// Running is Terminated (code 0) or Failed (other codes), still listed, and
// Deallocate removes it.
func TestExitedContainersReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		code int
		want types.MachinePhase
	}{
		{"clean exit", 0, types.MachineTerminated},
		{"crash", 7, types.MachineFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := f.driver(t, "node-"+strings.ReplaceAll(tc.name, " ", "-"), "docker", map[string]any{"start_grace": "0s"})
			cmd := []string{"sh", "-c", "echo about to end; sleep 1; exit " + string(rune('0'+tc.code))}
			r, err := d.Allocate(t.Context(), f.template("short", types.Resources{CPU: 0.1, RAMGB: 0.1},
				map[string]any{"command": cmd}), nil)
			require.NoError(t, err)
			deallocateLater(t, d, r)
			phase, err := d.Status(t.Context(), r)
			require.NoError(t, err)
			assert.Equal(t, types.MachineRunning, phase)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				phase, err := d.Status(t.Context(), r)
				require.NoError(c, err)
				assert.Equal(c, tc.want, phase)
			}, 20*time.Second, 50*time.Millisecond)
			assert.Equal(t, fmt.Sprintf("container exited with code %d; last log lines: about to end", tc.code), d.Explain(t.Context(), r),
				"the node's reason for the claim")
			var logs strings.Builder
			require.NoError(t, d.Logs(t.Context(), r, drivers.LogOptions{Tail: 5, Follow: true}, &logs), "follow ends with the container")
			assert.Equal(t, "about to end\n", logs.String())
			list, err := d.List(t.Context())
			require.NoError(t, err)
			require.Len(t, list, 1, "an exited container is still listed, for reconciliation")
			assert.Equal(t, r.ID, list[0].ID)
			require.NoError(t, d.Deallocate(t.Context(), r))
			_, err = d.Status(t.Context(), r)
			assert.ErrorIs(t, err, drivers.ErrNotFound)
		})
	}
}

// TestCancelledDuringStart: cancelling while the container starts removes it.
func TestCancelledDuringStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", map[string]any{"start_grace": "10s", "start_timeout": "30s"})
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	r, err := d.Allocate(ctx, f.template("slow", types.Resources{CPU: 0.1, RAMGB: 0.1}, nil), nil)
	deallocateLater(t, d, r)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	f.assertNothingLeft(t)
}

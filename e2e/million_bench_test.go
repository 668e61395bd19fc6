package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// BenchmarkManyObjects starts one hf-node on a store that already holds
// HF_BENCH_OBJECTS (default 1,000,000) small objects (MachineTemplates of
// the test driver, written into its data dir before it starts), and reports
// how long the node took to load them, its RSS once idle and the data dir's
// size on disk. HF_BENCH_MEMORY_LIMIT_MB and HF_BENCH_PPROF as for
// BenchmarkIdleNode.
//
//	go test -run x -bench ManyObjects -benchtime 1x -timeout 30m ./e2e/
func BenchmarkManyObjects(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("HF_BENCH_OBJECTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("HF_BENCH_OBJECTS=%q: want a positive count", s)
		}
		n = v
	}
	for b.Loop() {
		dir := b.TempDir()
		start := time.Now()
		fill(b, filepath.Join(dir, "store"), n)
		b.Logf("wrote %d objects into the store in %s", n, time.Since(start).Round(time.Second))

		cfg := "drivers:\n  - name: test\n" + benchConfig()
		cfgPath := filepath.Join(b.TempDir(), "hf.yml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		logs := &syncbuf.Buffer{}
		cmd := exec.Command(filepath.Join(bin, "hf-node"), "--data-dir", dir, "--api", "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--config", cfgPath)
		cmd.Stderr = logs
		start = time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stopped := false
		defer func() {
			if !stopped {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}()
		for !strings.Contains(logs.String(), "node started") {
			if time.Since(start) > 15*time.Minute {
				b.Fatalf("the node did not start in 15 minutes:\n%s", logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		loaded := time.Since(start)
		pid := cmd.Process.Pid
		atStart := rssMB(b, pid)
		time.Sleep(40 * time.Second) // quiet: the node returns what the load left free
		rss, peak := rssMB(b, pid), statusMB(b, pid, "VmHWM:")
		if prof := os.Getenv("HF_BENCH_PPROF"); prof != "" {
			b.Logf("pprof at http://%s/debug/pprof/ for 60 s", prof)
			time.Sleep(60 * time.Second)
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		stopped = true
		disk := dirMB(b, dir)
		b.ReportMetric(loaded.Seconds(), "start-s")
		b.ReportMetric(rss, "rss-MB")
		b.ReportMetric(peak, "peak-rss-MB")
		b.ReportMetric(disk, "disk-MB")
		b.ReportMetric(1e6*rss/float64(n), "rss-B/object")
		b.Logf("%d objects: started in %s, RSS %.0f MB at start, %.0f MB at most, %.0f MB idle (%.0f B per object), data dir %.0f MB",
			n, loaded.Round(100*time.Millisecond), atStart, peak, rss, 1e6*rss/float64(n), disk)
		if mb, err := strconv.Atoi(os.Getenv("HF_BENCH_MEMORY_LIMIT_MB")); err == nil {
			b.ReportMetric(peak/float64(mb), "peak/budget") // both MiB
			b.Logf("budget %d MiB: the peak is %.0f%% of it", mb, 100*peak/float64(mb))
		}
	}
}

// fill writes n small templates into a store at dir.
func fill(tb testing.TB, dir string, n int) {
	st, err := store.Open(store.Config{Dir: dir, NodeID: "loader", GCInterval: -1}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	tmpl := func(i int) *types.MachineTemplate {
		return &types.MachineTemplate{
			TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
			Metadata: types.ObjectMeta{Name: fmt.Sprintf("t-%07d", i)},
			Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 1, RAMGB: 1},
				ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)}},
		}
	}
	parallel(tb, n, func(i int) error {
		_, err := st.Put(tmpl(i), store.PutOptions{Create: true})
		return err
	})
}

// dirMB is the size of the files under dir in MB.
func dirMB(tb testing.TB, dir string) float64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return float64(total) / (1 << 20)
}

package e2e

import (
	"cmp"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// BenchmarkIdleNode loads one hf-node process with 10,000 templates and
// 10,000 bound claims with their machines (test driver), lets it settle, and
// reports the CPU it uses idle (percent of one core: the first 40 s, then
// the next 60 s) and its RSS.
// Run alone, it takes about three minutes:
//
//	go test -run x -bench IdleNode -benchtime 1x ./e2e/
//
// HF_BENCH_IDLE=10m makes the steady window that long and logs the RSS each
// minute of it. HF_BENCH_MEMORY_LIMIT_MB=N gives the node memory_limit_mb: N; with
// HF_BENCH_PPROF=host:port, HF_BENCH_HEAP=path saves its heap profile there.
// HF_BENCH_LOG=path saves the node's debug log there (when it cooled,
// trimmed, released its pages).
func BenchmarkIdleNode(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		cfg := fmt.Sprintf("drivers:\n  - name: test\n    config: {cpus: %d, ram_gb: %d}\n", 2*n, 2*n)
		cfg += benchConfig()
		prof := os.Getenv("HF_BENCH_PPROF")
		p := startWithConfigTB(b, cfg)
		c, err := client.New(p.API, p.Token, client.WithHTTPClient(p.httpClient()))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		parallel(b, n, func(i int) error {
			_, err := c.Create(ctx, &types.MachineTemplate{
				TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
				Metadata: types.ObjectMeta{Name: fmt.Sprintf("t-%05d", i)},
				Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 1, RAMGB: 1},
					ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)}},
			})
			return err
		})
		parallel(b, n, func(i int) error {
			_, err := c.Create(ctx, &types.MachineClaim{
				TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
				Metadata: types.ObjectMeta{Name: fmt.Sprintf("c-%05d", i)},
				Spec:     types.MachineClaimSpec{MachineTemplate: fmt.Sprintf("t-%05d", i)},
			})
			return err
		})
		for {
			objs, err := c.List(ctx, types.KindMachineClaim, nil)
			if err != nil {
				b.Fatal(err)
			}
			bound := 0
			for _, o := range objs {
				if o.(*types.MachineClaim).Status.Phase == types.ClaimBound {
					bound++
				}
			}
			if bound == n {
				break
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("%d of %d claims bound after 5 minutes", bound, n)
			}
			time.Sleep(time.Second)
		}
		b.Logf("loaded %d templates and %d bound claims in %s (the node's cache fell behind its store's watch %d times)",
			n, n, time.Since(start).Round(time.Second), strings.Count(p.out.String(), "cache watch fell behind"))
		time.Sleep(10 * time.Second) // let the last writes and compactions settle
		pid := p.cmd.Process.Pid
		// Two windows: the first 40 s (the store merging what the load
		// wrote, the node handing its free heap back once: its trimmer does
		// that after two quiet ticks of 10 s, so 20-30 s after the load's
		// last list), then the next 60 s, the steady state.
		early := cpuPercent(b, pid, 40*time.Second)
		rssEarly := rssMB(b, pid)
		window := 60 * time.Second
		if d, err := time.ParseDuration(os.Getenv("HF_BENCH_IDLE")); err == nil && d > window {
			window = d
		}
		steady := cpuPercent(b, pid, window)
		rss := rssMB(b, pid)
		anon, file := statusMB(b, pid, "RssAnon:"), statusMB(b, pid, "RssFile:")
		b.ReportMetric(early, "idle-cpu-%-first-40s")
		b.ReportMetric(steady, "idle-cpu-%")
		b.ReportMetric(rss, "rss-MB")
		b.Logf("idle: %.2f%% of a core over the first 40 s, %.2f%% over the next %s, RSS %.1f MB (anonymous %.1f, file-backed %.1f, by mapping below; %.1f MB after the first window)",
			early, steady, window, rss, anon, file, rssEarly)
		b.Logf("resident by mapping: %s (hf-node built with CGO_ENABLED=%s; make build's release binaries are static: CGO_ENABLED=0 go test ... builds the same)",
			residentByMapping(b, pid), cgoSetting(b, p.cmd.Path))
		b.Logf("Go runtime: %s", goMemory(b, p))
		if out := os.Getenv("HF_BENCH_HEAP"); out != "" && prof != "" {
			saveHeapProfile(b, prof, out)
		}
		if prof != "" {
			b.Logf("pprof at http://%s/debug/pprof/ for 60 s", prof)
			time.Sleep(60 * time.Second)
		}
		p.stop()
		if path := os.Getenv("HF_BENCH_LOG"); path != "" {
			if err := os.WriteFile(path, []byte(p.out.String()), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// cgoSetting is the CGO_ENABLED setting bin was built with ("?" when its
// build information does not say).
func cgoSetting(tb testing.TB, bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			return s.Value
		}
	}
	return "?"
}

// benchConfig is the node config the benchmarks' environment asks for:
// HF_BENCH_MEMORY_LIMIT_MB=N sets memory_limit_mb, HF_BENCH_PPROF=host:port
// serves pprof there, for a look at the node, and HF_BENCH_LOG (set) has it
// log at debug (BenchmarkIdleNode saves the log there).
func benchConfig() string {
	var cfg string
	if os.Getenv("HF_BENCH_LOG") != "" {
		cfg += "log:\n  level: debug\n"
	}
	if mb := os.Getenv("HF_BENCH_MEMORY_LIMIT_MB"); mb != "" {
		cfg += "memory_limit_mb: " + mb + "\n"
	}
	if prof := os.Getenv("HF_BENCH_PPROF"); prof != "" {
		cfg += fmt.Sprintf("debug:\n  pprof_address: %q\n", prof)
	}
	return cfg
}

// cpuPercent is the CPU a process uses over d, in percent of one core. It
// logs the process's anonymous RSS every minute of d.
func cpuPercent(tb testing.TB, pid int, d time.Duration) float64 {
	cpu0, t0 := cpuTicks(tb, pid), time.Now()
	for at := time.Minute; d > time.Minute && at < d; at += time.Minute {
		time.Sleep(time.Until(t0.Add(at)))
		tb.Logf("after %s of the steady window: anonymous RSS %.1f MB", at, statusMB(tb, pid, "RssAnon:"))
	}
	time.Sleep(time.Until(t0.Add(d)))
	used := float64(cpuTicks(tb, pid)-cpu0) / 100 // clock ticks of 10 ms
	return 100 * used / time.Since(t0).Seconds()
}

// goMemory is what the node's Go runtime says of its memory (its /metrics),
// in MB: the live heap, the heap's spans in use (live objects and the free
// room between them), what it gave back to the OS, the goroutine stacks.
func goMemory(tb testing.TB, p *proc) string {
	resp, err := p.httpClient().Get(p.API + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	figures := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, v, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "go_memstats_") {
			figures[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	mb := func(name string) float64 { return figures["go_memstats_"+name+"_bytes"] / (1 << 20) }
	return fmt.Sprintf("heap objects %.1f MB in %.1f MB of spans, %.1f MB returned to the OS, stacks %.1f MB, runtime metadata %.1f MB (the collector's %.1f, span structures %.1f, other %.1f)",
		mb("heap_alloc"), mb("heap_inuse"), mb("heap_released"), mb("stack_inuse"), mb("gc_sys")+mb("mspan_sys")+mb("other_sys"),
		mb("gc_sys"), mb("mspan_sys"), mb("other_sys"))
}

// saveHeapProfile writes the node's heap profile (after a collection) from
// its pprof address to path, for go tool pprof.
func saveHeapProfile(tb testing.TB, addr, path string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("heap profile: %v (HTTP %d)", err, resp.StatusCode)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("heap profile in %s (%d bytes)", path, len(body))
}

// startWithConfigTB is startWithConfig for a benchmark.
func startWithConfigTB(tb testing.TB, cfg string) *proc {
	tb.Helper()
	path := tb.TempDir() + "/hf.yml"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	return startNode(tb, "", "--config", path)
}

// parallel runs fn for 0..n-1 on 16 goroutines and fails on the first error.
func parallel(tb testing.TB, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		tb.Fatal(first)
	}
}

// cpuTicks is a process's user plus system time in clock ticks.
func cpuTicks(tb testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The command name may hold spaces: the fields start after its ')'.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// rssMB is a process's resident set in MB.
func rssMB(tb testing.TB, pid int) float64 { return statusMB(tb, pid, "VmRSS:") }

// residentByMapping sums /proc/<pid>/smaps' Rss by what is mapped (the
// binary, the data dir's files, anonymous), largest first, in MB.
func residentByMapping(tb testing.TB, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		tb.Fatal(err)
	}
	sums := map[string]float64{}
	name := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			name = "[anonymous]"
			if len(f) >= 6 {
				name = f[5]
				// Badger's files grouped by kind; anything else by path.
				if ext := filepath.Ext(name); ext == ".vlog" || ext == ".sst" || ext == ".mem" {
					name = "*" + ext
				}
			}
		case len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.ParseFloat(f[1], 64)
			sums[name] += kb / 1024
		}
	}
	type kv struct {
		k string
		v float64
	}
	var all []kv
	for k, v := range sums {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Compare(b.v, a.v) })
	var out []string
	for _, e := range all {
		if e.v >= 0.5 {
			out = append(out, fmt.Sprintf("%s %.1f", e.k, e.v))
		}
	}
	return strings.Join(out, ", ")
}

// statusMB reads a kB field of /proc/<pid>/status (VmRSS:, VmHWM:) in MB.
func statusMB(tb testing.TB, pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

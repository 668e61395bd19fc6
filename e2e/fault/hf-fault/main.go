// Command hf-fault is the long form of the fault harness (package
// e2e/fault): it runs each scenario -runs times, each on a fresh lab of
// -hosts hf-node processes in network namespaces, with -claims claims
// arriving at -rate per second, and prints every run's figures and a
// summary. It exits 1 when an invariant did not hold. Needs root.
//
//	go run ./e2e/fault/hf-fault -runs 10 -claims 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hf-fleet/hf/e2e/fault"
)

func main() {
	runs := flag.Int("runs", 10, "runs of each scenario")
	claims := flag.Int("claims", 1000, "claims per run")
	rate := flag.Float64("rate", 50, "claims created per second")
	hosts := flag.Int("hosts", 3, "hf-node processes per lab")
	grace := flag.Duration("lost-grace", 10*time.Second, "the hosts' scheduler.lost_grace")
	scenarios := flag.String("scenarios", "kill,partition-5s,partition-60s,loss", "comma-separated: kill, partition-<duration>, loss")
	bin := flag.String("bin", "", "hf-node binary (default: built from this module)")
	dir := flag.String("dir", "", "where the labs' data dirs and logs go (default: a temporary dir, removed unless a run fails)")
	flag.Parse()
	if err := run(*runs, *claims, *rate, *hosts, *grace, *scenarios, *bin, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "hf-fault:", err)
		os.Exit(1)
	}
}

func parse(list string) ([]fault.Scenario, error) {
	var out []fault.Scenario
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "kill":
			out = append(out, fault.Kill(3*time.Second))
		case name == "loss":
			out = append(out, fault.Loss(0.05))
		case strings.HasPrefix(name, "partition-"):
			d, err := time.ParseDuration(strings.TrimPrefix(name, "partition-"))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("scenario %q: want partition-<duration>, e.g. partition-5s", name)
			}
			out = append(out, fault.Partition(d))
		default:
			return nil, fmt.Errorf("scenario %q: want kill, partition-<duration> or loss", name)
		}
	}
	return out, nil
}

func run(runs, claims int, rate float64, hosts int, grace time.Duration, list, bin, dir string) error {
	scs, err := parse(list)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	keep := dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "hf-fault-"); err != nil {
			return err
		}
	}
	if bin == "" {
		if bin, err = fault.Build(dir); err != nil {
			return err
		}
	}
	results := map[string][]fault.Result{}
	failed := false
	for i := range runs {
		for _, sc := range scs {
			labDir := filepath.Join(dir, fmt.Sprintf("%s-%02d", sc.Name, i+1))
			if err := os.MkdirAll(labDir, 0o700); err != nil {
				return err
			}
			l, err := fault.New(ctx, fault.Options{Hosts: hosts, Bin: bin, Dir: labDir, LostGrace: grace,
				Logf: func(f string, a ...any) { fmt.Printf("    "+f+"\n", a...) }})
			if err != nil {
				return err
			}
			res, err := fault.Execute(ctx, l, sc, claims, rate)
			l.Close()
			if err != nil {
				return fmt.Errorf("%s run %d: %w (logs in %s)", sc.Name, i+1, err, labDir)
			}
			fmt.Printf("run %2d  %s\n", i+1, res)
			if len(res.Violations) > 0 {
				failed, keep = true, true
				fmt.Printf("        logs in %s\n", labDir)
			} else if !keep {
				_ = os.RemoveAll(labDir)
			}
			results[sc.Name] = append(results[sc.Name], res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	fmt.Println()
	fmt.Printf("%-16s %5s %7s %6s %8s %8s %10s %s\n", "SCENARIO", "RUNS", "CLAIMS", "FAILED", "REPLACED", "VIOLATED", "SETTLE-MAX", "SETTLE-MEDIAN")
	for _, sc := range scs {
		rs := results[sc.Name]
		var total, failedClaims, replaced, violated int
		var settles []time.Duration
		for _, r := range rs {
			total += r.Claims
			failedClaims += r.Failed
			replaced += r.Replaced
			if len(r.Violations) > 0 {
				violated++
			}
			settles = append(settles, r.Settle)
		}
		slices.Sort(settles)
		fmt.Printf("%-16s %5d %7d %6d %8d %8d %10s %s\n", sc.Name, len(rs), total, failedClaims, replaced, violated,
			settles[len(settles)-1].Round(time.Millisecond), settles[len(settles)/2].Round(time.Millisecond))
	}
	if !keep {
		_ = os.RemoveAll(dir)
	}
	if failed {
		return fmt.Errorf("invariants did not hold (logs in %s)", dir)
	}
	return nil
}

package cmd

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// LabelBench marks the claims of one `bench claims` run.
const LabelBench = "hf/bench"

// benchOptions are the options of `bench claims`.
type benchOptions struct {
	f           *Factory
	template    string
	count       int
	concurrency int
	waitTimeout time.Duration
	keep        bool
}

// benchResult is what `bench claims` prints; also its JSON shape.
type benchResult struct {
	Run      string `json:"run"`
	Template string `json:"template"`
	Claims   int    `json:"claims"`
	Bound    int    `json:"bound"`
	Failed   int    `json:"failed"`
	// Seconds is the wall time from the first create to the last claim
	// settling (Bound or Failed).
	Seconds float64 `json:"seconds"`
	// PerSecond is Bound claims per second of Seconds.
	PerSecond float64 `json:"perSecond"`
	// Latency is Requested -> Bound from the claims' own phase times, in
	// milliseconds: what the cluster took, without this client's round trips.
	Latency benchLatency `json:"latencyMs"`
	// Reasons counts the reasons of Failed claims.
	Reasons map[string]int `json:"failedReasons,omitempty"`
}

type benchLatency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// newBenchCmd builds the `bench` group.
func newBenchCmd(f *Factory) *cobra.Command {
	c := groupCmd(&cobra.Command{Use: "bench", Short: "Measure a running cluster"})
	c.AddCommand(newBenchClaimsCmd(f))
	return c
}

func newBenchClaimsCmd(f *Factory) *cobra.Command {
	opts := &benchOptions{f: f}
	c := &cobra.Command{
		Use:   "claims --template T [--count N] [--concurrency C]",
		Short: "Create claims, wait until they are bound, print latency and claims/s, delete them",
		Long: "Creates --count claims for --template through the API, --concurrency at a time,\n" +
			"waits until every one is Bound or Failed, and prints claims/s and the\n" +
			"Requested -> Bound latency percentiles from the claims' phase times. The claims\n" +
			"carry the label " + LabelBench + "=<run> and are deleted at the end unless --keep.",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.template == "" {
				return usageErrorf("--template is required")
			}
			if opts.count < 1 || opts.concurrency < 1 {
				return usageErrorf("--count and --concurrency must be at least 1")
			}
			return runBench(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.template, "template", "", "machine template of the claims (required)")
	fl.IntVar(&opts.count, "count", 100, "claims to create")
	fl.IntVar(&opts.concurrency, "concurrency", 10, "creates in flight at once")
	fl.DurationVar(&opts.waitTimeout, "wait-timeout", 5*time.Minute, "give up waiting for the claims after this long (exit 6)")
	fl.BoolVar(&opts.keep, "keep", false, "keep the claims (and their machines) instead of deleting them")
	return c
}

func runBench(ctx context.Context, opts *benchOptions) error {
	f := opts.f
	c, err := f.Client()
	if err != nil {
		return err
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(f.Rand, b); err != nil {
		return fmt.Errorf("bench run id: %w", err)
	}
	run := "bench-" + hex.EncodeToString(b)
	names := make([]string, opts.count)
	for i := range names {
		names[i] = run + "-" + strconv.Itoa(i)
	}
	fmt.Fprintf(f.Err, "creating %d claims for template %s (run %s)\n", opts.count, opts.template, run)
	start := time.Now()
	if err := benchEach(ctx, names, opts.concurrency, func(ctx context.Context, name string) error {
		cl := &types.MachineClaim{
			TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{LabelBench: run}},
			Spec:     types.MachineClaimSpec{MachineTemplate: opts.template},
		}
		rctx, cancel := f.requestContext(ctx)
		defer cancel()
		_, err := c.Create(rctx, cl)
		return err
	}); err != nil {
		benchCleanup(ctx, f, c, run, opts.keep)
		return err
	}
	claims, err := benchWait(ctx, f, c, run, opts)
	elapsed := time.Since(start)
	if err == nil {
		err = f.printBench(benchSummary(run, opts.template, claims, elapsed))
	}
	benchCleanup(ctx, f, c, run, opts.keep)
	return err
}

// benchWait waits until every claim of the run is Bound or Failed.
func benchWait(ctx context.Context, f *Factory, c *client.Client, run string, opts *benchOptions) ([]*types.MachineClaim, error) {
	wctx, cancel := context.WithTimeout(ctx, opts.waitTimeout)
	defer cancel()
	var (
		claims   []*types.MachineClaim
		settled  int
		last     time.Time
		reported time.Time
	)
	err := waitLoop(wctx, c, []string{types.KindMachineClaim},
		func(ev client.WatchEvent) bool { return ev.Kind == types.KindMachineClaim },
		func(ctx context.Context) (bool, error) {
			// Every claim event wakes the wait: list at most every
			// benchRecheck, so the measuring does not load the node much.
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(benchRecheck - time.Since(last)):
			}
			last = time.Now()
			rctx, cancel := f.requestContext(ctx)
			defer cancel()
			objs, err := c.List(rctx, types.KindMachineClaim, map[string]string{LabelBench: run})
			if err != nil {
				if retryable(err) {
					return false, nil
				}
				return false, err
			}
			claims, settled = claims[:0], 0
			for _, o := range objs {
				cl := o.(*types.MachineClaim)
				claims = append(claims, cl)
				if cl.Status.Phase == types.ClaimBound || cl.Status.Phase == types.ClaimFailed {
					settled++
				}
			}
			if settled < opts.count && time.Since(reported) >= benchProgress {
				reported = time.Now()
				fmt.Fprintf(f.Err, "%d of %d claims settled\n", settled, opts.count)
			}
			return settled == opts.count, nil
		})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w after %s: %d of %d claims settled", errTimeout, opts.waitTimeout, settled, opts.count)
	}
	return claims, err
}

const (
	// benchRecheck is the least time between two looks at the run's claims.
	benchRecheck = 200 * time.Millisecond
	// benchProgress is the least time between two progress lines.
	benchProgress = 2 * time.Second
)

// benchSummary computes the result from the settled claims.
func benchSummary(run, template string, claims []*types.MachineClaim, elapsed time.Duration) benchResult {
	r := benchResult{Run: run, Template: template, Claims: len(claims), Seconds: elapsed.Seconds()}
	var lat []float64
	for _, cl := range claims {
		switch cl.Status.Phase {
		case types.ClaimBound:
			r.Bound++
			req, bound := cl.Status.PhaseTimes[string(types.ClaimRequested)], cl.Status.PhaseTimes[string(types.ClaimBound)]
			if req.IsZero() {
				req = cl.Metadata.CreatedAt
			}
			if !bound.IsZero() && !req.IsZero() {
				lat = append(lat, float64(bound.Sub(req).Microseconds())/1000)
			}
		case types.ClaimFailed:
			r.Failed++
			if r.Reasons == nil {
				r.Reasons = map[string]int{}
			}
			r.Reasons[cl.Status.Reason]++
		}
	}
	if elapsed > 0 {
		r.PerSecond = float64(r.Bound) / elapsed.Seconds()
	}
	slices.Sort(lat)
	r.Latency = benchLatency{P50: percentile(lat, 0.50), P90: percentile(lat, 0.90), P99: percentile(lat, 0.99)}
	if len(lat) > 0 {
		r.Latency.Max = lat[len(lat)-1]
	}
	return r
}

// percentile is the nearest-rank percentile of sorted values (0 when empty).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (f *Factory) printBench(r benchResult) error {
	p := f.printer()
	if p.structured() {
		return p.encode(r)
	}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	if err := p.table([]string{"CLAIMS", "BOUND", "FAILED", "SECONDS", "CLAIMS/S", "P50-MS", "P90-MS", "P99-MS", "MAX-MS"}, [][]string{{
		strconv.Itoa(r.Claims), strconv.Itoa(r.Bound), strconv.Itoa(r.Failed), strconv.FormatFloat(r.Seconds, 'f', 2, 64),
		strconv.FormatFloat(r.PerSecond, 'f', 1, 64), ms(r.Latency.P50), ms(r.Latency.P90), ms(r.Latency.P99), ms(r.Latency.Max),
	}}); err != nil {
		return err
	}
	for reason, n := range r.Reasons {
		fmt.Fprintf(f.Err, "failed (%d): %s\n", n, reason)
	}
	return nil
}

// benchCleanup deletes the run's claims unless keep; failures are reported,
// not returned, so the measurement is not lost.
func benchCleanup(ctx context.Context, f *Factory, c *client.Client, run string, keep bool) {
	if keep {
		fmt.Fprintf(f.Err, "kept the claims labelled %s=%s\n", LabelBench, run)
		return
	}
	rctx, cancel := f.requestContext(ctx)
	objs, err := c.List(rctx, types.KindMachineClaim, map[string]string{LabelBench: run})
	cancel()
	if err != nil {
		fmt.Fprintf(f.Err, "listing the claims to delete: %v (delete those labelled %s=%s)\n", err, LabelBench, run)
		return
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.Meta().Name)
	}
	err = benchEach(ctx, names, 10, func(ctx context.Context, name string) error {
		rctx, cancel := f.requestContext(ctx)
		defer cancel()
		if err := c.Delete(rctx, types.KindMachineClaim, name); err != nil && !client.IsNotFound(err) {
			return err
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(f.Err, "deleting the claims: %v (delete those labelled %s=%s)\n", err, LabelBench, run)
		return
	}
	fmt.Fprintf(f.Err, "deleted %d claims\n", len(names))
}

// benchEach runs fn for every name, at most n at a time, and returns the
// first error (the others still finish).
func benchEach(ctx context.Context, names []string, n int, fn func(context.Context, string) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, n)
	for _, name := range names {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, name); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%w (%d of %d failed)", errs[0], len(errs), len(names))
	}
	return nil
}

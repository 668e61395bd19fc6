package cmd

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/stats"
	"github.com/hf-fleet/hf/lib/types"
)

// LabelBench marks the claims of one `bench claims` run. It is outside the
// keys the system reserves ("hf/..."), so a user's token may bench too.
const LabelBench = "hf-bench"

// benchOptions are the options of `bench claims`.
type benchOptions struct {
	f           *Factory
	template    string
	count       int
	concurrency int
	waitTimeout time.Duration
	keep        bool
	// endpoints, when set, take the creates round-robin (the nodes of a
	// cluster, as its clients would spread over them).
	endpoints []string
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
		Long: "Creates --count claims for --template through the API, keeping --concurrency of\n" +
			"them in flight (a claim is in flight from its create until it is Bound or\n" +
			"Failed), and prints claims/s and the Requested -> Bound latency percentiles from\n" +
			"the claims' phase times. --concurrency 1 measures latency without load. The\n" +
			"connections are opened before the clock starts, as long-lived clients hold theirs.\n" +
			"The claims carry the label " + LabelBench + "=<run> and are deleted at the end unless\n" +
			"--keep.\n" +
			"With --endpoints the creates go to several nodes in turn, as a cluster's\n" +
			"clients would; the progress is followed through --endpoint.",
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
	fl.IntVar(&opts.concurrency, "concurrency", 10, "claims in flight (created, not yet settled) at once")
	waitTimeoutFlag(fl, &opts.waitTimeout, 5*time.Minute, "give up waiting for the claims after this long (exit 6)")
	fl.BoolVar(&opts.keep, "keep", false, "keep the claims (and their machines) instead of deleting them")
	fl.StringSliceVar(&opts.endpoints, "endpoints", nil, "API endpoints to spread the creates over, round-robin (default: --endpoint only)")
	return c
}

// benchRoomWait is how long benchFits waits for the nodes' reports to
// show capacity in use being given back (a run just before this one
// deleted its claims): a node reports every 10 s.
var benchRoomWait = 15 * time.Second

// benchFits fails, with the reason, when the cluster could not hold count
// machines of the template now: the run keeps every claim until its end, so
// the claims past that room would only wait for their bind timeout (and the
// run for its own). It fails at once unless capacity is in use, which may be
// on its way back (the machines of a run that just ended): then it reads the
// nodes again for up to benchRoomWait.
func benchFits(ctx context.Context, f *Factory, c *client.Client, template string, count int) error {
	rctx, cancel := f.requestContext(ctx)
	defer cancel()
	o, err := c.Get(rctx, types.KindMachineTemplate, template)
	if err != nil {
		return withNameSuggestion(rctx, c, types.KindMachineTemplate, template, err)
	}
	t := o.(*types.MachineTemplate)
	deadline := time.Now().Add(benchRoomWait)
	said := false
	for {
		room, inUse, seen, err := benchRoom(rctx, c, t)
		if err != nil {
			return err
		}
		if room >= int64(count) {
			return nil
		}
		if inUse && time.Now().Before(deadline) {
			if !said {
				fmt.Fprintf(f.Err, "hf-cli: room for %d of %d machines now, some capacity in use: waiting up to %s for the nodes to report it given back\n", room, count, benchRoomWait)
				said = true
			}
			select {
			case <-rctx.Done():
				return rctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		if room == 0 {
			return fmt.Errorf("%w: no node has room for one machine of template %s (%s CPU, %s GiB RAM) now: %s",
				errClaimFailed, template, num(t.Spec.Resources.CPU), num(t.Spec.Resources.RAMGB), strings.Join(seen, "; "))
		}
		return fmt.Errorf("%w: the cluster has room for %d machines of template %s (%s CPU, %s GiB RAM) now, and the run holds all %d of its claims until it ends: lower --count or add capacity (%s)",
			errClaimFailed, room, template, num(t.Spec.Resources.CPU), num(t.Spec.Resources.RAMGB), count, strings.Join(seen, "; "))
	}
}

// benchRoom is how many machines of t the nodes' reports have room for,
// whether capacity is in use on a driver t could use, and what each node
// said.
func benchRoom(ctx context.Context, c *client.Client, t *types.MachineTemplate) (room int64, inUse bool, seen []string, err error) {
	nodes, err := c.List(ctx, types.KindNode, nil)
	if err != nil {
		return 0, false, nil, err
	}
	for _, n := range nodes {
		node := n.(*types.Node)
		if node.Status.Phase != types.NodeUp || node.Spec.Maintenance {
			seen = append(seen, fmt.Sprintf("%s is %s", node.Metadata.Name, cmp.Or(map[bool]string{true: "draining"}[node.Spec.Maintenance], string(node.Status.Phase))))
			continue
		}
		for _, d := range node.Spec.Drivers {
			if _, ok := t.Spec.ProviderConfiguration[d.Name]; !ok {
				if _, ok := t.Spec.ProviderConfiguration[d.Driver]; !ok {
					continue
				}
			}
			room = min(room+scheduler.Fit(d.Capacity, t.Spec.Resources, t.Spec.AllowOverbook), scheduler.Unlimited)
			inUse = inUse || d.Capacity.Used.Add(d.Capacity.Reserved) != (types.Resources{})
			seen = append(seen, fmt.Sprintf("%s/%s has %s CPU, %s GiB free", node.Metadata.Name, d.Name, num(d.Capacity.Free.CPU), num(d.Capacity.Free.RAMGB)))
		}
	}
	if len(seen) == 0 {
		seen = append(seen, "no node runs a driver the template configures")
	}
	return room, inUse, seen, nil
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
	if err := benchFits(ctx, f, c, opts.template, opts.count); err != nil {
		return err
	}
	creators := []*client.Client{c}
	if len(opts.endpoints) > 0 {
		creators = creators[:0]
		for _, ep := range opts.endpoints {
			cc, err := f.clientFor(ep)
			if err != nil {
				return err
			}
			creators = append(creators, cc)
		}
	}
	// Open the connections the run will use before the clock starts, as a
	// cluster's long-lived clients hold theirs: the figures are of claims,
	// not of TLS handshakes (64 of them cost a 100-claim run half its time).
	benchWarm(ctx, f, creators, warmPerEndpoint(opts.concurrency, opts.count, len(creators)))
	var next atomic.Int64
	names := make([]string, opts.count)
	for i := range names {
		names[i] = run + "-" + strconv.Itoa(i)
	}
	fmt.Fprintf(f.Err, "%d claims for template %s, %d in flight at a time through %d endpoint(s) (run %s)\n",
		opts.count, opts.template, opts.concurrency, len(creators), run)
	wctx, cancel := context.WithTimeout(ctx, opts.waitTimeout)
	defer cancel()
	tr := watchSettled(wctx, c, run)
	var settled atomic.Int64
	start := time.Now()
	err = benchEach(wctx, names, opts.concurrency, func(ctx context.Context, name string) error {
		ch := tr.wait(name)
		cl := &types.MachineClaim{
			TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{LabelBench: run}},
			Spec:     types.MachineClaimSpec{MachineTemplate: opts.template},
		}
		rctx, rcancel := f.requestContext(ctx)
		err := creators[int(next.Add(1)-1)%len(creators)].Submit(rctx, cl)
		rcancel()
		if err != nil {
			return err
		}
		if err := benchSettle(ctx, f, c, tr, name, ch); err != nil {
			return err
		}
		settled.Add(1)
		return nil
	})
	elapsed := time.Since(start)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w after %s: %d of %d claims settled", errTimeout, opts.waitTimeout, settled.Load(), opts.count)
	}
	if err == nil {
		var claims []*types.MachineClaim
		if claims, err = benchClaims(ctx, f, c, run); err == nil {
			err = f.printBench(benchSummary(run, opts.template, claims, elapsed))
		}
	}
	benchCleanup(ctx, f, c, run, opts.keep)
	return err
}

// warmPerEndpoint is how many connections each of k endpoints needs for
// a run of count claims, concurrency in flight, spread over them in turn: no
// more than the claims in flight there, nor than the client keeps idle (a
// --concurrency of 99999 opened 99999 connections).
func warmPerEndpoint(concurrency, count, k int) int {
	inFlight := min(concurrency, count)
	return min((inFlight+k-1)/k, keptPerHost)
}

// benchWarm opens up to n connections to each endpoint, with n health
// checks at once; the client's transport keeps them for the run. A failure
// only means the run opens that connection itself.
func benchWarm(ctx context.Context, f *Factory, creators []*client.Client, n int) {
	var wg sync.WaitGroup
	for _, c := range creators {
		for range n {
			wg.Go(func() {
				rctx, cancel := f.requestContext(ctx)
				defer cancel()
				_ = c.Health(rctx)
			})
		}
	}
	wg.Wait()
}

// settleTracker learns from a watch stream which claims of a run settled
// (Bound or Failed) and wakes whoever waits for one.
type settleTracker struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
	settled map[string]bool
	// live is closed when the stream ends (or never started): waits poll then.
	live chan struct{}
}

// watchSettled starts tracking the run's claims; without a watch stream the
// waits poll.
func watchSettled(ctx context.Context, c *client.Client, run string) *settleTracker {
	tr := &settleTracker{waiting: map[string]chan struct{}{}, settled: map[string]bool{}, live: make(chan struct{})}
	// The server sends only this run's claims once they left Requested:
	// one event a claim, not one for each of its changes and for every
	// other claim of the cluster.
	events, err := c.WatchWith(ctx, client.WatchOptions{
		Kinds:         []string{types.KindMachineClaim},
		LabelSelector: LabelBench + "=" + run,
		FieldSelector: "status.phase!=" + string(types.ClaimRequested),
	})
	if err != nil {
		close(tr.live)
		return tr
	}
	go func() {
		defer close(tr.live)
		for ev := range events {
			if ev.Type == client.EventError {
				return
			}
			if cl, ok := ev.Object.(*types.MachineClaim); ok && cl.Metadata.Labels[LabelBench] == run && settledPhase(cl) {
				tr.settle(cl.Metadata.Name)
			}
		}
	}()
	return tr
}

func settledPhase(cl *types.MachineClaim) bool {
	return cl.Status.Phase == types.ClaimBound || cl.Status.Phase == types.ClaimFailed
}

// wait returns the channel closed when name settles.
func (t *settleTracker) wait(name string) chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.waiting[name]
	if !ok {
		ch = make(chan struct{})
		t.waiting[name] = ch
		if t.settled[name] {
			close(ch)
		}
	}
	return ch
}

func (t *settleTracker) settle(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.settled[name] {
		return
	}
	t.settled[name] = true
	if ch, ok := t.waiting[name]; ok {
		close(ch)
	}
}

// benchSettle waits until claim name settles: told by the watch, or seen by
// a look of its own every benchRecheck while the stream is up (an event may
// go missing) and every benchPoll when there is none.
func benchSettle(ctx context.Context, f *Factory, c *client.Client, tr *settleTracker, name string, ch chan struct{}) error {
	for {
		every := benchRecheck
		select {
		case <-tr.live:
			every = benchPoll
		default:
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		rctx, cancel := f.requestContext(ctx)
		o, err := c.Get(rctx, types.KindMachineClaim, name)
		cancel()
		switch {
		case err == nil && settledPhase(o.(*types.MachineClaim)):
			tr.settle(name)
			return nil
		case err != nil && !retryable(err):
			return err
		}
	}
}

// benchClaims lists the run's claims.
func benchClaims(ctx context.Context, f *Factory, c *client.Client, run string) ([]*types.MachineClaim, error) {
	rctx, cancel := f.requestContext(ctx)
	defer cancel()
	objs, err := c.List(rctx, types.KindMachineClaim, map[string]string{LabelBench: run})
	if err != nil {
		return nil, err
	}
	return types.Cast[*types.MachineClaim](objs), nil
}

const (
	// benchRecheck is how long a claim waits for the watch to tell it
	// settled before it looks itself.
	benchRecheck = 2 * time.Second
	// benchPoll is how often a claim is looked at without a watch stream.
	benchPoll = 100 * time.Millisecond
)

// benchSummary computes the result from the settled claims.
func benchSummary(run, template string, claims []*types.MachineClaim, elapsed time.Duration) benchResult {
	r := benchResult{Run: run, Template: template, Claims: len(claims), Seconds: elapsed.Seconds()}
	var lat []float64
	for _, cl := range claims {
		switch cl.Status.Phase {
		case types.ClaimBound:
			r.Bound++
			req, bound := cl.Status.PhaseTimes.At(string(types.ClaimRequested)), cl.Status.PhaseTimes.At(string(types.ClaimBound))
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
	r.Latency = benchLatency{P50: stats.Percentile(lat, 50), P90: stats.Percentile(lat, 90),
		P99: stats.Percentile(lat, 99), Max: stats.Percentile(lat, 100)}
	return r
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

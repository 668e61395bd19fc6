package fault

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/types"
)

// Template is the machine template every claim of a run asks for.
const Template = "fault"

// LabelRun marks the claims of one run.
const LabelRun = "hf-fault/run"

// Scenario is a fault and when it happens: Inject runs once a third of the
// claims are accepted and returns when the fault is over (healed,
// restarted); Loss is packet loss for the whole load.
type Scenario struct {
	Name   string
	Inject func(ctx context.Context, l *Lab, r *Run) error
	Loss   float64
}

// Kill is kill -9 of one host and its restart after down.
func Kill(down time.Duration) Scenario {
	return Scenario{Name: "kill", Inject: func(ctx context.Context, l *Lab, r *Run) error {
		h := l.Hosts[len(l.Hosts)-1]
		h.Kill()
		r.logf("killed %s", h.Name)
		sleep(ctx, down)
		if err := h.Start(ctx); err != nil {
			return err
		}
		r.logf("restarted %s", h.Name)
		return nil
	}}
}

// Partition cuts one host from the others, both ways, for d. The claims the
// others have bound when it starts must keep their machines.
func Partition(d time.Duration) Scenario {
	return Scenario{Name: "partition-" + d.String(), Inject: func(ctx context.Context, l *Lab, r *Run) error {
		h := l.Hosts[len(l.Hosts)-1]
		if err := r.snapshotMajority(ctx, l.Hosts[0], h.Name); err != nil {
			return err
		}
		if err := l.Partition(ctx, h); err != nil {
			return err
		}
		r.logf("cut %s off (%d claims bound on the other side)", h.Name, len(r.before))
		sleep(ctx, d)
		if err := l.Heal(ctx); err != nil {
			return err
		}
		r.logf("healed")
		return nil
	}}
}

// Loss is packet loss p between the hosts during the load.
func Loss(p float64) Scenario {
	return Scenario{Name: fmt.Sprintf("loss-%g%%", p*100), Loss: p}
}

// Result is what a run found.
type Result struct {
	Scenario string
	Claims   int
	// Bound and Failed count the claims at the end; Replaced those whose
	// machine changed after they were first seen bound (polled every half
	// second); Rebound those bound at a round after the first (a machine
	// replaced, or an offer unanswered or given back); Retries the creates
	// sent again to another host.
	Bound, Failed, Replaced, Rebound, Retries int
	// FailReasons counts the reasons of the failed claims.
	FailReasons map[string]int
	// Replacements shows a few of the replaced machines.
	Replacements []string
	// Load is how long the creates took; Settle how long after the fault
	// (or the load, for loss) the invariants held.
	Load, Settle time.Duration
	// Violations are the invariants that did not hold (empty: the run
	// passed).
	Violations []string
}

func (r Result) String() string {
	s := fmt.Sprintf("%-16s claims %d: bound %d, failed %d, machines replaced %d, bound past round 1 %d, create retries %d; load %s, settled %s after the fault",
		r.Scenario, r.Claims, r.Bound, r.Failed, r.Replaced, r.Rebound, r.Retries, r.Load.Round(time.Millisecond), r.Settle.Round(time.Millisecond))
	if len(r.FailReasons) > 0 {
		s += fmt.Sprintf("; failures: %v", r.FailReasons)
	}
	if len(r.Replacements) > 0 {
		s += fmt.Sprintf("; replaced: %s", strings.Join(r.Replacements, ", "))
	}
	if len(r.Violations) > 0 {
		s += fmt.Sprintf("; %d VIOLATIONS: %s", len(r.Violations), strings.Join(first(r.Violations, 10), "; "))
	}
	return s
}

// Run is one run's state.
type Run struct {
	id     string
	lab    *Lab
	before map[string]string // claim -> machine, bound on the majority side when a partition began
	logf   func(string, ...any)
}

// Execute runs scenario sc on l (a fresh lab per run keeps runs apart):
// claims claims created at rate per second, the fault once a third are in,
// and checks the invariants once the cluster settles.
func Execute(ctx context.Context, l *Lab, sc Scenario, claims int, rate float64) (Result, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	r := &Run{id: hex.EncodeToString(b), lab: l, logf: l.opts.Logf}
	res := Result{Scenario: sc.Name, Claims: claims}
	if err := createTemplate(ctx, l.Hosts[0]); err != nil {
		return res, err
	}
	if sc.Loss > 0 {
		if err := l.Loss(ctx, sc.Loss); err != nil {
			return res, err
		}
	}
	third := make(chan struct{})
	var faultErr error
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		select {
		case <-third:
		case <-ctx.Done():
			return
		}
		if sc.Inject != nil {
			faultErr = sc.Inject(ctx, l, r)
		}
	}()
	obsCtx, stopObserving := context.WithCancel(ctx)
	seen := r.observe(obsCtx, l.Hosts[0])
	defer stopObserving()
	start := time.Now()
	names, retries, err := r.load(ctx, claims, rate, third)
	res.Load, res.Retries = time.Since(start), retries
	<-faultDone
	if err != nil {
		return res, err
	}
	if faultErr != nil {
		return res, fmt.Errorf("fault: %w", faultErr)
	}
	if sc.Loss > 0 {
		if err := l.Loss(ctx, 0); err != nil {
			return res, err
		}
	}
	faultOver := time.Now()
	if err := l.WaitMembers(ctx, 2*time.Minute); err != nil {
		res.Violations = append(res.Violations, err.Error())
		return res, nil
	}
	// Settle: the invariants hold on every host's view, or the wait runs out
	// (a claim waits at most its bind timeout, then fails).
	deadline := faultOver.Add(l.opts.BindTimeout + 2*l.opts.LostGrace + time.Minute)
	var st state
	for {
		st, err = r.check(ctx, names)
		if err != nil {
			return res, err
		}
		if len(st.problems) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.Settle = time.Since(faultOver)
	stopObserving()
	for claim, first := range <-seen {
		if final := st.machineOf[claim]; final != first.machine {
			res.Replaced++
			if len(res.Replacements) < 5 {
				res.Replacements = append(res.Replacements, fmt.Sprintf("%s: %s on %s (round %d) -> %s", claim, first.machine, first.node, first.round, final))
			}
		}
	}
	res.Violations = st.problems
	res.Bound, res.Failed, res.Rebound, res.FailReasons = st.bound, st.failed, st.rebound, st.reasons
	for claim, machine := range r.before {
		if got := st.machineOf[claim]; got != machine {
			res.Violations = append(res.Violations, fmt.Sprintf("claim %s was bound to %s on the majority side before the partition, now to %q", claim, machine, got))
		}
	}
	return res, nil
}

// binding is where a claim was seen bound.
type binding struct {
	machine, node string
	round         uint64
}

// observe polls h's claims of the run every half second until ctx ends and
// then sends the first machine each claim was seen bound to.
func (r *Run) observe(ctx context.Context, h *Host) <-chan map[string]binding {
	out := make(chan map[string]binding, 1)
	go func() {
		first := map[string]binding{}
		for ctx.Err() == nil {
			if v, err := h.view(ctx, r.id); err == nil {
				for name, c := range v.claims {
					if _, ok := first[name]; !ok && c.Status.Phase == types.ClaimBound {
						first[name] = binding{c.Status.Machine, c.Status.Node, c.Status.Round}
					}
				}
			}
			sleep(ctx, 500*time.Millisecond)
		}
		out <- first
	}()
	return out
}

// load creates n claims over the hosts' APIs at rate per second (16 in
// flight at most), round-robin; a
// create that cannot reach its host, or gets a 5xx, goes to the next host
// (its name is fixed, so a create that did land the first time is a 409).
// third is closed once a third are accepted.
func (r *Run) load(ctx context.Context, n int, rate float64, third chan struct{}) ([]string, int, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%s-%04d", r.id, i)
	}
	var next, accepted, retries atomic.Int64
	var once sync.Once
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if rate > 0 {
					sleep(ctx, time.Until(start.Add(time.Duration(float64(i)/rate*float64(time.Second)))))
				}
				tries, err := r.create(ctx, names[i], i)
				retries.Add(int64(tries))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				if accepted.Add(1) >= int64(n/3) {
					once.Do(func() { close(third) })
				}
			}
		})
	}
	wg.Wait()
	once.Do(func() { close(third) })
	return names, int(retries.Load()), firstErr
}

// create posts one claim, moving on to the next host while its host cannot
// take it, for up to a minute. It returns how many times it moved on.
func (r *Run) create(ctx context.Context, name string, i int) (int, error) {
	c := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{LabelRun: r.id}},
		Spec:     types.MachineClaimSpec{MachineTemplate: Template},
	}
	hosts := r.lab.Hosts
	deadline := time.Now().Add(time.Minute)
	for try := 0; ; try++ {
		h := hosts[(i+try)%len(hosts)]
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := h.client().Create(cctx, c)
		cancel()
		var ae *client.APIError
		switch {
		case err == nil:
			return try, nil
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			return try, nil // an earlier try landed
		case errors.As(err, &ae) && ae.Status < 500:
			return try, fmt.Errorf("create %s on %s: %w", name, h.Name, err)
		case time.Now().After(deadline) || ctx.Err() != nil:
			return try, fmt.Errorf("create %s: no host took it in a minute: %w", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snapshotMajority records the claims bound outside the host to be cut off,
// as host h sees them.
func (r *Run) snapshotMajority(ctx context.Context, h *Host, minority string) error {
	v, err := h.view(ctx, r.id)
	if err != nil {
		return err
	}
	r.before = map[string]string{}
	for name, c := range v.claims {
		if c.Status.Phase == types.ClaimBound && c.Status.Node != minority {
			r.before[name] = c.Status.Machine
		}
	}
	return nil
}

// state is what one check found.
type state struct {
	problems               []string
	bound, failed, rebound int
	reasons                map[string]int
	machineOf              map[string]string
}

// check reads every host's view and holdings and lists what does not hold
// (yet): every claim Bound on exactly one live machine or Failed with a
// reason, on every host alike; no live machine without the Bound claim
// that names it; no driver resource without its machine record.
func (r *Run) check(ctx context.Context, names []string) (state, error) {
	st := state{reasons: map[string]int{}, machineOf: map[string]string{}}
	var views []*view
	for _, h := range r.lab.Hosts {
		if !h.Up() {
			st.problems = append(st.problems, h.Name+" is down")
			continue
		}
		v, err := h.view(ctx, r.id)
		if err != nil {
			st.problems = append(st.problems, fmt.Sprintf("%s: %v", h.Name, err))
			return st, nil
		}
		views = append(views, v)
	}
	if len(views) == 0 {
		return st, nil
	}
	v := views[0]
	for _, o := range views[1:] {
		for _, name := range names {
			a, b := v.claims[name], o.claims[name]
			if (a == nil) != (b == nil) || (a != nil && (a.Status.Phase != b.Status.Phase || a.Status.Machine != b.Status.Machine)) {
				st.problems = append(st.problems, fmt.Sprintf("claim %s: %s and %s disagree (%s vs %s)", name, v.host, o.host, describe(a), describe(b)))
			}
		}
	}
	live := map[string][]string{} // claim -> its live machines
	for _, m := range v.machines {
		if m.Live() && m.Spec.Claim != "" {
			live[m.Spec.Claim] = append(live[m.Spec.Claim], m.Metadata.Name)
		}
	}
	for _, name := range names {
		c := v.claims[name]
		switch {
		case c == nil:
			st.problems = append(st.problems, fmt.Sprintf("claim %s was accepted and is missing", name))
		case c.Status.Phase == types.ClaimBound:
			st.bound++
			st.machineOf[name] = c.Status.Machine
			if c.Status.Round > 1 {
				st.rebound++
			}
			m := v.machines[c.Status.Machine]
			switch {
			case m == nil:
				st.problems = append(st.problems, fmt.Sprintf("claim %s is bound to %s, which has no record", name, c.Status.Machine))
			case m.Spec.Claim != name || m.Status.Phase != types.MachineRunning:
				st.problems = append(st.problems, fmt.Sprintf("claim %s is bound to %s, which is %s for %q", name, m.Metadata.Name, m.Status.Phase, m.Spec.Claim))
			case m.Status.Resource == nil || !r.holds(m.Spec.Node, m.Status.Resource.ID):
				st.problems = append(st.problems, fmt.Sprintf("claim %s is bound to %s, whose driver on %s does not hold it", name, m.Metadata.Name, m.Spec.Node))
			}
			if ms := live[name]; len(ms) != 1 {
				st.problems = append(st.problems, fmt.Sprintf("claim %s has %d live machines: %v", name, len(ms), ms))
			}
		case c.Status.Phase == types.ClaimFailed:
			st.failed++
			if c.Status.Reason == "" {
				st.problems = append(st.problems, fmt.Sprintf("claim %s failed without a reason", name))
			}
			st.reasons[shorten(c.Status.Reason)]++
		default:
			st.problems = append(st.problems, fmt.Sprintf("claim %s is %s: %s", name, c.Status.Phase, c.Status.Reason))
		}
	}
	for _, m := range v.machines {
		if !m.Live() || !strings.HasPrefix(m.Spec.Claim, "f"+r.id+"-") {
			continue
		}
		if c := v.claims[m.Spec.Claim]; c == nil || c.Status.Phase != types.ClaimBound || c.Status.Machine != m.Metadata.Name {
			st.problems = append(st.problems, fmt.Sprintf("machine %s on %s is %s without the bound claim %s naming it (%s)",
				m.Metadata.Name, m.Spec.Node, m.Status.Phase, m.Spec.Claim, describe(c)))
		}
	}
	// Every host's view of the machines agrees (live ones, by phase).
	for _, o := range views[1:] {
		for name, m := range v.machines {
			if om := o.machines[name]; m.Live() && (om == nil || om.Status.Phase != m.Status.Phase) {
				st.problems = append(st.problems, fmt.Sprintf("machine %s: %s has it %s, %s %s", name, v.host, m.Status.Phase, o.host, phaseOf(om)))
			}
		}
		for name, om := range o.machines {
			if om.Live() && v.machines[name] == nil {
				st.problems = append(st.problems, fmt.Sprintf("machine %s: %s has it %s, %s has no record", name, o.host, om.Status.Phase, v.host))
			}
		}
	}
	// Every resource a host's driver holds has its machine record, in that
	// host's own view.
	for _, h := range r.lab.Hosts {
		own := views[0]
		for _, o := range views {
			if o.host == h.Name {
				own = o
			}
		}
		recorded := map[string]string{}
		for _, m := range own.machines {
			if m.Status.Resource != nil && m.Spec.Node == h.Name {
				recorded[m.Status.Resource.ID] = m.Metadata.Name
			}
		}
		held, err := testdriver.Holdings(h.DriverDir())
		if err != nil {
			st.problems = append(st.problems, fmt.Sprintf("%s: %v", h.Name, err))
			continue
		}
		for id := range held {
			if recorded[id] == "" {
				st.problems = append(st.problems, fmt.Sprintf("%s's driver holds %s, which no machine record of %s names", h.Name, id, own.host))
			}
		}
	}
	sort.Strings(st.problems)
	return st, nil
}

// holds reports whether node's test driver holds resource id.
func (r *Run) holds(node, id string) bool {
	for _, h := range r.lab.Hosts {
		if h.Name == node {
			held, err := testdriver.Holdings(h.DriverDir())
			if err != nil {
				return false
			}
			_, ok := held[id]
			return ok
		}
	}
	return false
}

// view is what one host's API shows.
type view struct {
	host     string
	claims   map[string]*types.MachineClaim
	machines map[string]*types.Machine
}

func (h *Host) view(ctx context.Context, run string) (*view, error) {
	v := &view{host: h.Name, claims: map[string]*types.MachineClaim{}, machines: map[string]*types.Machine{}}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := h.client().List(cctx, types.KindMachineClaim, map[string]string{LabelRun: run})
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	for _, o := range cs {
		c := o.(*types.MachineClaim)
		v.claims[c.Metadata.Name] = c
	}
	ms, err := h.client().List(cctx, types.KindMachine, nil)
	if err != nil {
		return nil, fmt.Errorf("list machines: %w", err)
	}
	for _, o := range ms {
		m := o.(*types.Machine)
		v.machines[m.Metadata.Name] = m
	}
	return v, nil
}

func (h *Host) nodes(ctx context.Context) (map[string]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	objs, err := h.client().List(cctx, types.KindNode, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range objs {
		n := o.(*types.Node)
		out[n.Metadata.Name] = string(n.Status.Phase)
	}
	return out, nil
}

func (h *Host) client() *client.Client {
	c, _ := client.New(h.API, AdminToken, client.WithHTTPClient(h.lab.http))
	return c
}

func createTemplate(ctx context.Context, h *Host) error {
	t := &types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: Template},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: 1, RAMGB: 1},
			ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)},
		},
	}
	_, err := h.client().Create(ctx, t)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return nil
	}
	return err
}

func phaseOf(m *types.Machine) string {
	if m == nil {
		return "has no record"
	}
	return "has it " + string(m.Status.Phase)
}

func describe(c *types.MachineClaim) string {
	if c == nil {
		return "missing"
	}
	return fmt.Sprintf("%s on %q round %d: %s", c.Status.Phase, c.Status.Machine, c.Status.Round, c.Status.Reason)
}

// shorten keeps a failure reason's kind, not its names.
func shorten(reason string) string {
	if len(reason) > 80 {
		reason = reason[:80] + "..."
	}
	return reason
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

package scaletest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/internal/metricstest"
	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/stats"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Config is the member config of the fleets. Failure detection is relaxed:
// hundreds of members in one process on a shared 2-core box miss LAN-profile
// probes and flap, which is not what is measured. Anti-entropy runs every
// 2 s, so its rounds are counted while the writes go on.
func Config() member.Config {
	cfg := membertest.FastConfig()
	cfg.AntiEntropyInterval = 2 * time.Second
	cfg.RejoinInterval = 5 * time.Second
	cfg.GossipInterval = 200 * time.Millisecond
	cfg.ProbeInterval = 2 * time.Second
	cfg.ProbeTimeout = time.Second
	cfg.SuspicionMult = 8
	return cfg
}

// Options describe one measurement.
type Options struct {
	// Nodes is the fleet size.
	Nodes int
	// Writes is how many writes the writer makes, one after the other, each
	// waited for on every member (default 100).
	Writes int
	// Payload is the size of each object's user field (default 400 B).
	Payload int
	// Config is the members' config (default Config()).
	Config member.Config
	// Settle bounds the wait for the fleet to form (default 3 min).
	Settle time.Duration
	// Within bounds the wait for one write to reach every member (default
	// 30 s).
	Within time.Duration
}

func (o Options) withDefaults() Options {
	if o.Writes <= 0 {
		o.Writes = 100
	}
	if o.Payload <= 0 {
		o.Payload = 400
	}
	if o.Config.Profile == "" {
		o.Config = Config()
	}
	if o.Settle <= 0 {
		o.Settle = 3 * time.Minute
	}
	if o.Within <= 0 {
		o.Within = 30 * time.Second
	}
	return o
}

// Result is what Writes measured.
type Result struct {
	Nodes, Writes int
	// Reached counts the writes that reached every member within Within.
	Reached int
	// Write-to-all latencies of the writes that reached every member.
	P50, P99, Max time.Duration
	// Push messages and bytes per write: sent by the writer, the most any
	// one member sent, and the mean over the members.
	WriterMsgs, WriterBytes float64
	MaxMsgs, MaxBytes       float64
	MeanMsgs, MeanBytes     float64
	// Anti-entropy during the writes: rounds started (all members) and the
	// bytes both sides sent per round.
	AERounds        float64
	AEBytesPerRound float64
	// Anti-entropy once in sync, over a few intervals after the writes.
	IdleAERounds        float64
	IdleAEBytesPerRound float64
}

// String is the result as one log line.
func (r Result) String() string {
	return fmt.Sprintf("nodes=%d writes=%d reached=%d p50=%.1fms p99=%.1fms max=%.1fms "+
		"writer: %.1f msgs %.0f B/write; max node: %.1f msgs %.0f B/write; mean node: %.2f msgs %.0f B/write; "+
		"ae: %.0f rounds %.0f B/round; in sync: %.0f rounds %.0f B/round",
		r.Nodes, r.Writes, r.Reached, ms(r.P50), ms(r.P99), ms(r.Max),
		r.WriterMsgs, r.WriterBytes, r.MaxMsgs, r.MaxBytes, r.MeanMsgs, r.MeanBytes,
		r.AERounds, r.AEBytesPerRound, r.IdleAERounds, r.IdleAEBytesPerRound)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// counters are one member's send counters at one moment.
type counters struct {
	pushMsgs, pushBytes, aeBytes, aeRounds float64
}

func read(tb testing.TB, m *member.Member) counters {
	v := metricstest.Values(tb, m.Collector())
	return counters{
		pushMsgs:  v["hf_cluster_messages_sent_total,class=push"],
		pushBytes: v["hf_cluster_message_bytes_sent_total,class=push"],
		aeBytes:   v["hf_cluster_message_bytes_sent_total,class=anti_entropy"],
		aeRounds: v["hf_anti_entropy_rounds_total,result=in_sync"] +
			v["hf_anti_entropy_rounds_total,result=repaired"] +
			v["hf_anti_entropy_rounds_total,result=failed"],
	}
}

func readAll(tb testing.TB, nodes []*membertest.Node) []counters {
	out := make([]counters, len(nodes))
	for i, n := range nodes {
		out[i] = read(tb, n.Member)
	}
	return out
}

// object is a small object to replicate.
func object(name, user string) *types.MachineClaim {
	return &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: "ubuntu", User: user},
	}
}

// Start starts a fleet of opts.Nodes members with in-memory stores; it
// stops with tb.
func Start(tb testing.TB, opts Options) *membertest.Cluster {
	tb.Helper()
	opts = opts.withDefaults()
	return membertest.Start(tb, opts.Nodes, membertest.Options{Config: opts.Config, InMemory: true, Settle: opts.Settle})
}

// Writes starts a fleet and measures opts.Writes writes on its first member.
func Writes(tb testing.TB, opts Options) Result {
	tb.Helper()
	opts = opts.withDefaults()
	c := Start(tb, opts)
	return Measure(tb, c, opts)
}

// Measure makes opts.Writes writes on c's first member, one after the
// other, and waits for each until every running member's store holds it.
func Measure(tb testing.TB, c *membertest.Cluster, opts Options) Result {
	tb.Helper()
	opts = opts.withDefaults()
	nodes := c.Running()
	res := Result{Nodes: len(nodes), Writes: opts.Writes}

	// Every member but the writer reports each record it stores.
	arrived := make(chan string, 4*len(nodes))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range nodes[1:] {
		events := n.Store.Watch(ctx, n.Store.Seq())
		go func() {
			for ev := range events {
				if ev.Type == store.EventPut {
					select {
					case arrived <- ev.Record.Name:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}

	src := nodes[0].Store
	payload := strings.Repeat("x", opts.Payload)
	lat := make([]time.Duration, 0, opts.Writes)
	before := readAll(tb, nodes)
	for i := range opts.Writes {
		name := fmt.Sprintf("scale-%d", i)
		start := time.Now()
		_, err := src.Put(object(name, payload), store.PutOptions{})
		require.NoError(tb, err)
		deadline := time.NewTimer(opts.Within)
		got := 0
	wait:
		for got < len(nodes)-1 {
			select {
			case a := <-arrived:
				if a == name {
					got++
				}
			case <-deadline.C:
				tb.Logf("%s reached %d of %d peers within %s", name, got, len(nodes)-1, opts.Within)
				break wait
			}
		}
		deadline.Stop()
		if got == len(nodes)-1 {
			res.Reached++
			lat = append(lat, time.Since(start))
		}
	}
	after := readAll(tb, nodes)
	res.P50, res.P99 = stats.Percentile(lat, 50), stats.Percentile(lat, 99)
	res.Max = stats.Percentile(lat, 100)
	w := float64(opts.Writes)
	var aeBytes float64
	for i := range nodes {
		msgs := (after[i].pushMsgs - before[i].pushMsgs) / w
		bytes := (after[i].pushBytes - before[i].pushBytes) / w
		if i == 0 {
			res.WriterMsgs, res.WriterBytes = msgs, bytes
		}
		res.MaxMsgs, res.MaxBytes = max(res.MaxMsgs, msgs), max(res.MaxBytes, bytes)
		res.MeanMsgs += msgs / float64(len(nodes))
		res.MeanBytes += bytes / float64(len(nodes))
		res.AERounds += after[i].aeRounds - before[i].aeRounds
		aeBytes += after[i].aeBytes - before[i].aeBytes
	}
	if res.AERounds > 0 {
		res.AEBytesPerRound = aeBytes / res.AERounds
	}

	// In sync: what the periodic rounds cost when there is nothing to repair.
	c.WaitConverged(opts.Within)
	before = readAll(tb, nodes)
	time.Sleep(3 * opts.Config.AntiEntropyInterval) // a measuring window, not a wait for a condition
	after = readAll(tb, nodes)
	aeBytes = 0
	for i := range nodes {
		res.IdleAERounds += after[i].aeRounds - before[i].aeRounds
		aeBytes += after[i].aeBytes - before[i].aeBytes
	}
	if res.IdleAERounds > 0 {
		res.IdleAEBytesPerRound = aeBytes / res.IdleAERounds
	}
	return res
}

// CatchUpResult is what CatchUp measured.
type CatchUpResult struct {
	Objects int
	// Took is from the new member's start until its store holds every
	// object; Converged tells whether its digest then equals the holder's.
	Took      time.Duration
	Converged bool
	// Bytes is what anti-entropy sent, on both sides, meanwhile.
	Bytes float64
}

// String is the result as one log line.
func (r CatchUpResult) String() string {
	return fmt.Sprintf("objects=%d took=%.0fms converged=%v ae=%.1fMB (%.0f records/s)",
		r.Objects, ms(r.Took), r.Converged, r.Bytes/1e6, float64(r.Objects)/r.Took.Seconds())
}

// CatchUp starts one member holding objects objects, then a new, empty one,
// and measures how long the new one takes to hold them all.
func CatchUp(tb testing.TB, objects int, opts Options) CatchUpResult {
	tb.Helper()
	opts = opts.withDefaults()
	opts.Nodes = 1
	c := Start(tb, opts)
	holder := c.Nodes[0]
	payload := strings.Repeat("x", opts.Payload)
	for i := range objects {
		_, err := holder.Store.Put(object(fmt.Sprintf("obj-%06d", i), payload), store.PutOptions{})
		require.NoError(tb, err)
	}
	want, err := member.ComputeDigest(holder.Store)
	require.NoError(tb, err)
	before := read(tb, holder.Member)
	start := time.Now()
	n := c.Add()
	require.Eventually(tb, func() bool { return n.Store.Seq() >= uint64(objects) }, 5*time.Minute, time.Millisecond)
	res := CatchUpResult{Objects: objects, Took: time.Since(start)}
	got, err := member.ComputeDigest(n.Store)
	require.NoError(tb, err)
	res.Converged = got == want
	res.Bytes = read(tb, holder.Member).aeBytes - before.aeBytes + read(tb, n.Member).aeBytes
	return res
}

// RepairResult is what OneRecordRepair measured.
type RepairResult struct {
	Objects int
	// InSyncBytesPerRound is what anti-entropy sent (both members) per
	// round while the two held the same records, before the difference.
	InSyncBytesPerRound float64
	InSyncRounds        float64
	// Took is from the difference until the second member holds the record.
	Took time.Duration
	// Bytes and Rounds are what anti-entropy sent (both members) and the
	// rounds they started meanwhile, in-sync ones included.
	Bytes  float64
	Rounds float64
}

// String is the result as one log line.
func (r RepairResult) String() string {
	return fmt.Sprintf("objects=%d in sync: %.0f B/round (%.0f rounds); repair: took=%.0fms ae=%.0f B in %.0f rounds",
		r.Objects, r.InSyncBytesPerRound, r.InSyncRounds, ms(r.Took), r.Bytes, r.Rounds)
}

// OneRecordRepair starts two members holding the same objects objects,
// measures what their periodic anti-entropy rounds send while in sync (over
// at least three rounds), then gives the first one record the second lacks
// (applied as if received from a third member, so it is neither pushed nor
// relayed) and measures what anti-entropy sends until the second holds it.
func OneRecordRepair(tb testing.TB, objects int, opts Options) RepairResult {
	tb.Helper()
	opts = opts.withDefaults()
	opts.Nodes = 2
	c := Start(tb, opts)
	payload := strings.Repeat("x", opts.Payload)
	for i := range objects {
		_, err := c.Nodes[i%2].Store.Put(object(fmt.Sprintf("obj-%06d", i), payload), store.PutOptions{})
		require.NoError(tb, err)
	}
	c.WaitConverged(5 * time.Minute)

	res := RepairResult{Objects: objects}
	idle := readAll(tb, c.Nodes)
	rounds := func(cs []counters) (n float64) {
		for _, x := range cs {
			n += x.aeRounds
		}
		return n
	}
	require.Eventually(tb, func() bool { return rounds(readAll(tb, c.Nodes))-rounds(idle) >= 3 },
		time.Minute, 10*time.Millisecond, "no anti-entropy rounds")
	synced := readAll(tb, c.Nodes)
	res.InSyncRounds = rounds(synced) - rounds(idle)
	for i := range synced {
		res.InSyncBytesPerRound += (synced[i].aeBytes - idle[i].aeBytes) / res.InSyncRounds
	}

	// Real differences come at any moment between two rounds: one that
	// comes less than the in-flight grace (1 s) before a round costs that
	// round's descent too, without a repair.
	time.Sleep(rand.N(opts.Config.AntiEntropyInterval)) // a random phase, not a wait for a condition

	ghost, err := store.Open(store.Config{InMemory: true, NodeID: "ghost", GCInterval: -1}, nil)
	require.NoError(tb, err)
	defer func() { _ = ghost.Close() }()
	rec, err := ghost.Put(object("the-difference", payload), store.PutOptions{})
	require.NoError(tb, err)

	before := readAll(tb, c.Nodes)
	start := time.Now()
	ok, err := c.Nodes[0].Store.Apply(rec)
	require.NoError(tb, err)
	require.True(tb, ok)
	require.Eventually(tb, func() bool {
		_, err := c.Nodes[1].Store.Get(rec.Kind, rec.Name)
		return err == nil
	}, time.Minute, time.Millisecond)
	res.Took = time.Since(start)
	after := readAll(tb, c.Nodes)
	for i := range after {
		res.Bytes += after[i].aeBytes - before[i].aeBytes
		res.Rounds += after[i].aeRounds - before[i].aeRounds
	}
	return res
}

// DeadResult is what DeadMember measured.
type DeadResult struct {
	Nodes int
	// Writes made right after the kill, and how many reached every live
	// member within Within; their write-to-all-live latencies.
	Writes, Reached int
	P50, P99        time.Duration
	// Detect is from the kill until every live member has declared the
	// victim dead.
	Detect time.Duration
}

// String is the result as one log line.
func (r DeadResult) String() string {
	return fmt.Sprintf("nodes=%d writes=%d reached=%d p50=%.1fms p99=%.1fms detect=%.1fs",
		r.Nodes, r.Writes, r.Reached, ms(r.P50), ms(r.P99), r.Detect.Seconds())
}

// DeadMember starts a fleet, kills the writer's first child in its
// dissemination tree (so the writes must go around it), makes opts.Writes
// writes at once and measures how long each takes to reach every live
// member, then how long the fleet takes to declare the victim dead. On
// loopback a dial to the dead member is refused at once; across hosts it
// would time out, which this does not measure.
func DeadMember(tb testing.TB, opts Options) DeadResult {
	tb.Helper()
	opts = opts.withDefaults()
	c := Start(tb, opts)
	names := c.RunningNames()
	slices.Sort(names)
	writer := c.Nodes[0]
	victim := c.Index(names[1]) // n0 sorts first: names[1] is its first child
	c.Kill(victim)
	killed := time.Now()
	victimName := c.Nodes[victim].Name

	live := c.Running()
	res := DeadResult{Nodes: opts.Nodes, Writes: opts.Writes}
	payload := strings.Repeat("x", opts.Payload)
	var lat []time.Duration
	for i := range opts.Writes {
		name := fmt.Sprintf("dead-%d", i)
		start := time.Now()
		_, err := writer.Store.Put(object(name, payload), store.PutOptions{})
		require.NoError(tb, err)
		reached := pollUntil(opts.Within, func() bool {
			for _, n := range live {
				if _, err := n.Store.Get(types.KindMachineClaim, name); err != nil {
					return false
				}
			}
			return true
		})
		if reached {
			res.Reached++
			lat = append(lat, time.Since(start))
		}
	}
	res.P50, res.P99 = stats.Percentile(lat, 50), stats.Percentile(lat, 99)
	require.Eventually(tb, func() bool {
		for _, n := range live {
			if slices.Contains(n.Member.Members(), victimName) {
				return false
			}
		}
		return true
	}, 5*time.Minute, 10*time.Millisecond, "%s never declared dead", victimName)
	res.Detect = time.Since(killed)
	return res
}

// pollUntil polls cond every millisecond until it holds (true) or
// within has passed (false).
func pollUntil(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// TombstoneResult is what Tombstones measured.
type TombstoneResult struct {
	Nodes, Deletes int
	// Spread is from the last delete until every member holds every
	// tombstone; Half and All until the members hold half of them, and
	// none, in all.
	Spread, Half, All time.Duration
	// Held samples the tombstones held by all members together, once a
	// second from the last delete.
	Held []int
	// Bytes is what anti-entropy sent, all members summed, from the last
	// delete until none was held.
	Bytes float64
}

// String is the result as one log line.
func (r TombstoneResult) String() string {
	return fmt.Sprintf("nodes=%d deletes=%d spread=%.1fs half=%.1fs all=%.1fs ae=%.1fMB held/s=%v",
		r.Nodes, r.Deletes, r.Spread.Seconds(), r.Half.Seconds(), r.All.Seconds(), r.Bytes/1e6, r.Held)
}

// Tombstones writes deletes objects spread over the members, deletes them
// all, and measures how long the members hold their tombstones: they are
// collected as soon as rounds have shown every member holds them
// (TombstoneMinAge 1 ns here; the stores' TTL is 24 h and their GC loop
// off, so any collection is the early one).
func Tombstones(tb testing.TB, deletes int, opts Options) TombstoneResult {
	tb.Helper()
	opts = opts.withDefaults()
	opts.Config.TombstoneMinAge = time.Nanosecond
	c := Start(tb, opts)
	payload := strings.Repeat("x", opts.Payload)
	for i := range deletes {
		_, err := c.Nodes[i%len(c.Nodes)].Store.Put(object(fmt.Sprintf("obj-%06d", i), payload), store.PutOptions{})
		require.NoError(tb, err)
	}
	c.WaitConverged(5 * time.Minute)
	for i := range deletes {
		_, err := c.Nodes[i%len(c.Nodes)].Store.Delete(types.KindMachineClaim, fmt.Sprintf("obj-%06d", i), types.Version{})
		require.NoError(tb, err)
	}
	start := time.Now()
	before := readAll(tb, c.Nodes)
	held := func() (total int, everywhere bool) {
		everywhere = true
		for _, n := range c.Nodes {
			k := 0
			require.NoError(tb, n.Store.Scan(func(r store.Record) error {
				if r.Deleted {
					k++
				}
				return nil
			}))
			total += k
			everywhere = everywhere && k == deletes
		}
		return total, everywhere
	}
	res := TombstoneResult{Nodes: len(c.Nodes), Deletes: deletes}
	next := start
	for time.Since(start) < 10*time.Minute {
		total, everywhere := held()
		if everywhere && res.Spread == 0 {
			res.Spread = time.Since(start)
		}
		if res.Half == 0 && total <= deletes*len(c.Nodes)/2 {
			res.Half = time.Since(start)
		}
		if time.Now().After(next) {
			res.Held = append(res.Held, total)
			next = next.Add(time.Second)
		}
		if total == 0 {
			res.All = time.Since(start)
			res.Held = append(res.Held, 0)
			break
		}
		time.Sleep(50 * time.Millisecond) // a sampling period, not a wait for a condition
	}
	after := readAll(tb, c.Nodes)
	for i := range after {
		res.Bytes += after[i].aeBytes - before[i].aeBytes
	}
	return res
}

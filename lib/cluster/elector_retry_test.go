package cluster

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// nodeOnADisk is a test node whose store's disk has free's bytes free (1 TiB
// to start with), logging to log (nil: testLogger), its config changed by
// config.
func nodeOnADisk(t *testing.T, log *slog.Logger, config ...func(*Config)) (*testNode, *atomic.Int64) {
	free := new(atomic.Int64)
	free.Store(1 << 40)
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 4, "ram_gb": 8}`,
		free: func(string) (int64, error) { return free.Load(), nil }, log: log}
	tn.config = func(cfg *Config) {
		for _, c := range config {
			c(cfg)
		}
	}
	tn.start()
	t.Cleanup(tn.stop)
	return tn, free
}

// refusingNode is a test node whose store's disk has room until full is
// set, and refuses every write while it is.
func refusingNode(t *testing.T) (*testNode, func(full bool)) {
	return refusingNodeLogging(t, nil)
}

// refusingNodeLogging is refusingNode logging to log.
func refusingNodeLogging(t *testing.T, log *slog.Logger, config ...func(*Config)) (*testNode, func(full bool)) {
	tn, free := nodeOnADisk(t, log, config...)
	set := func(full bool) {
		free.Store(1 << 40)
		if full {
			free.Store(0)
		}
		require.Eventually(t, func() bool { return (tn.st.Writable() != nil) == full }, 5*time.Second, 10*time.Millisecond,
			"the store sees the disk full=%v", full)
	}
	return tn, set
}

// waitingClaim puts a claim no node can take, and waits until the elector
// has said why it waits (its last write of it).
func waitingClaim(tn *testNode, name string) {
	tn.put(template("huge", 100, 1, `{}`))
	tn.put(claim(name, "huge", time.Hour))
	require.Eventually(tn.t, func() bool { return tn.claim(name).Status.Reason != "" }, 5*time.Second, 10*time.Millisecond)
}

// An election write the store refuses (its disk full) is written again once
// it can be: the elector goes on from what it decided, so a lost acceptance
// left a claim Requested until its deadline, and a lost Failed for ever (a
// claim stayed Requested after a disk-full burst, its node's log saying
// "write election ... not enough free disk space").
func TestRefusedElectionWriteIsWrittenAgain(t *testing.T) {
	tn, full := refusingNode(t)
	waitingClaim(tn, "c")

	full(true)
	e := types.ClaimElection{Round: 7, Failed: true, Reason: "decided while the disk was full", At: time.Now().UTC()}
	tn.node.el.putElection("c", e)
	assert.Equal(t, types.ClaimRequested, tn.claim("c").Status.Phase, "refused")

	full(false)
	require.Eventually(t, func() bool {
		c := tn.claim("c")
		return c.Status.Phase == types.ClaimFailed && c.Status.Reason == e.Reason
	}, 10*time.Second, 20*time.Millisecond, "written again once the disk has room")
	tn.node.el.failedMu.Lock()
	defer tn.node.el.failedMu.Unlock()
	assert.Empty(t, tn.node.el.failed)
}

// A later write of the claim takes the place of a refused one: the older
// is never written over it.
func TestLaterElectionWriteReplacesARefusedOne(t *testing.T) {
	tn, full := refusingNode(t)
	waitingClaim(tn, "c")

	full(true)
	tn.node.el.putElection("c", types.ClaimElection{Round: 7, Failed: true, Reason: "older", At: time.Now().UTC()})
	full(false)
	tn.node.el.putElection("c", types.ClaimElection{Round: 7, Failed: true, Reason: "newer", At: time.Now().UTC()})
	tn.node.el.failedMu.Lock()
	left := len(tn.node.el.failed)
	tn.node.el.failedMu.Unlock()
	assert.Zero(t, left, "nothing left to write again")
	time.Sleep(2 * electionRetry)
	c, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c")
	require.NoError(t, err)
	assert.Equal(t, "newer", c.Status.Reason)
}

// A node whose disk is nearly full takes no offer (its API took no create
// for a while already): what is under way needs the room left. The claim
// says why it waits, and is bound once there is room again.
func TestNearlyFullNodeTakesNoNewWork(t *testing.T) {
	tn, free := nodeOnADisk(t, nil)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("before", "small", time.Hour))
	tn.waitPhase("before", types.ClaimBound)

	_, need, ok := tn.st.Space()
	require.True(t, ok)
	free.Store(need + offerHeadroom/2)
	require.Eventually(t, func() bool { return tn.st.Admits() != nil && tn.st.Writable() == nil }, 5*time.Second, 10*time.Millisecond)
	tn.put(claim("during", "small", time.Hour))
	require.Eventually(t, func() bool {
		c := tn.claim("during")
		return c.Status.Phase == types.ClaimRequested && strings.Contains(c.Status.Reason, "disk is nearly full")
	}, 10*time.Second, 20*time.Millisecond, "the claim says why it waits")

	free.Store(1 << 40)
	tn.waitPhase("during", types.ClaimBound)
}

// The record of a machine this node dropped is deleted again when the store
// refused the delete (its disk full): it showed a machine nobody held.
func TestRefusedMachineDeleteIsTriedAgain(t *testing.T) {
	tn, full := refusingNode(t)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c", "small", time.Hour))
	bound := tn.waitPhase("c", types.ClaimBound)
	name := bound.Status.Machine
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, name)
	require.NoError(t, err)
	require.NoError(t, testdriverRelease(tn, m), "the driver holds nothing for it")

	full(true)
	tn.node.acc.dropMachine(name)
	_, err = store.Get[types.Machine](tn.st, types.KindMachine, name)
	require.NoError(t, err, "the delete was refused")
	full(false)
	require.Eventually(t, func() bool {
		_, err := store.Get[types.Machine](tn.st, types.KindMachine, name)
		return isNotFound(err)
	}, 10*time.Second, 20*time.Millisecond, "deleted once the disk has room")
}

// testdriverRelease frees what the test driver holds for m.
func testdriverRelease(tn *testNode, m *types.Machine) error {
	return tn.drv.Deallocate(tn.t.Context(), m.Status.Resource)
}

// The acceptor's writes that the store refuses (its disk full) and that it
// tries again every second are logged once each, not at each try, and
// their count once they land: a full disk drew a warning per claim ("give
// claim back") and per machine ("delete machine") every second for as long
// as it lasted, after the store had said once that it refuses writes.
func TestRefusedAcceptorWritesAreLoggedOnce(t *testing.T) {
	logs := &syncbuf.Buffer{}
	tn, full := refusingNodeLogging(t, slog.New(slog.NewTextHandler(logs, nil)))
	count := func(msg string) int { return strings.Count(logs.String(), `msg="`+msg+`"`) }
	// Its allocation takes long enough to fill the disk while it runs: the
	// machine's record, once it is allocated, is refused, so the machine is
	// released, its record's delete refused and the claim's round given back,
	// refused too.
	tn.put(template("slow", 1, 1, `{"delay": "2s"}`))
	tn.put(claim("c", "slow", time.Hour))
	require.Eventually(t, func() bool { return tn.node.acc.holds("c") }, 10*time.Second, 10*time.Millisecond, "accepted")
	full(true)
	require.Eventually(t, func() bool { return count("give claim back") == 1 && count("delete machine") == 1 },
		10*time.Second, 20*time.Millisecond, "the first refusals are logged:\n%s", logs)
	require.Never(t, func() bool { return count("give claim back") > 1 || count("delete machine") > 1 },
		3500*time.Millisecond, 50*time.Millisecond, "tried again every second, logged once:\n%s", logs)
	assert.Equal(t, 1, count("record running machine"))

	full(false)
	require.Eventually(t, func() bool {
		l := logs.String()
		return strings.Contains(l, `msg="refused write settled" node=n1 write="give claim back" claim=c refused=`) &&
			strings.Contains(l, `msg="refused write settled" node=n1 write="delete machine" machine=`)
	}, 10*time.Second, 20*time.Millisecond, "the count is logged once they land:\n%s", logs)
	assert.Regexp(t, `write="give claim back" claim=c refused=([3-9]|\d\d+) suppressed=([2-9]|\d\d+)`, logs.String())
	assert.Equal(t, 1, count("give claim back"))
	tn.waitPhase("c", types.ClaimBound)
}

// The node's report, written on its timer, is refused every time while the
// disk is full: it is logged once, not at every heartbeat, and its count
// once it lands again.
func TestRefusedReportIsLoggedOnce(t *testing.T) {
	logs := &syncbuf.Buffer{}
	_, full := refusingNodeLogging(t, slog.New(slog.NewTextHandler(logs, nil)), func(c *Config) { c.ReportInterval = 50 * time.Millisecond })
	count := func(msg string) int { return strings.Count(logs.String(), `msg=`+msg+` `) }
	full(true)
	require.Eventually(t, func() bool { return count("report") == 1 }, 10*time.Second, 10*time.Millisecond, "the first refusal is logged:\n%s", logs)
	require.Never(t, func() bool { return count("report") > 1 }, 2*time.Second, 50*time.Millisecond, "refused at every heartbeat, logged once:\n%s", logs)
	full(false)
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `msg="refused write settled" node=n1 write=report refused=`)
	}, 10*time.Second, 20*time.Millisecond, "the count is logged once it lands:\n%s", logs)
	assert.Regexp(t, `write=report refused=([3-9]|\d\d+) suppressed=([2-9]|\d\d+)`, logs.String())
}

// A claim whose allocation fails on every node that fits (here the test
// driver's "fail", as an image no engine has) fails once that held for
// scheduler.max_refused_passes passes over a minute, with the driver's
// error, not at its bind timeout (an hour here).
func TestClaimEveryNodeRefusesFails(t *testing.T) {
	tn, clk, _ := clockedNode(t, `{"cpus": 4, "ram_gb": 8}`, func(c *Config) { c.MaxRefusedPasses = 3; c.ReportInterval = 50 * time.Millisecond })
	tn.put(template("broken", 1, 1, `{"fail": true}`))
	tn.put(claim("c1", "broken", time.Hour))

	// Pass after pass, with the node's reports; the clock stands still, so
	// less than a minute has gone by and the claim is still Requested
	// after more than three passes (rounds), saying why.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c1")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimRequested, cl.Status.Phase)
		assert.Greater(c, cl.Status.Round, uint64(4))
		assert.Contains(c, cl.Status.Reason, "injected allocation failure")
	}, 10*time.Second, 10*time.Millisecond)

	clk.Add(2 * time.Minute)
	cl := tn.waitPhase("c1", types.ClaimFailed)
	assert.True(t, strings.HasPrefix(cl.Status.Reason, "every node that fits (n1) refused it, "), cl.Status.Reason)
	assert.Contains(t, cl.Status.Reason, "failed")
	assert.NotContains(t, cl.Status.Reason, "bind timeout")
	assert.Empty(t, tn.machines(), "no machine is left of the failed allocations")
}

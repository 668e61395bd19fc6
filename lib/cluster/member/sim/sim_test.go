package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const k = 3

// runs is every fleet size and mode the properties are checked on, healthy
// and with the writer's first child dead (members learn of it long after
// the writes, as in scaletest's relaxed fleets).
func runs(t *testing.T, f func(t *testing.T, cfg Config, r Result)) {
	for _, nodes := range []int{50, 200, 1000} {
		for _, fanout := range []int{-1, k} {
			for _, kill := range []bool{false, true} {
				cfg := Config{Nodes: nodes, Fanout: fanout, Kill: kill, Writes: 50, Seed: uint64(nodes)}
				r, err := Run(cfg)
				require.NoError(t, err)
				t.Run(fmt.Sprintf("%s/nodes=%d/dead=%v", r.Mode(), nodes, kill), func(t *testing.T) { f(t, cfg, r) })
			}
		}
	}
}

// Every write reaches every live member in every run, and in the tree no
// member sends a write more than k times (k - 1 more for the writer, which
// sends to its dead child's k children instead), whatever the fleet's size.
func TestProperties(t *testing.T) {
	runs(t, func(t *testing.T, cfg Config, r Result) {
		assert.Equal(t, r.Writes, r.Reached, "every write reached every live member")
		assert.LessOrEqual(t, r.MeanMsgs, 1.0, "a write costs at most one message per member")
		if cfg.Fanout < 0 {
			assert.Zero(t, r.ViaAE, "direct: every live member gets its write from the writer")
			return
		}
		limit := float64(k)
		if cfg.Kill {
			limit += k - 1
		}
		assert.LessOrEqual(t, r.WriterMsgs, limit, "the writer's sends per write")
		assert.LessOrEqual(t, r.MaxMsgs, limit, "the busiest member's sends per write (%s)", r.MaxNode)
		assert.GreaterOrEqual(t, r.MeanMsgs, 0.9, "a tree over N members has N-1 edges")
		assert.Zero(t, r.ViaAE, "the tree and the bypass reached everyone")
		assert.LessOrEqual(t, r.HopsMax, 2+logk(cfg.Nodes), "hops")
	})
}

func logk(n int) int {
	d := 0
	for p := 1; p < n; p *= k {
		d++
	}
	return d
}

// The same config gives the same run.
func TestDeterministic(t *testing.T) {
	cfg := Config{Nodes: 200, Kill: true, Writes: 50, Loss: 0.01, Seed: 7}
	a, err := Run(cfg)
	require.NoError(t, err)
	b, err := Run(cfg)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	cfg.Seed++
	c, err := Run(cfg)
	require.NoError(t, err)
	assert.NotEqual(t, a.P99, c.P99, "another seed, another run")
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{Nodes: 1}, {Kill: true, Victim: 50}, {Loss: 1}, {LatencyMin: 2 * time.Millisecond, LatencyMax: time.Millisecond}} {
		_, err := Run(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

// TestTable prints the figures for README's "## Scale" when HF_SIM_NODES
// lists the fleet sizes:
//
//	HF_SIM_NODES=50,200,1000,5000 nice go test -run TestTable -v ./lib/cluster/member/sim
func TestTable(t *testing.T) {
	env := os.Getenv("HF_SIM_NODES")
	if env == "" {
		t.Skip("set HF_SIM_NODES=50,200,1000 to print the table")
	}
	var rows []Row
	for _, fanout := range []int{-1, k} {
		for _, s := range strings.Split(env, ",") {
			nodes, err := strconv.Atoi(strings.TrimSpace(s))
			require.NoError(t, err)
			var row Row
			for _, kill := range []bool{false, true} {
				r, err := Run(Config{Nodes: nodes, Fanout: fanout, Kill: kill, Seed: 1})
				require.NoError(t, err)
				t.Log(r)
				if kill {
					row.Dead = r
				} else {
					row.Healthy = r
				}
			}
			rows = append(rows, row)
		}
	}
	var b strings.Builder
	require.NoError(t, Table(&b, rows))
	t.Log("\n" + b.String())
}

// A death that the members learn of at different times while the writes go
// on (LAN-profile detection, 1-3 s) costs no write an anti-entropy repair:
// a member that knows keeps the dead one in its trees, down, and sends
// around it; one that does not know yet sends to it, fails, and bypasses it.
// The same tree either way.
func TestDeathLearnedDuringWrites(t *testing.T) {
	for _, nodes := range []int{50, 200, 1000} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			r, err := Run(Config{Nodes: nodes, Kill: true, Writes: 100,
				DetectAfter: 500 * time.Millisecond, DetectSpread: time.Second, Seed: 3})
			require.NoError(t, err)
			assert.Equal(t, r.Writes, r.Reached)
			assert.Zero(t, r.ViaAE, "writes that needed anti-entropy")
			assert.LessOrEqual(t, r.MaxMsgs, float64(2*k-1), "the busiest member's sends per write (%s)", r.MaxNode)
			assert.Less(t, r.P99, 100*time.Millisecond)
		})
	}
}

package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// cand builds an alive local "test" candidate with cpu/ram usable and used.
func cand(node string, cpu, ram, usedCPU, usedRAM float64) Candidate {
	c := HostCapacity(res(cpu, ram, 0), Alter{})
	return Candidate{
		Node: node, Driver: "test", DriverType: "test", Alive: true,
		Capacity: WithUsage(c, res(usedCPU, usedRAM, 0), types.Resources{}),
	}
}

func testReq(claim string, cpu, ram float64) Request {
	return Request{Claim: claim, Template: "t", Resources: res(cpu, ram, 0), Providers: []string{"test"}}
}

func TestFeasible(t *testing.T) {
	base := cand("n1", 8, 32, 0, 0)
	with := func(f func(*Candidate)) Candidate { c := base; f(&c); return c }
	tests := []struct {
		name   string
		req    Request
		c      Candidate
		ok     bool
		reason string
	}{
		{"fits", testReq("c", 4, 8), base, true, ""},
		{"down", testReq("c", 4, 8), with(func(c *Candidate) { c.Alive = false }), false, "node n1 is down"},
		{"maintenance", testReq("c", 4, 8), with(func(c *Candidate) { c.Maintenance = true }), false, "node n1 is in maintenance"},
		{"excluded", func() Request { r := testReq("c", 4, 8); r.Exclude = map[string]bool{"n1": true}; return r }(), base, false,
			"node n1 already declined or did not answer in this election"},
		{"other node excluded", func() Request { r := testReq("c", 4, 8); r.Exclude = map[string]bool{"n2": true}; return r }(), base, true, ""},
		{"driver type not served", func() Request { r := testReq("c", 4, 8); r.Providers = []string{"docker"}; return r }(), base, false,
			"driver test on n1 does not serve template t"},
		{"served by instance name", func() Request { r := testReq("c", 4, 8); r.Providers = []string{"test/big"}; return r }(),
			with(func(c *Candidate) { c.Driver = "test/big" }), true, ""},
		{"no providers serves nothing", func() Request { r := testReq("c", 4, 8); r.Providers = nil; return r }(), base, false,
			"driver test on n1 does not serve template t"},
		{"selector mismatch", func() Request {
			r := testReq("c", 4, 8)
			r.NodeSelector = map[string]string{"zone": "b", "gpu": "yes"}
			return r
		}(),
			with(func(c *Candidate) { c.Labels = map[string]string{"zone": "a"} }), false, "node n1 does not match node selector gpu=yes,zone=b"},
		{"selector match", func() Request { r := testReq("c", 4, 8); r.NodeSelector = map[string]string{"zone": "a"}; return r }(),
			with(func(c *Candidate) { c.Labels = map[string]string{"zone": "a", "x": "y"} }), true, ""},
		{"remote ignores selector", func() Request { r := testReq("c", 4, 8); r.NodeSelector = map[string]string{"zone": "b"}; return r }(),
			with(func(c *Candidate) { c.Remote = true }), true, ""},
		{"no cpu", testReq("c", 4, 8), cand("n1", 4, 32, 4, 0), false, "driver test on n1 has no capacity: cpu 0.0 free of 4.0 needed"},
		{"no ram", testReq("c", 1, 8), cand("n1", 4, 32, 0, 28), false, "driver test on n1 has no capacity: ram 4.0 free of 8.0 needed"},
		{"overbook lets it fit", func() Request { r := testReq("c", 14, 1); r.AllowOverbook = true; return r }(),
			with(func(c *Candidate) {
				c.Capacity = WithUsage(HostCapacity(res(16, 64, 0), Alter{CPUOverbook: 12}), res(14, 1, 0), types.Resources{})
			}), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := Feasible(tt.req, tt.c)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.reason, reason)
		})
	}
}

func nodesOf(r []Ranked) []string {
	out := make([]string, len(r))
	for i, x := range r {
		out[i] = x.Node
	}
	return out
}

func TestRankPolicies(t *testing.T) {
	cands := []Candidate{
		cand("idle", 16, 64, 0, 0),
		cand("busy", 16, 64, 12, 48),
		cand("half", 16, 64, 8, 32),
		cand("full", 16, 64, 16, 64),
		func() Candidate { c := cand("down", 16, 64, 0, 0); c.Alive = false; return c }(),
	}
	req := testReq("c1", 2, 8)

	t.Run("pack fills the busiest that fits", func(t *testing.T) {
		got := Rank(req, cands)
		assert.Equal(t, []string{"busy", "half", "idle"}, nodesOf(got))
		assert.Equal(t, int64(2), got[0].Fit)
		assert.Equal(t, int64(8), got[2].Fit)
		assert.Greater(t, got[0].Score, got[1].Score)
	})
	t.Run("empty placement is pack", func(t *testing.T) {
		r := req
		r.Placement = types.PlacementPack
		assert.Equal(t, nodesOf(Rank(req, cands)), nodesOf(Rank(r, cands)))
	})
	t.Run("spread picks the most free", func(t *testing.T) {
		r := req
		r.Placement = types.PlacementSpread
		assert.Equal(t, []string{"idle", "half", "busy"}, nodesOf(Rank(r, cands)))
	})
	t.Run("input order does not matter", func(t *testing.T) {
		rev := slices.Clone(cands)
		slices.Reverse(rev)
		assert.Equal(t, Rank(req, cands), Rank(req, rev))
	})
	t.Run("nothing feasible", func(t *testing.T) {
		assert.Empty(t, Rank(testReq("c", 32, 1), cands))
	})
	t.Run("reservations count", func(t *testing.T) {
		c := cand("n", 16, 64, 0, 0)
		c.Capacity = WithUsage(c.Capacity, res(0, 0, 0), res(15, 0, 0))
		assert.Empty(t, Rank(req, []Candidate{c}))
	})
}

func TestRankTieBreakByHash(t *testing.T) {
	var cands []Candidate
	for i := range 4 {
		cands = append(cands, cand(fmt.Sprintf("n%d", i), 8, 32, 0, 0))
	}
	firsts := map[string]int{}
	for i := range 400 {
		claim := fmt.Sprintf("claim-%d", i)
		got := Rank(testReq(claim, 1, 1), cands)
		require.Len(t, got, 4)
		// Every node computes the same order, whatever order it lists candidates in.
		rev := slices.Clone(cands)
		slices.Reverse(rev)
		assert.Equal(t, nodesOf(got), nodesOf(Rank(testReq(claim, 1, 1), rev)))
		firsts[got[0].Node]++
	}
	// Equal hosts share the first place instead of one host taking every claim.
	for _, c := range cands {
		assert.Greater(t, firsts[c.Node], 50, "node %s first for %d claims", c.Node, firsts[c.Node])
	}
}

func TestRankFloatResidueIsATie(t *testing.T) {
	// 1-0.1-0.3-0.1 is 0.5000000000000001 while 1-0.4-0.1 is 0.5: the same
	// load must still be a tie, broken by the hash like any other.
	a := cand("a", 1, 0, 0, 0)
	a.Capacity = WithUsage(a.Capacity, res(0.1, 0, 0), res(0.3, 0, 0))
	b := cand("b", 1, 0, 0.4, 0)
	req := testReq("c", 0.1, 0)
	require.NotEqual(t, 1-a.Capacity.Used.CPU-a.Capacity.Reserved.CPU-req.Resources.CPU,
		1-b.Capacity.Used.CPU-b.Capacity.Reserved.CPU-req.Resources.CPU, "the case must carry float residue")
	assert.Equal(t, score(req, a), score(req, b))
}

func TestRankRemote(t *testing.T) {
	// Every node may serve a remote driver; the quota is the capacity.
	quota := types.Capacity{Usable: res(100, 400, 0), Used: res(10, 40, 0)}
	var cands []Candidate
	for i := range 3 {
		cands = append(cands, Candidate{
			Node: fmt.Sprintf("n%d", i), Driver: "aws", DriverType: "aws", Remote: true, Alive: true,
			Labels: map[string]string{"zone": "a"}, Capacity: quota,
		})
	}
	cands[1].Maintenance = true
	req := Request{Claim: "c", Template: "vm", Resources: res(2, 8, 0), Providers: []string{"aws"},
		NodeSelector: map[string]string{"zone": "other"}}
	got := Rank(req, cands)
	assert.ElementsMatch(t, []string{"n0", "n2"}, nodesOf(got))
	assert.Equal(t, int64(45), got[0].Fit)

	req.Resources = res(200, 1, 0)
	assert.Empty(t, Rank(req, cands))
	assert.Contains(t, NoFitReason(req, cands), "driver aws on n0 has no capacity: cpu 90.0 free of 200.0 needed")
}

func TestNoFitReason(t *testing.T) {
	maint := cand("n1", 8, 32, 0, 0)
	maint.Maintenance = true
	tests := []struct {
		name  string
		req   Request
		cands []Candidate
		want  string
	}{
		{"no candidates", testReq("c", 1, 1), nil, "no node can take template t: no node reports any driver"},
		{"no driver serves", func() Request { r := testReq("c", 1, 1); r.Providers = []string{"docker", "aws"}; return r }(),
			[]Candidate{cand("n1", 8, 8, 0, 0)}, "no driver serves template t: it names aws, docker, the nodes run test"},
		{"mixed reasons sorted by node", testReq("c", 4, 8),
			[]Candidate{cand("n2", 8, 32, 6, 0), maint},
			"no node can take template t: node n1 is in maintenance; driver test on n2 has no capacity: cpu 2.0 free of 4.0 needed"},
		{"something fits", testReq("c", 1, 1), []Candidate{cand("n1", 8, 8, 0, 0)}, ""},
		{"no such template", Request{Claim: "c", Template: "smal", NoTemplate: true}, []Candidate{cand("n1", 8, 8, 0, 0)},
			"machine template smal does not exist: the claim waits for it to be created, until its bind timeout"},
		{"claim named when template unset", Request{Claim: "c9", Providers: []string{"x"}}, []Candidate{cand("n1", 1, 1, 0, 0)},
			"no driver serves template of claim c9: it names x, the nodes run test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, NoFitReason(tt.req, tt.cands))
		})
	}

	t.Run("long lists are cut", func(t *testing.T) {
		var cands []Candidate
		for i := range 10 {
			cands = append(cands, cand(fmt.Sprintf("n%02d", i), 1, 1, 1, 1))
		}
		got := NoFitReason(testReq("c", 1, 1), cands)
		assert.True(t, strings.HasSuffix(got, "; and 4 more"), got)
		assert.Equal(t, maxReasons, strings.Count(got, "has no capacity"))
	})
}

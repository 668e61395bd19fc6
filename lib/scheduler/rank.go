package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/hf-fleet/hf/lib/types"
)

// Candidate is one driver instance on one node, as the latest reports describe
// it: a claim is placed on a (node, driver) pair.
type Candidate struct {
	// Node is the node name.
	Node string
	// Driver is the driver instance name on the node ("test", "docker", "test/big").
	Driver string
	// DriverType is the driver type behind the instance ("test", "docker", "aws").
	DriverType string
	// Remote drivers (cloud) allocate off the host; their capacity is a quota.
	Remote bool
	// Labels are the node's labels, matched against a NodeSelector.
	Labels map[string]string
	// Maintenance is true while the node takes no new placements.
	Maintenance bool
	// Alive is true while the node is a live cluster member.
	Alive bool
	// Capacity is the driver's capacity with Used and Reserved filled in.
	Capacity types.Capacity
}

// key identifies the candidate among all others; driver names may hold '/'.
func (c Candidate) key() string { return c.Node + "\x00" + c.Driver }

// Request is what a claim needs, resolved from its template and environment.
type Request struct {
	// Claim is the claim name; it seeds the tie-break so every node agrees.
	Claim string
	// Template is the machine template name, for messages.
	Template string
	// Resources is what one machine of the template takes.
	Resources types.Resources
	// AllowOverbook lets the fit use the drivers' overbook.
	AllowOverbook bool
	// Providers are the keys of the template's providerConfiguration: a
	// candidate serves the template when its DriverType or Driver is listed.
	Providers []string
	// NodeSelector limits local drivers to nodes carrying these labels.
	NodeSelector map[string]string
	// Placement ranks candidates; "" is PlacementPack.
	Placement types.Placement
	// Exclude holds nodes already tried in this election (declined, timed out).
	Exclude map[string]bool
	// NoTemplate: the template does not exist (here, yet), so nothing
	// serves it; the claim waits for it to be created.
	NoTemplate bool
}

// Ranked is a feasible candidate with its fit and score (higher is better).
type Ranked struct {
	Candidate
	// Fit is how many machines of the request still fit, this one included.
	Fit int64
	// Score orders candidates under the placement policy; higher is better.
	Score float64
}

// serves reports whether c runs a driver the template names.
func serves(req Request, c Candidate) bool {
	return slices.Contains(req.Providers, c.DriverType) || slices.Contains(req.Providers, c.Driver)
}

// Feasible reports whether c can take one machine of req, and when it cannot,
// a reason a person can act on. The checks run from the cheapest and most
// fundamental (is the node alive) to capacity. Remote drivers ignore the node
// selector: the machine does not run on the node, so any alive node may serve.
func Feasible(req Request, c Candidate) (ok bool, reason string) {
	switch {
	case !c.Alive:
		return false, fmt.Sprintf("node %s is down", c.Node)
	case c.Maintenance:
		return false, fmt.Sprintf("node %s is in maintenance", c.Node)
	case req.Exclude[c.Node]:
		return false, fmt.Sprintf("node %s already declined or did not answer in this election", c.Node)
	case !serves(req, c):
		return false, fmt.Sprintf("driver %s on %s does not serve template %s", c.Driver, c.Node, templateName(req))
	case !c.Remote && !types.MatchLabels(req.NodeSelector, c.Labels):
		return false, fmt.Sprintf("node %s does not match node selector %s", c.Node, formatLabels(req.NodeSelector))
	}
	if Fit(c.Capacity, req.Resources, req.AllowOverbook) < 1 {
		return false, fmt.Sprintf("driver %s on %s has no capacity: %s", c.Driver, c.Node,
			shortfall(c.Capacity, req.Resources, req.AllowOverbook))
	}
	return true, ""
}

// Rank returns the feasible candidates for req, best first. Pack (the default)
// puts the candidate left with the least free share after placement first, so
// busy hosts fill up and idle ones stay whole; spread puts the one left with the
// most free share first. Equal scores are ordered by Weight(claim, candidate),
// so every node computes the same order and equal hosts share the claims.
func Rank(req Request, cands []Candidate) []Ranked {
	type entry struct {
		Ranked
		key    string
		weight uint64
	}
	var es []entry
	for _, c := range cands {
		if ok, _ := Feasible(req, c); !ok {
			continue
		}
		k := c.key()
		es = append(es, entry{
			Ranked: Ranked{
				Candidate: c,
				Fit:       Fit(c.Capacity, req.Resources, req.AllowOverbook),
				Score:     score(req, c),
			},
			key:    k,
			weight: Weight(req.Claim, k),
		})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	out := make([]Ranked, len(es))
	for i, e := range es {
		out[i] = e.Ranked
	}
	return out
}

// score is the placement score of c for req: the mean free share left on c
// after placing one machine, over the dimensions c accounts; pack turns it
// around so that higher is better under both policies.
func score(req Request, c Candidate) float64 {
	limit := c.Capacity.Usable
	if req.AllowOverbook {
		limit = limit.Add(c.Capacity.Overbook)
	}
	after := limit.Sub(c.Capacity.Used).Sub(c.Capacity.Reserved).Sub(req.Resources)
	var sum float64
	var n int
	for _, d := range [][2]float64{{limit.CPU, after.CPU}, {limit.RAMGB, after.RAMGB}, {limit.DiskGB, after.DiskGB}} {
		if d[0] > 0 {
			sum += d[1] / d[0]
			n++
		}
	}
	free := 0.0
	if n > 0 {
		free = sum / float64(n)
	}
	if req.Placement != types.PlacementSpread {
		free = 1 - free
	}
	// Quantise so that float residue (0.1+0.2) cannot break a tie that the
	// hash should break.
	return math.Round(free*scoreScale) / scoreScale
}

// scoreScale is the resolution of scores: differences below 1e-9 are ties.
const scoreScale = 1e9

// maxReasons caps how many per-candidate reasons NoFitReason lists.
const maxReasons = 6

// NoFitReason summarises in one line why Rank found nothing for req, e.g.
// "no node can take template t: node n1 is in maintenance; driver test on n2
// has no capacity: cpu 0.0 free of 4.0 needed". It returns "" when some
// candidate is feasible.
func NoFitReason(req Request, cands []Candidate) string {
	name := templateName(req)
	if req.NoTemplate {
		return fmt.Sprintf("machine template %s does not exist: the claim waits for it to be created, until its bind timeout", name)
	}
	if len(cands) == 0 {
		return fmt.Sprintf("no node can take template %s: no node reports any driver", name)
	}
	var serving []Candidate
	driverTypes := map[string]bool{}
	for _, c := range cands {
		if c.DriverType != "" {
			driverTypes[c.DriverType] = true
		}
		if serves(req, c) {
			serving = append(serving, c)
		}
	}
	if len(serving) == 0 {
		return fmt.Sprintf("no driver serves template %s: it names %s, the nodes run %s",
			name, joinSorted(req.Providers), joinSorted(keys(driverTypes)))
	}
	slices.SortFunc(serving, func(a, b Candidate) int { return cmp.Compare(a.key(), b.key()) })
	var reasons []string
	for _, c := range serving {
		ok, r := Feasible(req, c)
		if ok {
			return ""
		}
		reasons = append(reasons, r)
	}
	more := ""
	if len(reasons) > maxReasons {
		more = fmt.Sprintf("; and %d more", len(reasons)-maxReasons)
		reasons = reasons[:maxReasons]
	}
	return fmt.Sprintf("no node can take template %s: %s%s", name, strings.Join(reasons, "; "), more)
}

// templateName is the template for messages, or the claim when it is unset.
func templateName(req Request) string {
	if req.Template != "" {
		return req.Template
	}
	return "of claim " + req.Claim
}

// formatLabels renders a selector as sorted "k=v,k=v".
func formatLabels(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// joinSorted renders a list as sorted "a, b", or "nothing" when empty.
func joinSorted(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	s := slices.Clone(list)
	sort.Strings(s)
	return strings.Join(s, ", ")
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

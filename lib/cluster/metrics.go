package cluster

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hf-fleet/hf/lib/types"
)

// metrics are the node's own counters; the gauges (claims and machines by
// phase, capacity, members) are read at scrape time by Collector. Every
// counter is there from the start, at zero, for every label value it can
// take: a rate over a series that appears only at its first event misses that
// event.
type metrics struct {
	bound       *prometheus.CounterVec
	bindLatency prometheus.Histogram
	allocFailed *prometheus.CounterVec
	released    *prometheus.CounterVec
	lost        prometheus.Counter
}

// bindHows are the values of hf_claims_bound_total's how label.
var bindHows = []string{"allocated", "pool", "shared"}

func newMetrics(drivers []string) *metrics {
	m := &metrics{
		bound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_claims_bound_total",
			Help: "Claims this node bound to one of its machines, by how: allocated (a new machine), pool (a warm machine) or shared (a Shared machine of an event).",
		}, []string{"how"}),
		bindLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hf_claim_bind_seconds",
			Help:    "Time from a claim's creation to its binding, for claims this node bound.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		allocFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_allocation_failures_total",
			Help: "Allocations that failed on this node, by driver instance.",
		}, []string{"driver"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_machines_released_total",
			Help: "Machines this node deallocated, by driver instance.",
		}, []string{"driver"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_machines_lost_total",
			Help: "Machines this node marked Lost (its own that its driver lost, or those of a dead node it looked after).",
		}),
	}
	for _, how := range bindHows {
		m.bound.WithLabelValues(how)
	}
	for _, d := range drivers {
		m.allocFailed.WithLabelValues(d)
		m.released.WithLabelValues(d)
	}
	return m
}

// gib is the bytes in a GiB: the model's ramGB are GiB (drivers read the
// host's RAM in GiB).
const gib = 1 << 30

var (
	descClaims = prometheus.NewDesc("hf_claims",
		"Claims in the cluster by phase, as this node's store has them.", []string{"phase"}, nil)
	descMachines = prometheus.NewDesc("hf_machines",
		"Machines in the cluster by phase, as this node's store has them.", []string{"phase"}, nil)
	descMembers = prometheus.NewDesc("hf_cluster_members",
		"Live members of the cluster as this node sees them, this node included.", nil, nil)
	descCPU = prometheus.NewDesc("hf_node_cpus",
		"This node's CPUs per driver instance: usable (host + alter), used (running machines), reserved (accepted, not yet running), free.", []string{"driver", "kind"}, nil)
	descRAM = prometheus.NewDesc("hf_node_ram_bytes",
		"This node's RAM in bytes per driver instance: usable, used, reserved, free.", []string{"driver", "kind"}, nil)
	descHeld = prometheus.NewDesc("hf_node_machines",
		"Machines this node holds per driver instance (reserved and running).", []string{"driver"}, nil)
	descDiskFree = prometheus.NewDesc("hf_store_disk_free_bytes",
		"Free bytes on the disk of this node's store.", nil, nil)
	descDiskNeeded = prometheus.NewDesc("hf_store_disk_needed_bytes",
		"Bytes this node's store needs free to write at all; below this plus 32 MiB it takes no new work.", nil, nil)
)

// Collector returns the node's Prometheus collector: its counters and, read at
// each scrape, claims and machines by phase, its capacity and the members.
func (n *Node) Collector() prometheus.Collector { return collector{n} }

type collector struct{ n *Node }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	m := c.n.metrics
	for _, col := range []prometheus.Collector{m.bound, m.bindLatency, m.allocFailed, m.released, m.lost} {
		col.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{descClaims, descMachines, descMembers, descCPU, descRAM, descHeld, descDiskFree, descDiskNeeded} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	n, m := c.n, c.n.metrics
	m.bound.Collect(ch)
	m.bindLatency.Collect(ch)
	m.allocFailed.Collect(ch)
	m.released.Collect(ch)
	m.lost.Collect(ch)

	// Counted by the cache's indexes: a scrape costs the number of phases,
	// not the number of objects.
	claimPhases := n.cache.Keys(idxClaimPhase)
	for _, p := range []types.ClaimPhase{types.ClaimRequested, types.ClaimBound, types.ClaimFailed, types.ClaimTerminated} {
		ch <- prometheus.MustNewConstMetric(descClaims, prometheus.GaugeValue, float64(claimPhases[string(p)]), string(p))
	}
	machinePhases := n.cache.Keys(idxMachinePhase)
	for _, p := range []types.MachinePhase{types.MachinePending, types.MachineProvisioning, types.MachineRunning,
		types.MachineTerminating, types.MachineTerminated, types.MachineFailed, types.MachineLost} {
		ch <- prometheus.MustNewConstMetric(descMachines, prometheus.GaugeValue, float64(machinePhases[string(p)]), string(p))
	}
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(len(n.peers.Members())))
	if free, need, ok := n.st.Space(); ok {
		ch <- prometheus.MustNewConstMetric(descDiskFree, prometheus.GaugeValue, float64(free))
		ch <- prometheus.MustNewConstMetric(descDiskNeeded, prometheus.GaugeValue, float64(need))
	}
	for _, name := range n.order {
		in := n.instances[name]
		capa, count := n.acc.capacityOf(in)
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(count), name)
		for kind, r := range map[string]types.Resources{"usable": capa.Usable, "used": capa.Used, "reserved": capa.Reserved, "free": capa.Free} {
			ch <- prometheus.MustNewConstMetric(descCPU, prometheus.GaugeValue, r.CPU, name, kind)
			ch <- prometheus.MustNewConstMetric(descRAM, prometheus.GaugeValue, r.RAMGB*gib, name, kind)
		}
	}
}

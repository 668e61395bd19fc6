package member

import "github.com/prometheus/client_golang/prometheus"

// metrics count replication work: what was pushed and to whom it failed,
// what arrived and was applied, and what anti-entropy had to repair. Every
// counter is there from the start, at zero, for each of its label values.
// The live members are the node's hf_cluster_members (lib/cluster), not
// counted twice here.
type metrics struct {
	pushed     prometheus.Counter
	pushFailed prometheus.Counter
	relayed    prometheus.Counter
	coalesced  prometheus.Counter
	received   prometheus.Counter
	applied    prometheus.Counter
	rounds     *prometheus.CounterVec
	repaired   *prometheus.CounterVec
	// sentMsgs and sentBytes count the messages this node sent by reliable
	// send, by class (sendClasses), and their encoded bytes: the cost of
	// dissemination per node, which the scale harness reads.
	sentMsgs  *prometheus.CounterVec
	sentBytes *prometheus.CounterVec
	// all is every collector above.
	all []prometheus.Collector
}

func newMetrics() *metrics {
	x := &metrics{
		pushed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_replication_records_pushed_total",
			Help: "Records this node pushed to peers (each peer counts): its own writes and the ones it relays.",
		}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_replication_records_relayed_total",
			Help: "Received pushed records that were new here and were queued for this node's children in their writer's dissemination tree (each child counts).",
		}),
		pushFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_replication_push_failures_total",
			Help: "Pushes to a peer that failed; anti-entropy repairs that peer.",
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_replication_records_coalesced_total",
			Help: "Writes not sent on their own because a newer write of the same object replaced them in a peer's queue (each peer counts).",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_replication_records_received_total",
			Help: "Records received from peers (pushes and anti-entropy).",
		}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hf_replication_records_applied_total",
			Help: "Received records that were newer than the stored ones and were applied.",
		}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_anti_entropy_rounds_total",
			Help: "Anti-entropy rounds this node started, by result: in_sync, repaired or failed.",
		}, []string{"result"}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_anti_entropy_records_total",
			Help: "Records anti-entropy repaired: sent to a peer that lacked them or had them older, and requested from a peer.",
		}, []string{"direction"}),
		sentMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_cluster_messages_sent_total",
			Help: "Messages this node sent to peers by reliable send, by class: push (replication of writes), anti_entropy (digests, pulls and the records they repair), election, leaving.",
		}, []string{"class"}),
		sentBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hf_cluster_message_bytes_sent_total",
			Help: "Encoded bytes of the messages in hf_cluster_messages_sent_total, by class.",
		}, []string{"class"}),
	}
	for _, c := range sendClasses {
		x.sentMsgs.WithLabelValues(c)
		x.sentBytes.WithLabelValues(c)
	}
	for _, r := range []string{"in_sync", "repaired", "failed"} {
		x.rounds.WithLabelValues(r)
	}
	for _, d := range []string{"sent", "requested"} {
		x.repaired.WithLabelValues(d)
	}
	x.all = []prometheus.Collector{x.pushed, x.relayed, x.pushFailed, x.coalesced, x.received, x.applied, x.rounds, x.repaired, x.sentMsgs, x.sentBytes}
	return x
}

// Classes of sent messages (the class label of hf_cluster_messages_sent_total).
const (
	classPush        = "push"
	classAntiEntropy = "anti_entropy"
	classElection    = "election"
	classLeaving     = "leaving"
)

var sendClasses = []string{classPush, classAntiEntropy, classElection, classLeaving}

// sent counts one message of class that was sent.
func (x *metrics) sent(class string, bytes int) {
	x.sentMsgs.WithLabelValues(class).Inc()
	x.sentBytes.WithLabelValues(class).Add(float64(bytes))
}

// Collector returns the member's Prometheus collector.
func (m *Member) Collector() prometheus.Collector { return collector{m.metrics} }

type collector struct{ m *metrics }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, col := range c.m.all {
		col.Describe(ch)
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, col := range c.m.all {
		col.Collect(ch)
	}
}

// Package scaletest measures replication at fleet sizes: in-process fleets
// of members over real memberlist on 127.0.0.1, each with its own in-memory
// store (membertest), and the figures issue 15 asks for:
//
//   - write-to-all latency: from a Put on one member until every member's
//     store holds the record (p50, p99, max);
//   - messages and bytes sent per write: by the writer, and the most and
//     the mean any member sent (hf_cluster_messages_sent_total and
//     hf_cluster_message_bytes_sent_total, class push);
//   - anti-entropy bytes per round, during the writes and in sync;
//   - how long a new member takes to catch up with K objects.
//
// Figures go to logs and benchmark metrics, never into assertions: the
// short test checks only that every write reaches every member.
package scaletest

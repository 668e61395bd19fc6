// Package member is hf's cluster membership and replication on
// hashicorp/memberlist: who is alive (gossip, failure detection), direct
// messages for the claim election, and replication of the store.
//
// A Member implements cluster.Peers for the node loop.
//
// # Membership
//
// memberlist gossips membership over UDP and TCP on Config.Bind, encrypted
// with Config.Key and stamped with Config.Label when set (another key or label
// cannot join or inject). Names are stable, so a restarted node is the same
// member. Every RejoinInterval a member joins its Join addresses and every
// member it knows as dead: memberlist never talks to a dead member again on
// its own, so this is what heals partitions. MemberStates tells dead (stopped
// answering) from left (said so before it went: a leaving note by reliable
// send, then memberlist's leave broadcast).
//
// # Replication
//
//	write on A: store.Put -> badger (acked to the client)
//	             |
//	             store.Watch (own writes: Version.Node == A)
//	             v
//	pusher: coalesce ~5 ms ---> one queue + sender per peer, for A's
//	        (a watch resync ->      | children in A's tree (Fanout, default 3)
//	         anti-entropy with      | sends what queued while its last message
//	         every peer)            | was in flight as one batch <= 240 KB
//	                                | (a failed send -> anti-entropy with it,
//	                                |  and the batch to its children instead)
//	                                v
//	                          msgPush, over the link ---> peer: store.Apply
//	                                                      (higher version wins)
//	                                                      what was new here ->
//	                                                      its children in A's tree
//
// Dissemination follows a k-ary tree over the live members in name order,
// rotated so the writer is its root (treeChildren): the writer sends to k
// members, each relays what was new to it to its own k children, so a write
// costs every member at most k sends whatever the cluster's size and reaches
// N members in about log_k(N) hops. A member relays each pushed version
// once (it remembers the last 16,384 it relayed), also when it held the
// record already because an anti-entropy round brought it first. The tree is built over the
// live members and the dead ones not yet forgotten, down: a send to a
// dead member goes to its children instead, so a death that members learn
// of seconds apart changes nobody's place in the tree (package
// internal/fanout; member/sim simulates it). Where two members' views
// differ otherwise for a moment (a join, a leave), a member may be
// skipped: anti-entropy repairs it.
//
// Anti-entropy repairs what pushes missed (a peer down or partitioned, a
// dropped queue). Every member keeps a hash tree over its records,
// tombstones included: hash(kind/name) picks one of NumLeaves (4,096) leaf
// buckets, and above them three levels of 16 children up to the root. A
// node's hash is the sum of its records' hashes (kind, name, version,
// fingerprint), so each commit, seen through the store's watch, updates one
// leaf and its three ancestors (keeper.go); nothing is recomputed for a
// round. A round descends both trees to the leaves that differ:
//
//	A                                            B
//	|--msgTreeReq level 1: A's 16 hashes -------->|  in sync: ~150 B, done
//	|<--msgTreeResp: the nodes that differ -------|  where A has nothing, B
//	|   (and those where B has nothing)           |  sends the records at once
//	|--msgTreeReq level 2: 16 under each -------->|  (msgRecords)
//	|<--msgTreeResp: the nodes that differ -------|
//	|--msgTreeReq level 3: 16 leaves under each ->|
//	|<--msgTreeResp pages (< 256 KB): the --------|
//	|   differing leaves, B's entries in them     |
//	|   (key, entry hash, settled)                |
//	|--msgRecords: what B lacks or has older----->|  (full rounds only; also
//	|--msgPullReq pages: keys where B is newer--->|   everything where B has
//	|<--msgPullResp: those records----------------|   nothing)
//
// One record's difference costs about 1.2 KB (three levels of 16 hashes,
// a leaf's entries, the record), whatever the store holds.
//
// A full round runs with a random live peer every AntiEntropyInterval (it
// leaves writes younger than a second alone: they are still on their way by
// push) and with a peer whose pushes failed; a pull-only round runs with one
// of the members that just joined. Such a round, or one after failed pushes,
// that fails is asked for again a second later. A member asked for a round
// by a newcomer it has not heard of yet (the newcomer joined through another
// member, whose gossip has not arrived) answers once it has, within the
// round timeout. A member streams the records a peer lacks
// (msgRecords) to it one stream at a time: a round that finds one under way
// leaves those records to the next round, so a new member's catch-up is sent
// once, not once per round that comes while it runs (pull answers always
// go). No message exceeds 256 KB and none
// travels by UDP gossip; memberlist's push/pull state carries nothing of ours.
//
// Every message starts with a one-byte type; election messages are JSON (few
// and small), the rest a compact binary encoding (wire.go).
//
// # Links
//
// Messages to a peer travel over this member's link to it: one TCP stream,
// dialled through memberlist's transport on the first message and kept,
// that carries them as frames, sealed with the gossip key (AES-GCM, the
// label as additional data) when there is one; messages sent at once share
// a write (linkframe.go, links.go). The transport tells a link from
// memberlist's own streams by its first byte (linktransport.go), so links
// use the gossip port. A send that fails drops the link (the next message
// dials again) and counts as a failed send, as before; a peer that leaves
// or dies has its link closed. Members say in their memberlist metadata
// that they serve links; one that does not (an earlier release, during an
// upgrade) gets memberlist's reliable send, a connection per message.
//
// # Tombstones
//
// A delete is a tombstone, kept until every member has been shown to hold
// it and then at least TombstoneMinAge (10 min by default), and never longer
// than the store's TombstoneTTL (24 h by default), whatever happens
// (tombstones.go):
//
//	round A -> B, one level:  A reads its tree's seq S, then its hashes
//	  B: equal node  => A held what B holds now    (B's proof of A, at B's seq)
//	  A: equal node  => B held what A held at S    (A's proof of B, per leaf)
//	keeper, every interval: a tombstone whose local Seq every counted
//	  member's proof covers, in its leaf, and older than TombstoneMinAge
//	  -> store.CollectTombstoneList, and out of the tree (no rebuild)
//	a round finding B without a tombstone A's proof of B covers: not sent
//	  (B collected it; sending it back would start it all again)
//
// Counted: every member in MemberStates (dead and left ones until
// ForgetAfter: one that comes back with its data dir gets its deletes) and
// the members remembered in the store's meta for ForgetAfter after they were
// last seen (a restarted member hears of the live ones only). A member that
// counts nobody keeps the TTL. A member that was down for longer than
// ForgetAfter (or the TTL) may still hold objects whose tombstones the others
// have collected, and anti-entropy would bring them back: wipe its data dir
// before it rejoins. A peer's proofs are dropped when it joins again.
package member

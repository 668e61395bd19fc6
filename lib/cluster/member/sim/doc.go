// Package sim is a deterministic discrete-event simulation of hf's write
// dissemination for fleets of thousands of members: a virtual clock, a
// seeded random source, no goroutines and no sleeping. It drives the same
// decisions the members make over memberlist (package member's
// internal/fanout): the writer's targets (Broadcast), relaying only what
// was new (Relay), going around a member that cannot be reached (Bypass),
// and the coalescing per-peer queue with one message in flight per peer.
//
// What is modelled, and what is not:
//
//   - a link's one-way latency is drawn per message, uniformly from
//     [LatencyMin, LatencyMax] (default 0.2-2 ms, a LAN); a lost segment
//     (Loss) delays a message by RTO, as TCP would, it is never dropped;
//   - each member has one CPU: every send costs SendCost plus its bytes at
//     Bandwidth, every received message ApplyCost, one after the other, so
//     a member that sends 999 times per write is slower than one that sends
//     3 times;
//   - the writer's pusher folds what is written within CoalesceWindow into
//     one batch, like member's pushLoop;
//   - a send to a dead member fails after DeadDial (a refused connection:
//     one round trip by default) and the sender bypasses it and asks for an
//     anti-entropy round with it; a member keeps the dead one in its view
//     until it learns of the death, DetectAfter plus up to DetectSpread
//     after it (memberlist gossips the death, so members learn it at
//     different times), and from then on keeps it in its trees as down
//     (member's table.view), sending around it at once;
//   - anti-entropy: every member starts a round every AEInterval (random
//     phase) with a random peer of its view, plus a round with each peer
//     whose push failed. A round is modelled as the exchange hf makes
//     (digest request, response, records the responder lacks, pull request
//     and answer, each one message after a one-way latency) over the two
//     members' current holdings, leaving writes younger than AEGrace alone
//     in periodic rounds. Its cost is counted in rounds and messages, with
//     bytes estimated from hf's sizes (the 8 KB digest request of 1,024
//     bucket hashes, ~40 B per digest entry, the records): not encoded.
//
// Records only ever reach a member by push or by anti-entropy; the store
// is a set per member (a record held is not new, as the store's version
// check decides).
package sim

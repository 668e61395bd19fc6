// Package cluster is the node loop of hf-node: what a node does in the
// cluster, as four reconcilers over an indexed cache of the store, and the
// asks one node decides for the cluster.
//
// # One writer per facet
//
// Every object is stored and replicated as facets (types.Facet), each with
// exactly one writer role and a version of its own; copies merge facet by
// facet (store.Apply), so no write from an older copy undoes another
// writer's field. The writers:
//
//	object        facet        writer
//	------------  -----------  ---------------------------------------------
//	any           spec         the API node that took the request, or the
//	                           creator (a set's owner, a session's owner)
//	MachineSet,   status       the rendezvous owner of set/<name>,
//	Event,Session              event/<name>, session/<name>
//	Node          report       the node itself
//	              maintenance  the API (drain)
//	              liveness     the owner of node/<name>: the down verdict
//	Machine       owner        its node (spec and status)
//	              reap         a set's or event's owner: a request
//	              lost         the owner of node/<its node>: the verdict
//	MachineClaim  election     its elector        } epoch = round: round r+1
//	              binding      the node of round r } wins over round r
//	              end          a set's or event's owner: a request
//
// A verdict about someone else's record (a node is Down, a machine is Lost)
// or a request (reap a machine, end a claim) is written by whoever decides,
// into a facet of its own, and carried out by the owner. Verdicts about a
// node this node cannot reach need a majority of the known members
// (view.quorum): a node cut off alone keeps serving what it holds and new
// claims sent to it, but never takes over the others' machines. Its records
// then still show the others as they last reported, Up; what it sees of
// them is its own view, given to the API's answers and never stored
// (Node.NodeView: the Reachable condition); it moves with membership, not
// with records, and Node.NodeViewChanged says when, for the API's event
// streams to send it again. A node that finds the down
// verdict on itself while it runs answers with a report at once, which
// ends the verdict; at most once per ReportInterval (reporter.answer), as
// a majority that cannot reach it but gets its reports passes a new
// verdict on each.
//
// # The election
//
//	claim created (spec)          elector E = rendezvous(claim, live members)
//	  |                           (or the owner of its OnDemand set / capped
//	  v                            environment, who counts what is under way)
//	E: scheduler.DecideClaim -> route: warm machine? take : elect
//	E --Offer(claim, r)--> candidate C            (direct reliable send)
//	C: under the ledger lock: fits free - reserved?
//	     yes: persist Machine(Pending, claim, r) -> Accept
//	     no : Decline(reason, fresh capacity) -> E offers round r+1 elsewhere
//	E on Accept: election facet {round r, node C}
//	C: scheduler.DecideMachine per machine of the claim:
//	     Allocate -> driver -> Machine Running -> Bind: binding {r, Bound, m}
//	     failure  -> binding {r, Released, why}  -> E elects round r+1
//	     claim at a later round / bound elsewhere / failed / ended / gone
//	              -> Release (deallocate, delete the record): fencing
//	deadline (bind timeout) passed: E fails the claim (election failed);
//	  C gives back a round it could not allocate in time.
//
//	warm machine M on host H:
//	E --Take(claim, M, r)--> H: M unclaimed? machine.claim = claim,
//	                            binding {r, Bound, M} -> Accept
//
//	node X gone (memberlist):  owner of node/X, with a majority:
//	  after DownAfter : liveness {down, report version seen}
//	  X, running, sees it: report at once (once per ReportInterval)
//	  after LostGrace : lost {verdict, owner version seen} on X's machines
//	  E sees its bound claim's machine lost -> election {r+1} (Rebind) or
//	  {r+1, failed} (onNodeLoss Fail); X, if it comes back, finds its claims
//	  at a later round and releases its machines.
//
// # Asks: one node decides for the cluster
//
// What must not be decided on two nodes at once (the API's changes that
// may take the last admin away) is decided by the owner of a key, the
// rendezvous owner among the live members, on its own store (asks.go):
//
//	API node A: Ask(key, body)      owner O = rendezvous(key, live members)
//	  O == A: decide here
//	A --Ask(key, n, body)--> O        (direct reliable send, JSON)
//	O: owns key as it sees it? reaches a majority of the nodes it knows?
//	   owned key for OwnerSettle (or knows nobody else)?
//	     yes: handler(body) -> Answer(n, body)    (the handler serializes)
//	     no : Answer(n, why not)  -> A: ErrNotDecided (nothing was done)
//	no answer within AskTimeout -> A: ErrNoAnswer (it may have been done)
//
// O's earlier decisions are in its store before it takes the next, so two
// asks made on two nodes within a millisecond are decided one after the
// other. A new owner waits OwnerSettle for the last owner's writes to reach
// it, and the smaller side of a partition decides nothing; what is left is
// an owner that dies before its write left it.
//
// # The reconcilers
//
//	store --watch--> cache (indexes) --changes--> acceptor | elector | duties
//	                                                       reporter <- capacity
//
// Each owns its state and works per key (internal/workqueue), level
// triggered, asking to run again when a time limit trips; nothing lists a
// kind on a timer, so an idle node costs (almost) nothing whatever it holds.
// Node is the wiring.
//
// Writes wait for the store's group commit, so a reconciler that wrote one
// key at a time would get one commit per key: the acceptor reconciles up to
// acceptorWorkers keys side by side (never one key twice) and reserves the
// offers of one inbox batch side by side (each claim's in order); the elector,
// one goroutine over its pure state, writes the acceptances of one pass
// together at its end, before any other write of its own.
package cluster

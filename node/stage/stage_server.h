// StageServer: a node's micro-batch engine (docs/DESIGN.md §1, §4, §5). It
// admits frames from the transport within the node's memory slots, runs one
// compute task at a time (backward before forward), sends each result to
// the next hop of the route carried in the frame header, keeps a
// micro-batch's activations only until its backward, and repairs routes
// whose next hop fails (through an injected RouteRepairer, route_repair.h).
// At a data node it also starts the micro-batches the driver injects and
// reports their loss and end to an OriginListener.
//
//   StageServer server(transport, &clock, &view, {{0, compute0.get()}}, options);
//   server.SetOriginListener(&driver);
//   server.Attach();                                  // takes the transport handlers
//   server.Inject(iteration, mb, route, std::move(batch), /*priority=*/3);
//   ... OnTail(loss) ... OnFinished(OK or why it was dropped) ...
//   server.BeginIteration(iteration + 1);             // after replica averaging
//
// Note [Route hops]
// header.route = [origin (stage 0), v1, ..., v_{P-1}]; hop_index h names the
// hop that must process the frame. Forward frames: h in 1..P-1 run
// route[h].stage's Forward; the result goes to h+1, or to the origin with
// hop_index 0 after the last hop (h == 0 on a forward frame means "the
// tail": loss at the origin). Backward frames: the tail's gradient goes to
// hop P-1; hop h > 0 runs Backward and sends to h-1; hop 0 is the origin's
// Backward, which ends the micro-batch. A node that repairs the route
// rewrites header.route for the hops after it, so every later frame (and
// the whole backward) carries the repaired route. Consecutive hops on this
// node are delivered locally, without the transport.
//
// Note [Signed route prefix]: in a signing swarm (Note [Checkable
// evidence] in node/compute/evidence.h) the route a forward frame carries
// says who computed what before the receiver, so it decides whom evidence
// and credit name. The origin's commitment fixes route[0..1] and the
// length; every other hop's name was the sender's word. So each producer X
// at hop x of a route of n hops signs OutputCommitment.route_sha256 =
// RouteDigest(route, min(x + 2, n)) (SignedRouteDigest): the route as it
// forwards it up to and including the hop it sends its output to,
// route[x + 1], or, from the last hop, whose output goes back to the
// origin (route[0]), the whole route. A forward frame from hop x carries
// the commitments of every hop before it: X's (commitment), the hop
// before's (input_commitment) and hops 1..x-2's (earlier_commitments: each
// producer passes on those it got and the input commitment it got, in hop
// order, unchanged). The receiver at hop k (k = n for a tail at the
// origin) refuses (INVALID_ARGUMENT, counted in commitments_refused) a
// frame in which a hop j in 1..k-1 that must sign (require_commitments, or
// its record says it signs) has none, or a carried commitment does not
// verify under route[j]'s key, names another micro-batch, hop or node, or
// signs a prefix other than the frame's route[0..min(j + 1, n - 1)].
// What is bound: an honest node W's name stands at hop j of a route a
// receiver accepts only where W itself signed that prefix for this
// micro-batch, so nothing before it differs from what W signed and the
// hop after it is the node W sent its output to; the origin's commitment
// does the same for hop 1. No run of hostile hops (nor one node on
// consecutive hops, delivered locally) can rename an honest earlier hop,
// since none can sign for it and dropping its commitment is refused. Nor
// can they claim an honest hop X's work (at hop x) under a name of their
// own, by putting an accomplice at hop x with the accomplice's own
// commitment to X's input and output, or by dropping X and standing at
// hop x themselves, wherever one of X's neighbours is honest: an honest
// hop before X (or an honest origin, for x = 1) signed X at hop x, and an
// honest hop after X signed X at hop x too and binds X's commitment as
// its input commitment. What still is not bound: an honest X whose hop
// before (or origin, for x = 1) and hop after are both hostile (one
// hostile node on both sides included) can lose its visit's credit to a
// name of theirs, since the hop before can sign a second prefix naming the
// substitute at hop x (a second signature for one visit with another next
// hop is no proof of a lie: honest repairs make them too) and the hop
// after holds X's output to present under the substitute's commitment.
// Hostile hops with nothing honest between them only name one another,
// which they could do anyway; a hostile hop after X may still drop the
// micro-batch or pass X's output off as its own stage's (a false output,
// for verified compute to catch), but not move X's name. Evidence never
// reads route_sha256 (pieces convict on signed hashes, Note [Checkable
// evidence]), so none of this changes a verdict.
// Why every commitment and not one chained digest (each commitment
// already binds the one before, input_commitment_sha256): a digest binds
// what its signer chose to fold in, and a hostile signer folds in what it
// likes, so a chain checked from its last link binds nothing before the
// last hostile hop; only the honest hop's own signature binds its name,
// and Ed25519 signatures do not aggregate, so one verify per earlier hop
// is the floor. The commitments carry exactly that signature: passing
// them on costs no new signing. Bounded: a frame with more earlier
// commitments than hops before its producer is refused on the count
// before anything is hashed or verified; a producer that does not check
// (no public_key_of) passes on none beyond what an honest chain holds.
// A prefix, not the whole route: repairs keep route[0..holder] and rewrite
// what follows (CheckRepair), so every commitment a frame carries from a
// hop before the holder (each signs hops up to the holder at most) stays
// true for every later frame of the micro-batch, where a whole-route
// digest would break at the first repair; the hops past the receiver have
// computed nothing yet, so nobody's credit rests on them. The holder's own
// commitment names its next hop, which its repair (another replica,
// another completion, a skip) may change: Repair re-signs it for the
// repaired route whenever the signed prefix differs (ResignForRepair,
// counted in commitments_resigned; a skip straight to the tail signs the
// whole, shorter route), as the origin re-signs its own at holder 0; the
// re-signed commitment binds the same input and output. Cost: the 32-byte
// field in each commitment, one prefix hash per commitment signed or
// checked, one more signature per repair that changes a next hop, and at
// hop k k-1 commitments (~290 bytes each) and k-1 verifies per frame, so a
// micro-batch's forward path of P hops checks about P^2/2 in all (figures
// in tests/adversarial/README.md, "The signed route prefix"). Nothing on
// the backward path reads a commitment (CheckCommitment runs on forwards;
// abort notices are judged by their sender, Note [Who may abort] in
// stage_server.cc), so backward frames and abort notices go without them
// (StripForwardEvidence). Receivers require the prefix, the earlier
// commitments and then the next hop in the prefix, so PROTOCOL_VERSION_3,
// PROTOCOL_VERSION_4 and PROTOCOL_VERSION_5 keep older builds out at the
// handshake rather than frame by frame.
//
// Note [Queue order]: waiting tasks are served as scheduler/evaluator.h
// serves them, so plans run on the node as they were scored: the lowest
// header.priority first (the plan's route priority, carried by every frame
// of the MB); among equal priorities a backward or tail before a forward,
// then arrival order. A forward also needs a free memory slot. Note
// [Dispatch at the end of the instant] (stage_server.cc) completes the
// match. What the order changed on the simulator's real-node backend is in
// node/stage/README.md.
//
// Note [Hop failures]: a forward frame whose send fails with a
// retry-elsewhere ack (UNAVAILABLE: stream broke or peer gone;
// DEADLINE_EXCEEDED: no ack within the adaptive deadline, Note [Hop
// deadline] in hop_stats.h; RESOURCE_EXHAUSTED: no slot there), or whose
// next hop the view already calls dead (not sent, unless no re-route
// exists: a view verdict can be wrong), is re-routed at once by this node with options.repairer (another replica, a different
// completion, or a skip if allow_skip), at most max_reroutes times per MB.
// Otherwise the MB is dropped here and the hops before are told (Note
// [Abort notices]). Every re-route and drop is counted by reason in
// StageServerStats and logged. After a SIGKILL of a replica the streams
// break at once (UNAVAILABLE) and later MBs skip the dead peer without
// sending ("peer_dead"); how fast, measured: node/stage/README.md.
//
// Admission: a forward frame needs a memory slot to run (a compute task
// that runs out of memory lowers the slots, Note [Memory slots] in
// stage_server.cc); up to
// max_queued_forwards more may wait for one; beyond that it is refused with
// RESOURCE_EXHAUSTED (the sender tries another replica). A slot is taken
// when the forward starts and freed by the MB's backward (or its drop).
// Backward and tail frames of MBs held here are always admitted. Refused
// with a clear status (and logged): a stage this node does not host
// (INVALID_ARGUMENT), a duplicate MB (ALREADY_EXISTS), a backward or tail
// for an unknown MB (NOT_FOUND), a past iteration (FAILED_PRECONDITION).
//
// Note [Newcomer micro-batches]: in an open swarm a data node on probation
// (Note [Newcomer probation] in node/daemon/gossip/training_members.h) is
// routed like any other, and its micro-batches take this server's slots
// and queue until their backward. The per-peer quota bounds its frames per
// second, not how many of its micro-batches sit here, so fresh identities
// could fill a stage host's admission and starve the trusted data nodes.
// Micro-batches whose origin is on probation therefore hold at most
// newcomer_in_flight entries here, all such origins together (the daemons:
// half of memory_slots + max_queued_forwards); beyond it a forward is
// refused with RESOURCE_EXHAUSTED (its sender re-routes it) and counted
// in frames_newcomer_capped.
//
// Note [Admitted iterations]: a frame of a later iteration waits for
// BeginIteration in a queue of its own, bounded like one iteration's
// admission (memory_slots + max_queued_forwards), and never counts against
// the current iteration's slots or Inject. When that queue is full, a
// frame of a nearer iteration displaces the farthest one waiting (counted
// in frames_displaced); otherwise it is refused with RESOURCE_EXHAUSTED.
// Far-future frames from a stranger once held every slot for good; later
// iterations cannot be refused outright, because a joiner's server waits at
// an old iteration until its entry (Note [Entry iteration]) and relays may
// trail the data nodes by more than one.
//
// Note [Behind the swarm]: a forward more than max_iteration_lead
// iterations ahead of this server is refused with RESOURCE_EXHAUSTED
// ("this node is behind ..."), so its sender re-routes it at once to a
// replica that is not behind (re-route reason "behind"). Such a node is
// one that came back after its peers declared it DEAD and went on without
// it (a SIGSTOP past the failure detector): its trainer is stuck iterations
// back, and every frame it admitted into the later queue waited there until
// its origin's MB deadline; with the planner still routing through it
// (gossip calls it alive again), whole iterations lost every micro-batch.
// Nothing marks it dead (a busy node is not a dead one): once it catches up
// (re-sync, BeginIteration) its frames are admitted again. Legitimate
// trailing (a joiner at entry - 1, a relay still averaging) stays within
// the lead.
//
// Verified compute: a forward frame with header.verify is answered with a
// sketch and takes no part in training, and sketch frames are checked
// against the outputs of members on probation (Note [Verify-only frames] in
// stage_server_verify.cc; StageServerStats::checks). With verify_rate > 0
// the server also samples, as the hop before a member on probation, which
// of its forward frames get such a check (Note [Sending checks] in
// stage_server_verify_send.cc).
//
// Thread rule: thread-safe. Handlers run on transport / compute threads;
// no lock is held while calling the transport, a StageCompute or the
// listener. The transport, clock, view and computes must outlive the server;
// call Detach() (or destroy the transport) before destroying it.
#ifndef SKIPSWARM_NODE_STAGE_STAGE_SERVER_H_
#define SKIPSWARM_NODE_STAGE_STAGE_SERVER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "identity/identity.h"
#include "node/compute/evidence.h"
#include "node/compute/sketch_wire.h"
#include "node/compute/stage_compute.h"
#include "node/stage/hop_stats.h"
#include "node/stage/output_checks.h"
#include "node/stage/route_repair.h"
#include "node/stage/swarm_view.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

// Told about micro-batches this node originated. Called with no lock held,
// from transport or compute threads.
class OriginListener {
 public:
  virtual ~OriginListener() = default;
  virtual void OnTail(uint64_t iteration, uint64_t mb, double loss) = 0;
  // Just before OnTail: the stages the micro-batch's forward visited, in
  // order, stage 0 left out (its route as it reached the tail, repairs
  // included; Note [Route shapes] in node/train/data_node_driver.h).
  virtual void OnRoute(uint64_t iteration, uint64_t mb, const std::vector<int>& stages) {
    (void)iteration;
    (void)mb;
    (void)stages;
  }
  // OK: the backward reached the origin. Otherwise the MB was dropped here
  // (the status says why) and its gradient contribution is partial.
  virtual void OnFinished(uint64_t iteration, uint64_t mb, const absl::Status& status) = 0;
};

// Note [Stopping refusals]: a forward refused by a stopping node (StopAfter:
// "this node is stopping after iteration N") that no other replica could
// take is dropped by the hop before with a machine-readable cause, which
// its abort notices carry to the origin (FrameHeader.abort_cause): the
// origin's OnFinished status then names the stopping node and its last
// iteration (StoppingCauseOf). The data node does not count such a
// micro-batch as dropped or trained: it re-runs it under a fresh id
// through another replica, or pauses for the stage when the stopping node
// was its last replica (Note [Stopping drops] in
// node/train/data_node_driver.h). A fresh id because every hop refuses a
// second frame of the same (origin, iteration, micro-batch, hop).
//
// Any relay between the refusal and the origin passes the cause on and can
// write one naming any node, so the cause is a claim: the origin acts on
// it only where `node` said it itself or its own signed record confirms it
// (Note [Confirmed stopping] in node/train/data_node_driver.h).
struct StoppingCause {
  PeerId node;
  uint64_t stop_after = 0;  // the last iteration `node` trains, as claimed
  // The peer whose abort notice brought the cause to the origin; zero when
  // the origin's own send was refused (the cause then names the peer that
  // refused it, in its own answer).
  PeerId delivered_by{};
};
// The cause an OnFinished status carries, if it is a stopping refusal's.
std::optional<StoppingCause> StoppingCauseOf(const absl::Status& status);

struct StageServerOptions {
  int memory_slots = 4;
  int max_queued_forwards = 8;
  // Route repairs one MB may undergo (header.reroutes) before it is dropped.
  int max_reroutes = 4;
  // Forwards of iterations beyond current + this are refused (Note [Behind
  // the swarm]).
  int max_iteration_lead = 4;
  // Repairs may shorten the route (skip stages) when no replica is left.
  bool allow_skip = false;
  // Chooses repaired routes (Note [Hop failures]); borrowed, must outlive
  // the server. Null: a ReplicaRouteRepairer of the server's own.
  RouteRepairer* repairer = nullptr;
  // Ack deadline written into every frame (header.deadline_ms): the first
  // frames to a peer and the cap use hop_deadline, later ones adapt to the
  // peer's observed ack times (Note [Hop deadline]), never below
  // min_hop_deadline.
  absl::Duration hop_deadline = absl::Seconds(10);
  absl::Duration min_hop_deadline = absl::Seconds(1);
  double hop_deadline_factor = 4.0;
  std::string swarm_id;
  // Note [Newcomer micro-batches]: whether a micro-batch's origin is a
  // member on probation (thread-safe; called without the server's lock),
  // and how many such micro-batches, of all such origins together, this
  // server holds at once (admitted, queued or waiting for a later
  // iteration); 0 or unset: no cap.
  std::function<bool(const PeerId&)> origin_on_probation;
  int newcomer_in_flight = 0;
  // Verified compute (Note [Verify-only frames] in stage_server_verify.cc).
  // As Y: verify-only forwards waiting or running here, all senders
  // together and from one sender; beyond, refused RESOURCE_EXHAUSTED.
  int max_verify_queued = 2;
  int max_verify_per_sender = 1;
  // As the hop after X: whose outputs are kept in case a sketch follows
  // (members on probation; thread-safe, called without the server's lock),
  // how answers are bounded and judged. Without a judge no output is kept
  // and sketch frames are refused.
  std::function<bool(const PeerId&)> member_on_probation;
  OutputChecksOptions output_checks;
  SketchLimits sketch_limits;
  // Told each verdict judged here: the checked replica X and whether its
  // output matched Y's sketch (thread-safe; called without the server's
  // lock, on the thread that completed the pair). Optional.
  std::function<void(const PeerId& checked, bool match)> on_check_verdict;
  // Told each producer a refused frame proved signed a false input (Note
  // [Evidence bans] in evidence_bans.h; a proof, whatever its trust:
  // condemn it at once). Unset: on_check_verdict is told a mismatch
  // instead. Thread-safe; called without the server's lock.
  std::function<void(const PeerId& producer)> on_false_input;
  // Note [Trusted disputes] (verify_trust.h): as the hop after a trusted X,
  // whether to keep its outputs for checks too (in their own OutputChecks,
  // so they never push a newcomer's out), and each such verdict with the
  // replica Y whose sketch it was judged against. Unset: trusted members'
  // outputs are not kept (their checks expire unjudged).
  std::function<void(const PeerId& checked, const PeerId& verifier, bool match)>
      on_trusted_verdict;
  // As the hop before X (Note [Verify sampling] in verify_pick.h; Note
  // [Sending checks] in stage_server_verify_send.cc): the share of forward
  // frames to a next hop on probation that also go, verify-only, to a
  // trusted replica of its stage. 0 (the default): no checks are sent, as
  // before; node/stage/README.md has what a check costs. `verify_seed`
  // seeds the coin and the per-check seeds.
  double verify_rate = 0;
  // The same for a next hop that is trusted (Note [Trusted disputes]);
  // 0: trusted members are never checked.
  double verify_trusted_rate = 0;
  uint64_t verify_seed = 1;
  // Note [Checkable evidence] (node/compute/evidence.h). As X: the key that
  // signs an OutputCommitment on every forward frame this server produces
  // at a hop > 0 (borrowed, must outlive the server; its id must be this
  // node's). Null: no commitment is sent. As the hop after X: the raw
  // Ed25519 key of a member (from its signed record; thread-safe, called
  // without the server's lock); set, every commitment that arrives is
  // checked against it, and a frame from a hop > 0 without one is refused
  // when `require_commitments` (older peers' frames are accepted iff it is
  // false). Unset: commitments are neither checked nor required.
  // `commitments_required_from` (optional, with `public_key_of`; thread-safe,
  // called without the server's lock): a frame without one is refused also
  // when it names the frame's producer, e.g. a member whose record says it
  // signs (NodeRecord.sign_frames), so an older peer mixed in still trains.
  // A swarm whose manifest says every member signs sets
  // `require_commitments` instead ("Signed swarms" in the note).
  const identity::Identity* signer = nullptr;
  std::function<std::optional<std::string>(const PeerId&)> public_key_of;
  bool require_commitments = false;
  std::function<bool(const PeerId&)> commitments_required_from;
};

struct StageServerStats {
  int64_t frames_admitted = 0;
  // Waiting frames of a far iteration displaced by nearer ones (Note
  // [Admitted iterations]).
  int64_t frames_displaced = 0;
  int64_t frames_behind = 0;  // refused: too far ahead (Note [Behind the swarm])
  // Refused: the newcomers' share of admission is taken (Note [Newcomer
  // micro-batches]).
  int64_t frames_newcomer_capped = 0;
  int64_t frames_paused = 0;  // refused: forwards after our pause (SetPaused)
  // Refused or dropped here: forwards of iterations after our stop (StopAfter).
  int64_t frames_stopping = 0;
  int64_t frames_refused = 0;
  int64_t forwards = 0;
  int64_t backwards = 0;
  int64_t rerouted = 0;
  int64_t dropped = 0;
  int64_t bytes_sent = 0;
  int slots_in_use = 0;
  // The admission limit now: StageServerOptions::memory_slots, lowered by
  // each out-of-memory task (Note [Memory slots] in stage_server.cc).
  int memory_slots = 0;
  int64_t out_of_memory = 0;  // compute tasks that failed for lack of memory
  int queued = 0;
  // Re-routes by cause: "unavailable", "deadline", "resource_exhausted",
  // "behind" (Note [Behind the swarm]), "paused" (SetPaused), "stopping" (StopAfter),
  // "peer_dead". Drops (MB visits given up here) by cause: "next_hop_died",
  // "unrepairable", "backward_hop_lost", "aborted_downstream",
  // "compute_failed", "out_of_memory", "mb_deadline", "iteration_ended", "bad_route",
  // "released" (ReleaseAll), "stopping" (StopAfter).
  std::map<std::string, int64_t> rerouted_by_reason;
  std::map<std::string, int64_t> dropped_by_reason;
  // Clock time (SteadyNow) of the first re-route, infinite if none.
  absl::Duration first_reroute_at = absl::InfiniteDuration();
  HopHistogram hop_latency;  // send -> admission ack, successful hops
  std::map<PeerId, PeerTraffic> traffic;  // payload bytes by peer
  // Verified compute: verify-only forwards answered with a sketch, refused
  // (over a cap, another iteration, a stage not hosted) and failed here as
  // Y; sketch frames refused here (malformed, not addressed to this hop)
  // as the hop after; and the checks judged here, per member.
  int64_t verify_answered = 0;
  int64_t verify_refused = 0;
  int64_t verify_failed = 0;
  int64_t sketch_frames_refused = 0;
  // Note [Checkable evidence]: commitments signed here as X; checked here
  // as the hop after (signature and payload hash verified: the frame went
  // on to admission); frames refused here as the hop after for a
  // commitment missing (when required), not matching the frame, or not
  // verifying.
  int64_t commitments_signed = 0;
  // Of ours, re-signed for a repair of ours that changed our next hop
  // (Note [Signed route prefix]); not in commitments_signed.
  int64_t commitments_resigned = 0;
  int64_t commitments_checked = 0;
  int64_t commitments_refused = 0;
  // Of those refused, frames whose producer signed an input hash other
  // than the bound hop before's signed output, kept as evidence against it
  // (Note [Evidence bans]).
  int64_t false_inputs_kept = 0;
  // As the hop before X: verify-only copies sent (and their payload
  // bytes), and those the verifier refused or never acknowledged.
  int64_t verify_sent = 0;
  int64_t verify_bytes_sent = 0;
  int64_t verify_send_failed = 0;
  OutputCheckStats checks;          // of members on probation
  OutputCheckStats trusted_checks;  // of trusted members (Note [Trusted disputes])
};

class StageServer {
 public:
  // `stages`: the computes of the stages this node hosts, by stage id.
  StageServer(Transport* transport, common::Clock* clock, SwarmView* view,
              std::map<int, StageCompute*> stages, StageServerOptions options);
  ~StageServer();

  // Installs the frame and peer-failure handlers on the transport.
  void Attach();
  // Removes them (frames are then refused UNAVAILABLE by the transport).
  void Detach();
  // Replaces the origin listener (null: none) and waits for calls to the
  // previous one in progress on other threads, so its owner may destroy it
  // next. Not from inside a listener call.
  void SetOriginListener(OriginListener* listener);

  PeerId self() const { return self_; }
  uint64_t iteration() const;

  // Data node: starts micro-batch `mb` of `iteration` along `route`
  // (route[0] must be this node with stage 0). RESOURCE_EXHAUSTED when the
  // admission limit is reached (inject again after an OnFinished);
  // FAILED_PRECONDITION after ReleaseAll. `priority`: the plan's (Note
  // [Queue order]).
  absl::Status Inject(uint64_t iteration, uint64_t mb, const std::vector<RouteHop>& route,
                      MicroBatchData data, int priority = 0);
  // Whether an Inject would be admitted now.
  bool CanInject() const;

  // Drops an MB this node originated (deadline passed): frees its state
  // here; later frames for it are refused. No OnFinished is sent for it.
  void Abandon(uint64_t iteration, uint64_t mb);

  // Drops every micro-batch visit held here, as an iteration end does, and
  // tells the hop before each visit of another origin (Note [Relay drops]
  // in stage_server.cc); this node's own micro-batches end with ABORTED.
  // For an owner that replaces or stops this server while the swarm goes on
  // (a re-entry, a stage move, a stop), so the origins learn at once instead
  // of at their MB deadlines. Not for a crash. Frames admitted afterwards
  // are served as usual, but Inject fails from then on: a data node's
  // driver would answer each ABORTED by injecting its next waiting
  // micro-batch into the server being retired (the relays would hold it
  // orphaned until its iteration ends); refused, the driver ends every
  // waiting one at once and its report counts them all
  // (node/train/data_node_driver_test.cc). It discards the released
  // visits' state in the computes by this server's local ids, so call it
  // before another server uses the same StageCompute objects (the daemon's
  // stacks share them across a stage move or re-entry; local ids are per
  // server).
  void ReleaseAll();

  // Iteration boundary (after the barrier, docs/DESIGN.md §1): EndIteration
  // refuses further frames of `iteration` and earlier, drops what is left of
  // their MBs (counted; these are lost MBs), pauses dispatching, and runs
  // `quiesced` (never inline) once no compute task is running, so the
  // gradients can be taken and the replicas stepped. BeginIteration then
  // resumes with the frames of `iteration` that were waiting. BeginIteration
  // alone does both (without waiting) and may skip iterations.
  void EndIteration(uint64_t iteration, absl::AnyInvocable<void()> quiesced);
  void BeginIteration(uint64_t iteration);

  // A volunteer's pause (Note [Paused members] in
  // node/daemon/gossip/training_members.h): while paused, forwards of
  // iterations after the one it was paused in are refused with
  // RESOURCE_EXHAUSTED ("this node is paused"), so a sender that planned
  // before our record reached it re-routes at once (re-route reason
  // "paused") instead of waiting for a deadline; frames of that iteration
  // and earlier (in flight when we paused) and every backward are served.
  void SetPaused(bool paused);
  bool paused() const;

  // Note [Stopping server]: a stop or drain fixed `last` as the last
  // iteration this node trains (NodeTrainer::Stop). From now on every
  // forward of a later iteration is refused with RESOURCE_EXHAUSTED ("this
  // node is stopping after iteration N"), which the hop before re-routes at
  // once (re-route reason "stopping") or, with no other replica, drops and
  // reports to the origin (no dead verdict: the node is still serving
  // `last`); the visits of later iterations already held here (frames that
  // waited for their iteration) are dropped and the hops before told, as
  // at an iteration end. `last` and earlier are served as before. The
  // earliest `last` given stays. The gossip daemon calls it on every stop,
  // a stage's last replica's included (Note [Stopping] in
  // node/daemon/gossip/gossip_daemon_run.cc): with no other replica the
  // micro-batch's origin re-runs it or pauses (Note [Stopping refusals]).
  void StopAfter(uint64_t last);

  // MBs of iterations before `iteration` still held here.
  int HeldBefore(uint64_t iteration) const;

  StageServerStats stats() const;
  // Note [Checkable evidence]: the signed mismatches of `member` (as X)
  // judged here, newcomer checks then trusted ones, each bounded by
  // OutputChecksOptions.
  std::vector<Evidence> EvidenceAgainst(const PeerId& member) const;

 private:
  struct MbKey;
  struct Entry;
  struct Task;
  class Impl;
  std::shared_ptr<Impl> impl_;
  PeerId self_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_STAGE_SERVER_H_

// Private to node/stage:stage_server: the StageServer's state and its
// Impl class, shared by stage_server.cc (admission, dispatch, compute
// results, iteration boundaries) and stage_server_send.cc (sending frames,
// acks, route repair, drops). Not a public header.
#ifndef SKIPSWARM_NODE_STAGE_STAGE_SERVER_IMPL_H_
#define SKIPSWARM_NODE_STAGE_STAGE_SERVER_IMPL_H_

#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/lifetime_guard.h"
#include "common/random.h"
#include "node/compute/evidence.h"
#include "node/stage/stage_server.h"
#include "node/transport/frame.h"

namespace skipswarm::node {

// Identifies one visit of one micro-batch at this node (Note [Route hops]):
// the same MB may visit twice when this node hosts two of its stages.
struct StageServer::MbKey {
  std::string origin;
  uint64_t iteration = 0;
  uint64_t mb = 0;
  uint32_t hop = 0;

  static MbKey Of(const proto::FrameHeader& h) {
    return {h.origin(), h.iteration(), h.mb_id(), h.hop_index()};
  }
  friend bool operator==(const MbKey& a, const MbKey& b) {
    return a.origin == b.origin && a.iteration == b.iteration && a.mb == b.mb && a.hop == b.hop;
  }
  template <typename H>
  friend H AbslHashValue(H h, const MbKey& k) {
    return H::combine(std::move(h), k.origin, k.iteration, k.mb, k.hop);
  }
};

struct StageServer::Entry {
  uint64_t local_id = 0;  // the StageCompute's micro-batch id
  int stage = 0;
  bool holds_slot = false;
  bool forward_done = false;
  bool tail_done = false;  // origin only
  bool newcomer = false;   // its origin is on probation (Note [Newcomer micro-batches])
  // The next hop that admitted this visit's forward output (Note [Lost
  // with a neighbour]); zero until acknowledged.
  PeerId next_admitted;
  // For abort notices: the frame as admitted, then its route as the next
  // hop admitted it (repairs included); no tensor.
  proto::FrameHeader header;

  static Entry Make(uint64_t local_id, int stage) {
    Entry e;
    e.local_id = local_id;
    e.stage = stage;
    return e;
  }
};

struct StageServer::Task {
  enum Kind { kStart, kForward, kTail, kBackward, kVerify } kind = kForward;
  proto::FrameHeader header;  // hop_index = the hop this task runs
  absl::Cord payload;
  MicroBatchData data;  // kStart
  uint64_t local_id = 0;  // set when it runs
  PeerId from;            // kVerify: the sender, for its per-sender share
  // kForward with options_.signer: SHA-256 of the input payload, for the
  // output's commitment (Note [Checkable evidence]).
  std::string input_sha256;
};

class StageServer::Impl : public std::enable_shared_from_this<StageServer::Impl> {
 public:
  Impl(Transport* transport, common::Clock* clock, SwarmView* view,
       std::map<int, StageCompute*> stages, StageServerOptions options)
      : transport_(transport),
        clock_(clock),
        view_(view),
        stages_(std::move(stages)),
        options_(std::move(options)),
        self_(transport->self()),
        self_bytes_(self_.Bytes()),
        repairer_(options_.repairer != nullptr ? options_.repairer : &default_repairer_),
        hops_(HopStatsOptions{.initial = options_.hop_deadline,
                              .min = std::min(options_.min_hop_deadline, options_.hop_deadline),
                              .factor = options_.hop_deadline_factor}) {}

  // `displaced`: set to the header of a waiting frame this admission
  // displaced (Note [Admitted iterations]); its sender is told.
  absl::Status Admit(const Frame& frame, bool* runnable,
                     std::optional<proto::FrameHeader>* displaced);
  // Admit, or handle an abort notice (Note [Abort notices]). `from`: the
  // peer the frame came from (self_ for a local hop).
  absl::Status Receive(const PeerId& from, const Frame& frame, bool* runnable);
  absl::Status HandleAbort(const PeerId& from, const Frame& frame);
  // Note [Who may abort]: whether `from` may end visit `key` held as `e`.
  bool MayAbortLocked(const MbKey& key, const Entry& e, const PeerId& from) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnPeerFailure(const PeerId& peer);
  // Tells hop `hop` (and, through it, every hop before) that the MB is lost.
  void SendAbort(const proto::FrameHeader& header, uint32_t hop, const absl::Status& why);
  // Note [Dispatch at the end of the instant]: a free node picks its next
  // task only after every event of the current instant (frames arriving,
  // tasks ending at the same time) is in, as the evaluator does; so the
  // pick is posted as a zero-delay clock timer (one at a time).
  void MaybeDispatch();
  void DispatchNow();
  // The first waiting task of `q` by Note [Queue order]: lowest priority,
  // then arrival.
  static std::deque<Task>::iterator Best(std::deque<Task>& q) {
    return std::min_element(q.begin(), q.end(), [](const Task& a, const Task& b) {
      return a.header.priority() < b.header.priority();
    });
  }
  void Run(Task task);
  // Verified compute (stage_server_verify.cc, Note [Verify-only frames]).
  absl::Status AdmitVerify(const PeerId& from, const Frame& frame, bool* runnable);
  absl::Status HandleSketch(const PeerId& from, const Frame& frame);
  // A forward or tail frame just admitted: keeps it for a check when the
  // hop before was a member on probation.
  void KeepOutputForCheck(const Frame& frame);
  // As the hop before X: `frame` (hop h's forward, not yet sealed) goes
  // verify-only to a second replica of route[h]'s stage too when the coin
  // says so (Note [Sending checks] in stage_server_verify_send.cc).
  void MaybeSendVerify(const Frame& frame);
  // Note [Checkable evidence] (stage_server_commitment.cc): as X, replaces
  // the received frame's commitment in `next` (this node's forward output
  // of hop `hop`) with this node's own, signed when options_.signer is set
  // and hop > 0 (cleared otherwise); the received one, when it names
  // `input_sha256`, moves to next->header.input_commitment and the new
  // commitment binds it. As the hop after X, checks the
  // commitment of an arriving forward or tail frame (INVALID_ARGUMENT,
  // counted in commitments_refused, when it does not hold).
  void CommitOutput(uint32_t hop, const std::string& input_sha256, Frame* next);
  // Note [Signed route prefix]: after our repair as `holder` rewrote
  // h->route, re-signs our commitment in `h` when the hop it names as the
  // next one changed (counted in commitments_resigned); nothing otherwise.
  void ResignForRepair(uint32_t holder, proto::FrameHeader* h);
  // Signs h's commitment with our key; when the key fails, drops the
  // commitment and the input commitment and returns false.
  bool SignOrDrop(proto::FrameHeader* h);
  absl::Status CheckCommitment(const Frame& frame);
  // The part of CheckCommitment for h.input_commitment, once the producer's
  // own commitment holds: why the frame is refused, or empty. Sets
  // *false_input when the refusal proves the producer signed a false input
  // hash (both signatures verified; Note [Checkable evidence]).
  std::string CheckInputCommitment(const proto::FrameHeader& h, uint32_t producer_hop,
                                   bool* false_input);
  // Note [Signed route prefix]: the part of CheckCommitment for
  // h.earlier_commitments (CheckCommitment bounds their number first):
  // hop order below the producer, every hop before the input commitment's
  // that must sign present, each naming route[its hop] and this
  // micro-batch and signing the route up to the hop after it, then its
  // signature. Why the frame is refused, or empty.
  std::string CheckEarlierCommitments(const proto::FrameHeader& h, uint32_t producer_hop);
  // As producer at `hop`: `h` (the frame we send, still holding the
  // received commitments) passes on the hops before our input
  // commitment's: the received earlier ones and the received input
  // commitment, and, where we sign nothing, `unbound` (the hop before's
  // commitment; null where we sign). None at hops 0 and 1.
  static void PassOnEarlierCommitments(uint32_t hop,
                                       std::optional<proto::OutputCommitment>* unbound,
                                       proto::FrameHeader* h);
  // Keeps the frame's commitments as a piece against its producer
  // (payload-free: CheckFalseInput reads none) and tells on_false_input
  // (unset: on_check_verdict of a mismatch). Not under mu_.
  void KeepFalseInput(const proto::FrameHeader& h, const PeerId& producer);
  // At the origin, for a tail frame `h`: false when its route's hop 1 is not
  // the hop this origin's forward of that micro-batch went to (as the
  // admitted route says; the planned one before the ack). True where this
  // origin holds no such visit (admission decides). Takes mu_.
  bool TailStartsAsSent(const proto::FrameHeader& h) const;
  // At the origin (options_.signer set): sets h->origin_commitment over
  // h's micro-batch, route and `output_sha256` (cleared if signing fails).
  void SignOriginCommitment(std::string output_sha256, proto::FrameHeader* h);
  // The part of CheckCommitment for h.origin_commitment (Note [Checkable
  // evidence]): why the frame is refused, or empty.
  // Its signature, micro-batch, route and (from the origin) payload; once
  // the producer's commitments hold, Hop1InputAsCommitted compares hop 1's
  // signed input hash with the origin's output hash.
  std::string CheckOriginCommitment(const Frame& frame, uint32_t producer_hop);
  std::string Hop1InputAsCommitted(const proto::FrameHeader& h, uint32_t producer_hop);
  // require_commitments, or commitments_required_from names `node_id`.
  bool CommitmentsRequiredFrom(const std::string& node_id) const;
  // Note [Signed route prefix]: clears the commitments a backward frame or
  // abort notice would otherwise carry on from its forward (nothing on the
  // backward path reads them).
  static void StripForwardEvidence(proto::FrameHeader* h);
  // A check judged here, of X = `checked` against `verifier`'s sketch:
  // tells options_.on_check_verdict, or on_trusted_verdict when X is
  // trusted (no lock held).
  void OnVerdict(const PeerId& checked, const PeerId& verifier, bool trusted,
                 const std::optional<model::SketchVerdict>& verdict);
  // Takes the next verify task if one may run now (a free slot).
  bool TakeVerifyLocked(Task* task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunVerify(Task task);
  void OnVerifyDone(Task task, absl::StatusOr<model::OutputSketch> sketch);
  // Iteration `iteration` begins: waiting verify tasks of earlier ones go,
  // and so do pending checks.
  void AdvanceVerifyLocked(uint64_t iteration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A verify-only task from `from` ran or was dropped: its share of the
  // in-flight bounds (total and per sender) is free again.
  void EndVerifyLocked(const PeerId& from) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnForwardDone(Task task, absl::StatusOr<WireTensor> out);
  void OnTailDone(Task task, absl::StatusOr<TailOutput> out);
  void OnBackwardDone(Task task, absl::StatusOr<WireTensor> out);
  // Sends `frame` to route[hop_index] (locally when that is this node).
  // `failed`: peers that already failed this frame.
  void SendFrame(Frame frame, std::vector<PeerId> failed);
  void OnAck(Frame frame, PeerId to, std::vector<PeerId> failed, absl::Status ack);
  // Asks the repairer for a new route after this node's hop (Note [Hop
  // failures]) and rewrites the header. The error says why not.
  absl::Status Repair(proto::FrameHeader& header, const std::vector<PeerId>& failed);
  // Drops the MB visit `key` held here, if any (counted under `reason`);
  // tells the listener when this node is its origin.
  void Drop(const MbKey& key, const absl::Status& why, const char* reason);
  // A compute task of `key` failed: drops it ("compute_failed"), or on
  // an out of memory lowers the memory slots first ("out_of_memory",
  // Note [Memory slots] in stage_server.cc).
  void ComputeFailed(const MbKey& key, const absl::Status& why);
  void DropLocked(const MbKey& key, const absl::Status& why, const char* reason,
                  std::vector<std::pair<StageCompute*, uint64_t>>& discards,
                  std::vector<std::pair<MbKey, absl::Status>>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(const std::vector<std::pair<StageCompute*, uint64_t>>& discards,
              const std::vector<std::pair<MbKey, absl::Status>>& finished);
  void Done() {
    absl::AnyInvocable<void()> quiesced;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      quiesced = std::move(quiesced_);
    }
    if (quiesced) return quiesced();
    MaybeDispatch();
  }
  // Drops every held visit and queued task of an iteration `drop` names, with
  // `why` and `reason` (Note [Relay drops]: the notices for the hops before
  // go to `aborts`, sent once unlocked); returns how many visits it dropped.
  // The one mechanism behind an iteration's end, a release and a stop.
  size_t DropIterationsLocked(absl::FunctionRef<bool(uint64_t iteration)> drop,
                              const absl::Status& why, const char* reason,
                              std::vector<std::pair<StageCompute*, uint64_t>>& discards,
                              std::vector<std::pair<MbKey, absl::Status>>& finished,
                              std::vector<proto::FrameHeader>& aborts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops every visit of iterations before `iteration` and makes it current.
  // `aborts`: the notices to send, once unlocked, to the hops before the
  // dropped visits (Note [Relay drops]).
  void AdvanceLocked(uint64_t iteration,
                     std::vector<std::pair<StageCompute*, uint64_t>>& discards,
                     std::vector<std::pair<MbKey, absl::Status>>& finished,
                     std::vector<proto::FrameHeader>& aborts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the notice for dropping held visit `key` (`entry`) to `aborts`:
  // none for the origin's own visit (hop 0) or a header without its route.
  static void AddRelayAbort(const MbKey& key, const Entry& entry,
                            std::vector<proto::FrameHeader>& aborts) {
    if (key.hop == 0 || entry.header.route_size() <= static_cast<int>(key.hop)) return;
    aborts.push_back(entry.header);
    aborts.back().set_hop_index(key.hop);
  }
  // Tells the hop before each of `aborts` (a held visit's header) that this
  // node dropped it (Note [Relay drops]).
  void SendRelayAborts(const std::vector<proto::FrameHeader>& aborts, const absl::Status& why) {
    for (const proto::FrameHeader& h : aborts) {
      if (h.hop_index() > 0) SendAbort(h, h.hop_index() - 1, why);
    }
  }
  // A task finished for an MB dropped meanwhile: make sure the compute
  // keeps nothing of it (the drop's Discard may have run before the task).
  void Forget(const Task& task) {
    StageCompute* compute =
        ComputeFor(static_cast<int>(task.header.route(task.header.hop_index()).stage()));
    if (compute != nullptr) compute->Discard(task.local_id);
  }
  bool Holds(const MbKey& key) {
    absl::MutexLock lock(&mu_);
    return entries_.contains(key);
  }
  StageCompute* ComputeFor(int stage) const {
    auto it = stages_.find(stage);
    return it == stages_.end() ? nullptr : it->second;
  }

  Transport* const transport_;
  common::Clock* const clock_;
  SwarmView* const view_;
  const std::map<int, StageCompute*> stages_;
  const StageServerOptions options_;
  const PeerId self_;
  const std::string self_bytes_;
  ReplicaRouteRepairer default_repairer_;
  RouteRepairer* const repairer_;
  HopStats hops_;

  mutable absl::Mutex mu_;
  OriginListener* listener_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Entered around every listener call, so SetOriginListener can wait for
  // the calls to the listener it replaces (its owner may then destroy it).
  common::LifetimeGuard::Token listener_token_ ABSL_GUARDED_BY(mu_);
  absl::Mutex listener_set_mu_;  // serialises SetOriginListener
  std::unique_ptr<common::LifetimeGuard> listener_guard_ ABSL_GUARDED_BY(listener_set_mu_);

  // The listener to call, entered: hold the result while calling it.
  struct ListenerCall {
    OriginListener* listener = nullptr;
    common::LifetimeGuard::Entry entry;
    explicit operator bool() const { return listener != nullptr && entry; }
  };
  ListenerCall ListenerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ListenerCall{listener_, listener_token_.Enter()};
  }
  uint64_t iteration_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;  // ReleaseAll ran: Inject refuses
  uint64_t next_local_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool dispatch_posted_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;  // dispatching, between iterations
  // SetPaused: forwards of later iterations than this are refused.
  std::optional<uint64_t> volunteer_paused_at_ ABSL_GUARDED_BY(mu_);
  // StopAfter: forwards of later iterations than this are refused.
  std::optional<uint64_t> stop_after_ ABSL_GUARDED_BY(mu_);
  absl::AnyInvocable<void()> quiesced_ ABSL_GUARDED_BY(mu_);
  int slots_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  // The admission limit: options_.memory_slots, lowered after an out of
  // memory (Note [Memory slots]).
  int memory_slots_ ABSL_GUARDED_BY(mu_) = std::max(1, options_.memory_slots);
  absl::flat_hash_map<MbKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Arrival order; served by Note [Queue order].
  std::deque<Task> backward_q_ ABSL_GUARDED_BY(mu_);  // backwards and tails
  std::deque<Task> forward_q_ ABSL_GUARDED_BY(mu_);   // starts and forwards
  std::deque<Task> deferred_ ABSL_GUARDED_BY(mu_);    // forwards of later iterations
  StageServerStats stats_ ABSL_GUARDED_BY(mu_);
  // Verified compute as Y: waiting verify-only forwards (arrival order),
  // and waiting or running ones per sender.
  std::deque<Task> verify_q_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<PeerId, int> verify_by_sender_ ABSL_GUARDED_BY(mu_);
  int verify_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // As the hop before X: the coin and the per-check seeds.
  common::Random verify_rng_ ABSL_GUARDED_BY(mu_){options_.verify_seed};
  // As the hop after X (its own lock; never called with mu_ held except
  // EndIteration, which calls nothing back).
  OutputChecks checks_{options_.output_checks};
  OutputChecks trusted_checks_{options_.output_checks};  // Note [Trusted disputes]
};

inline bool IsForward(const proto::FrameHeader& h) { return h.direction() == proto::DIRECTION_FORWARD; }

inline absl::Status Refuse(absl::StatusCode code, const proto::FrameHeader& h, absl::string_view why) {
  return absl::Status(code, absl::StrCat(why, " (", DescribeFrame(h), ")"));
}

inline constexpr absl::string_view kMarkedDead = "peer marked dead in the view";
// Refusal of a frame too far ahead of this node (Note [Behind the swarm]).
inline constexpr absl::string_view kBehind = "this node is behind";
// Refusal of a new forward by a paused node (StageServer::SetPaused).
inline constexpr absl::string_view kPausedNode = "this node is paused";
// Refusal of a forward after a stopping node's last iteration (StopAfter).
inline constexpr absl::string_view kStoppingNode = "this node is stopping";

// Note [Stopping refusals]: `why` with `cause` attached (a status payload,
// so it reaches the origin's listener as is), and the cause a stopping
// refusal from `to` (an ack) gives; nullopt for any other ack.
absl::Status WithStoppingCause(absl::Status why, const proto::AbortCause& cause);
std::optional<proto::AbortCause> StoppingRefusalCause(const absl::Status& ack, const PeerId& to,
                                                      uint64_t iteration);
// The cause `why` carries (WithStoppingCause), if any.
std::optional<proto::AbortCause> AbortCauseOf(const absl::Status& why);
// `why` with the peer whose abort notice carried its stopping cause
// (StoppingCause::delivered_by); HandleAbort adds it.
absl::Status WithDeliveredBy(absl::Status why, const PeerId& from);

// Cause of a retry-elsewhere ack, for StageServerStats::rerouted_by_reason.
inline const char* RerouteReason(const absl::Status& ack) {
  if (absl::IsResourceExhausted(ack)) {
    if (absl::StrContains(ack.message(), kBehind)) return "behind";
    if (absl::StrContains(ack.message(), kStoppingNode)) return "stopping";
    return absl::StrContains(ack.message(), kPausedNode) ? "paused" : "resource_exhausted";
  }
  if (absl::IsDeadlineExceeded(ack)) return "deadline";
  if (absl::StartsWith(ack.message(), kMarkedDead)) return "peer_dead";
  return "unavailable";
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_STAGE_SERVER_IMPL_H_

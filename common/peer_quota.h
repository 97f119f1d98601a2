// PeerQuota: per-peer budgets for one service a stranger can reach (Note
// [Peer quotas]). Each peer gets a token bucket of messages, a token bucket
// of bytes and a cap on its concurrent streams; a member (a peer with a
// valid record) gets the member budget, anyone else the much smaller
// stranger budget. Refusals are counted by (reason, peer class) for the
// daemon's /metrics and logged, one line per interval.
//
//   PeerQuotaOptions o{"pipeline", /*member=*/{...}, /*stranger=*/{...}};
//   PeerQuota quota(o, clock);
//   quota.SetClassifier([&](const NodeId& id) { return view.IsMember(id); });
//   absl::StatusOr<PeerQuota::StreamSlot> slot = quota.OpenStream(peer);
//   if (!slot.ok()) return slot.status();        // RESOURCE_EXHAUSTED
//   SS_RETURN_IF_ERROR(quota.Admit(peer, header.payload_bytes()));
//
// Time comes from the injected clock (SteadyNow), so tests advance a
// SimClock instead of sleeping.
//
// Thread rule: thread-safe; the classifier is called without the lock held.
#ifndef SKIPSWARM_COMMON_PEER_QUOTA_H_
#define SKIPSWARM_COMMON_PEER_QUOTA_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/node_id.h"

namespace skipswarm::common {

// Note [Peer quotas]
// * Every service a peer can reach without being asked (pipeline frames,
//   replica-group pushes, gossip requests, state-transfer requests, the
//   manifest) passes its caller through a PeerQuota before doing work for
//   it: the message (and the bytes it declares) against the peer's buckets,
//   a stream against its concurrent-stream cap (and one message). A
//   stream service may end a stream whose peer goes over its quota, so a
//   flood costs the node one refusal per stream, not one per message.
// * The peer's class decides its budget. A member (its record is valid and
//   in this node's view, or it is in the static --swarm list) gets a budget
//   far above what honest traffic needs, so the defences cost honest
//   training nothing; a stranger gets enough to join and little else. A
//   member of an open swarm on probation (a newcomer) gets a budget in
//   between: what one honest replica's training needs, with little margin,
//   so a flood from a fresh identity is bounded before anyone vouches for
//   it.
// * A refusal is RESOURCE_EXHAUSTED ("retry later, elsewhere"), counted as
//   skipswarm_peer_quota_refusals_total{service,reason,peer_class} and
//   logged at most once per interval per service.
// * Buckets are kept for at most max_peers peers; when the table is full,
//   buckets that are full again are forgotten first (a Sybil burst cannot
//   grow it), and if none is, a stranger is refused (reason "peers").
// * Per-peer budgets do not bound the sum over peers: a Sybil burst of many
//   fresh identities, each within its own stranger budget, would add up to
//   max_peers times it. So a quota may also give all strangers together one
//   budget (`all_strangers`: one token bucket of messages, one of bytes and
//   a cap on their concurrent streams, shared by every stranger); a
//   stranger's message passes both its own and the shared budget, and a
//   refusal by the shared one is reason "strangers". Members and newcomers
//   never draw on it, so a flood of strangers cannot starve them
//   (Note [Memory ceiling] in node/daemon/reporting/memory_ceiling.h counts
//   the shared byte burst in the node's stated ceiling).

// Note [Joiners' budget]
// * The budget all strangers share (Note [Peer quotas]) bounds a Sybil
//   flood, but an honest node that is joining is a stranger too until its
//   record is in the receiver's view: a flood that keeps the shared bucket
//   empty (each message it refills taken within a fraction of a
//   millisecond) refused every join push-pull of an honest joiner, for as
//   long as the flood lasted.
// * So a quota may give strangers whose message proves they are joining a
//   second shared budget (`joiners`, small), drawn on only when the flood's
//   budget is short: AdmitJoiner asks the service's proof (a callback) only
//   then, outside the lock, and charges the joiner's own budget and the
//   joiners' budget instead of all strangers'. A proof that fails leaves the
//   refusal as it was (reason "strangers"); a joiners' budget that is short
//   refuses reason "joiners".
// * The proof must cost the attacker what it costs the swarm to admit an
//   identity: gossip asks for the sender's own record that the receiver's
//   VerifyRecord accepts (signed, this swarm, admitted: the open swarm's
//   join work, one hash to check, or the founder's invite; Note
//   [Admission] in membership/admission.h). Ids without it, however many,
//   never touch the joiners' budget, so they cannot starve a joiner; ids
//   with it are priced like any joiner (and a swarm that asks no join work
//   prices none: there the joiners' budget only adds a second bounded sum).
//   A flood of forged proofs costs the receiver one check each, only while
//   the flood's budget is short, and is refused as before. An admitted
//   joiner's proof is that check: gossip keeps its result for the
//   message's own verification (SenderRecordCheck in
//   membership/membership_impl.h), so the record is verified once.
// * A proof prices an identity, not its messages: charged to a stranger's
//   budget, one proven identity calling at its own rate took the whole
//   joiners' budget, and every honest joiner behind it was refused
//   ("joiners") for as long as it called. So a proven message is charged
//   to its proof key's own joiner budget (`joiner`), sized to what one
//   honest join sends and far under the joiners' budget, in a bucket apart
//   from the key's stranger bucket and kept in the same bounded table.
//   Holding the joiners' budget empty then takes as many proven identities
//   as the joiners' rate is a multiple of one joiner's, each paid for with
//   its join work or its invite. Unset, a proven key gets a stranger's.

// Note [Refusal hold]
// * A refusal is cheap to decide but not to answer: each refused call still
//   costs the node a gRPC call's worth of CPU (thread hand-offs, HTTP/2
//   frames, a status). A peer that asks again the moment it is refused
//   (a flood, or a client that retries in a tight loop) could spend that
//   CPU as fast as the node answers, however small its budget.
// * So a refusal of a peer that was already refused in the last
//   `repeat_window` is answered only after a hold: as long as its bucket
//   needs to admit the message it was refused for (messages or bytes,
//   refilled at the budget's rate), or `max_hold` for refusals no waiting
//   cures (streams, a full table, a closed or revoked budget, a message
//   larger than the burst). A peer's first refusal after a quiet window is
//   answered at once, so an honest peer that overruns once loses no time.
// * A client that waits for each answer then gets about its budget's rate of
//   answers; one that keeps many calls open at once meets `max_held_calls`:
//   past it, refusals are answered at once again (holding costs a server
//   thread in a synchronous service, and those must stay bounded).
// * The hold travels with the refusal (a status payload); the service
//   answers through HoldRefusal (blocks the handler's thread) or
//   AnswerAfterHold (a timer on the injected clock, for callback services),
//   never while holding a lock. max_hold = 0 (the default) answers every
//   refusal at once; the daemons set it.

// Note [Stream opens]
// * A stream costs the node more than its messages: HTTP/2 lets the peer
//   send a whole stream window (grown by gRPC's bandwidth probe to a
//   megabyte or more on a fast link) before the node reads a byte, and the
//   kernel copies all of it in. A stream that is refused at its opening, or
//   ended for its quota and held (Note [Refusal hold]), takes in that
//   window while it waits; only the stream's end stops the bytes.
// * So the bytes a peer can push into refused streams are bounded by how
//   often it may open one, not by its message rate: a stranger allowed 20
//   messages a second that opened a stream for each pushed about 20
//   windows a second into the node. `stream_opens_per_second` is that
//   bound, its own bucket beside the messages and bytes (a refusal is
//   reason "stream_opens", held until the bucket has a stream again, up
//   to `max_stream_open_hold`: a held opening takes in a window too, so a
//   peer that keeps asking gets one window per refill, not one per
//   max_hold).
// * Every message a stream reads is paid for: a frame's header pays a
//   message and the payload it declares (its chunks then ride on that),
//   a header the validator refuses still pays its message, and anything
//   no admitted header paid for (a refused frame's chunks, a chunk
//   without a header, an empty message) pays its bytes; a stream over
//   its quota ends. Otherwise a peer could stream refused frames, or bare
//   chunks, at the link's speed on one admitted stream.

// Note [Paced bytes]
// * A service that copies a peer's bytes through (the relay's circuits,
//   node/transport/relay/README.md) cannot refuse one message without
//   ending the stream, and ending a circuit breaks the connection inside
//   it: an honest peer that overran its burst once would pay a reconnect.
//   So such a service paces instead of refusing: Pace charges each
//   message's bytes to the peer's byte bucket (and, for a stranger, to all
//   strangers'), into debt when the bucket holds less, and the service
//   stops reading from that peer's stream until the refill has paid the
//   debt back (the wait Pace returns, on the injected clock). HTTP/2's flow
//   control then stops the peer's sends once its stream window is full, so
//   its rate falls to its budget's with nothing buffered beyond one
//   message and a window per stream, and its other streams wait on the
//   same bucket.
// * The debt is bounded by what a peer can have read at once (one message
//   per stream); a service ends a stream whose wait would exceed its own
//   bound (RESOURCE_EXHAUSTED): a peer gets there only with messages far
//   larger than its burst or many streams at once. A closed budget, a
//   revoked peer or a full table are refused as Admit refuses them.
// * A pause is not a refusal: it is counted apart (paced()), and honest
//   traffic under a member's budget is never paused.

// kRevoked: an id the swarm's founder revoked (Note [Revocation] in
// membership/revocation.h); refused everything in every admission mode.
// kNewcomer: a member of an open swarm still on probation (Note [Newcomer
// probation] in node/daemon/gossip/training_members.h): the newcomer budget.
enum class PeerClass { kMember, kStranger, kRevoked, kNewcomer };
// "member" / "stranger" / "revoked" / "newcomer"
const char* PeerClassName(PeerClass c);

struct QuotaBudget {
  // <= 0: unlimited.
  double messages_per_second = 0;
  double message_burst = 0;
  double bytes_per_second = 0;
  double byte_burst = 0;
  // Concurrent streams one peer may hold open; <= 0: unlimited.
  int max_streams = 0;
  // Nothing at all: every message and stream is refused PERMISSION_DENIED
  // (reason "not_admitted"): strangers where the swarm admits only invited
  // or listed nodes (Note [Admission] in membership/admission.h).
  bool closed = false;
  // Streams one peer may open per second, and its burst; <= 0: unlimited
  // (Note [Stream opens]).
  double stream_opens_per_second = 0;
  double stream_open_burst = 0;
};

// The longest hold the daemons set on every quota they serve (Note [Refusal
// hold]): one place, so the gossip and the other services agree.
inline constexpr absl::Duration kDaemonMaxHold = absl::Seconds(1);
// And of a refused stream opening (Note [Stream opens]): a stranger's
// pipeline stream refills every 4 s.
inline constexpr absl::Duration kDaemonMaxStreamOpenHold = absl::Seconds(5);

struct PeerQuotaOptions {
  std::string service;  // names the service in logs and metrics
  QuotaBudget member;
  QuotaBudget stranger;
  // A member on probation (PeerClass::kNewcomer); unset: the member budget.
  std::optional<QuotaBudget> newcomer;
  // One budget for all strangers together (Note [Peer quotas]); unset: none
  // beyond each stranger's own.
  std::optional<QuotaBudget> all_strangers;
  // Strangers that prove they are joining, together, when all_strangers is
  // short (Note [Joiners' budget]); unset: none (AdmitJoiner is Admit).
  std::optional<QuotaBudget> joiners;
  // Each proven joiner's own budget, per proof key, while its proof is used
  // (Note [Joiners' budget]); unset: a stranger's.
  std::optional<QuotaBudget> joiner;
  size_t max_peers = 4096;
  absl::Duration log_interval = absl::Seconds(10);
  // Note [Refusal hold]. Zero: no holds.
  absl::Duration max_hold = absl::ZeroDuration();
  // Note [Stream opens]: the longest hold of a refused stream opening (it
  // waits for the bucket's next stream, which may be longer than max_hold);
  // zero: max_hold. Holds only where max_hold is set.
  absl::Duration max_stream_open_hold = absl::ZeroDuration();
  absl::Duration repeat_window = absl::Seconds(1);
  int max_held_calls = 64;
};

// Why a request was refused (the metric's reason label).
// kRevoked: PERMISSION_DENIED for a PeerClass::kRevoked caller.
// kStrangers: the budget of all strangers together (all_strangers).
// kJoiners: the budget of proven joiners together (joiners).
enum class QuotaReason {
  kMessages,
  kBytes,
  kStreams,
  kStreamOpens,
  kPeers,
  kNotAdmitted,
  kRevoked,
  kStrangers,
  kJoiners
};
const char* QuotaReasonName(QuotaReason r);  // "messages", "bytes", "stream_opens", ...

struct QuotaRefusalKey {
  QuotaReason reason;
  PeerClass peer_class;
  bool operator<(const QuotaRefusalKey& o) const {
    return std::make_pair(reason, peer_class) < std::make_pair(o.reason, o.peer_class);
  }
};

class PeerQuota {
 public:
  using Classifier = std::function<PeerClass(const NodeId&)>;

  // `clock` is borrowed and must outlive the quota.
  PeerQuota(PeerQuotaOptions options, Clock* clock);
  PeerQuota(const PeerQuota&) = delete;
  PeerQuota& operator=(const PeerQuota&) = delete;

  // Without a classifier every peer is a member (tests, and a swarm without
  // membership). Set it before serving.
  void SetClassifier(Classifier classifier);
  PeerClass ClassOf(const NodeId& peer) const;

  // Charges one message of `bytes` to `peer`. OK, or RESOURCE_EXHAUSTED
  // naming the budget it would exceed (nothing is charged then).
  // `messages` = 0 charges bytes only (e.g. the bytes of a stream whose
  // opening was its message).
  absl::Status Admit(const NodeId& peer, uint64_t bytes, int messages = 1);
  // The same for a caller known only by a key (an address: the manifest
  // service serves strangers before they have an id) and a class.
  absl::Status AdmitKey(const std::string& key, PeerClass peer_class, uint64_t bytes,
                        int messages = 1);

  // Admit, for a message that may prove its stranger is joining (Note
  // [Joiners' budget]): when the budget of all strangers is short,
  // `proves_join` is called (without the lock; it may verify a signature)
  // and, when true, the message draws on the peer's own joiner budget and
  // the joiners' budget instead.
  absl::Status AdmitJoiner(const NodeId& peer, uint64_t bytes,
                           absl::FunctionRef<bool()> proves_join);
  // The same for a stranger known by `key` (an address) whose proof names
  // the joiner itself (`joiner_key`, e.g. its invite): a proven message is
  // charged to joiner_key's own joiner budget (`joiner`, else a stranger's)
  // and the joiners' budget, so many addresses sharing one proof share one
  // budget. An empty joiner_key is AdmitKey.
  absl::Status AdmitJoinerKey(const std::string& key, const std::string& joiner_key,
                              uint64_t bytes, absl::FunctionRef<bool()> proves_join);
  // Messages admitted on the joiners' budget so far.
  uint64_t joiners_admitted() const;

  // Note [Paced bytes]: charges `bytes` to `peer`'s byte budget, into debt
  // when its bucket holds less, and returns how long the caller must stop
  // reading from this peer for the refill to pay the debt back (zero while
  // the bucket holds it). Refused (nothing charged) as Admit refuses a
  // closed budget, a revoked peer or a full table.
  absl::StatusOr<absl::Duration> Pace(const NodeId& peer, uint64_t bytes);
  // Times Pace asked its caller to wait.
  uint64_t paced() const;

  // Holds one of the peer's concurrent streams until destroyed. The quota
  // must outlive its slots (the services that hold them are shut down
  // first).
  class StreamSlot {
   public:
    StreamSlot() = default;
    StreamSlot(StreamSlot&& o) noexcept { *this = std::move(o); }
    StreamSlot& operator=(StreamSlot&& o) noexcept;
    ~StreamSlot();

   private:
    friend class PeerQuota;
    StreamSlot(PeerQuota* owner, std::string key, bool shared)
        : owner_(owner), key_(std::move(key)), shared_(shared) {}
    PeerQuota* owner_ = nullptr;  // null: empty
    std::string key_;
    bool shared_ = false;  // also holds one of all_strangers' streams
  };
  // RESOURCE_EXHAUSTED when `peer` holds max_streams already, or has no
  // message left (opening a stream costs one message).
  absl::StatusOr<StreamSlot> OpenStream(const NodeId& peer);
  absl::StatusOr<StreamSlot> OpenStreamKey(const std::string& key, PeerClass peer_class);

  // How long `refusal` (a status this quota returned) is to be held before
  // it is answered (Note [Refusal hold]); zero for any other status.
  static absl::Duration HoldOf(const absl::Status& refusal);
  // Blocks the calling thread for `refusal`'s hold, unless max_held_calls
  // are held already. Call it without holding any lock, before answering.
  void HoldRefusal(const absl::Status& refusal);
  // Runs `answer` after `refusal`'s hold (on the clock's timer thread), or
  // now when it has none or max_held_calls are held already. The quota may
  // be destroyed before the timer fires; the clock must outlive it.
  void AnswerAfterHold(const absl::Status& refusal, absl::AnyInvocable<void()> answer);
  // Refusals that were held, and those held right now.
  uint64_t held_refusals() const;
  int held_now() const { return held_now_->load(); }

  // Refusals so far, by reason and class.
  std::map<QuotaRefusalKey, uint64_t> refusals() const;
  uint64_t total_refusals() const;
  const PeerQuotaOptions& options() const { return options_; }
  // Peers with a bucket or a stream right now.
  size_t tracked_peers() const;
  // Streams `peer` holds now.
  int open_streams(const NodeId& peer) const;
  // Streams all strangers together hold now (counted only with
  // all_strangers set).
  int stranger_streams() const;

 private:
  struct Peer {
    PeerClass peer_class = PeerClass::kStranger;
    absl::Duration at;  // when the tokens below were counted
    double messages = 0;
    double bytes = 0;
    double stream_opens = 0;
    int streams = 0;
    // When it was last refused (never: minus infinity).
    absl::Duration last_refused = -absl::InfiniteDuration();
    // A proven joiner's own bucket (options_.joiner), kept apart from the
    // stranger bucket of the same key.
    bool joiner = false;
  };
  const QuotaBudget& BudgetOf(PeerClass c) const {
    static const QuotaBudget kNothing = [] {
      QuotaBudget b;
      b.closed = true;
      return b;
    }();
    if (c == PeerClass::kRevoked) return kNothing;
    if (c == PeerClass::kNewcomer && options_.newcomer.has_value()) return *options_.newcomer;
    return c == PeerClass::kStranger ? options_.stranger : options_.member;
  }
  // The budget of an entry: its class's, or a proven joiner's.
  const QuotaBudget& BudgetOf(const Peer& p) const {
    return p.joiner && options_.joiner.has_value() ? *options_.joiner : BudgetOf(p.peer_class);
  }
  // The refusal of a closed budget: not admitted, or revoked.
  static QuotaReason ClosedReason(PeerClass c) {
    return c == PeerClass::kRevoked ? QuotaReason::kRevoked : QuotaReason::kNotAdmitted;
  }
  // The peer's entry with its tokens refilled to `now`; null when the
  // table is full of busy peers and `peer_class` is a stranger. `joiner`:
  // the entry is a proven joiner's own bucket (Peer::joiner).
  Peer* FindOrAddLocked(const std::string& key, PeerClass peer_class, absl::Duration now,
                        bool joiner = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FindOrAddLocked, or the refusal of a closed budget (a revoked peer, a
  // stranger where none are admitted) or of a full table.
  absl::StatusOr<Peer*> AdmittedEntryLocked(const std::string& key, PeerClass peer_class,
                                            absl::Duration now, bool joiner = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefillLocked(Peer& p, const QuotaBudget& b, absl::Duration now) const;
  // What `bucket` lacks to admit `messages` and `bytes` under `b`, and how
  // long its refill takes (infinite: more than the burst); none when it
  // holds both. Charge takes them (after every budget involved admitted).
  struct Shortfall {
    QuotaReason reason;
    absl::Duration wait;
  };
  static std::optional<Shortfall> ShortfallOf(const Peer& bucket, const QuotaBudget& b,
                                              uint64_t bytes, int messages);
  static void Charge(Peer& bucket, const QuotaBudget& b, uint64_t bytes, int messages);
  // `p` is the peer's entry (null when it has none); `wait` how long its
  // buckets need to admit what was refused (infinite: waiting cannot).
  absl::Status RefuseLocked(const std::string& key, PeerClass peer_class, QuotaReason reason,
                            absl::Duration now, Peer* p = nullptr,
                            absl::Duration wait = absl::InfiniteDuration())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The refusal's status, logged at most once per interval; `own` is the
  // budget of the refused entry.
  absl::Status RefusalStatus(const std::string& key, PeerClass peer_class, QuotaReason reason,
                             absl::Duration now, const QuotaBudget& own)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The budgets strangers share: all strangers' (Note [Peer quotas]) or
  // proven joiners' (Note [Joiners' budget]).
  enum class Shared { kStrangers, kJoiners };
  // Admit, with a stranger's message charged to `shared` as well; a
  // proven joiner's (kJoiners) to its own joiner bucket, with `joiner`.
  absl::Status AdmitShared(const std::string& key, PeerClass peer_class, uint64_t bytes,
                           int messages, Shared shared);
  // Charges a stranger's message (messages may be 0) and bytes to the
  // shared budget; OK when the quota has none. `p` is the stranger's own
  // entry (for the hold).
  absl::Status ChargeSharedLocked(Shared shared, const std::string& key, uint64_t bytes,
                                  int messages, absl::Duration now, Peer* p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when one more call may be held (and counts it).
  bool TakeHeldSlot();
  void ReleaseStream(const std::string& key, bool shared);

  const PeerQuotaOptions options_;
  Clock* const clock_;
  mutable absl::Mutex classifier_mu_;
  Classifier classifier_ ABSL_GUARDED_BY(classifier_mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
  // The shared budget of all strangers (options_.all_strangers).
  Peer strangers_ ABSL_GUARDED_BY(mu_);
  // The shared budget of proven joiners (options_.joiners), and its use.
  Peer joiners_ ABSL_GUARDED_BY(mu_);
  uint64_t joiners_admitted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t paced_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<QuotaRefusalKey, uint64_t> refusals_ ABSL_GUARDED_BY(mu_);
  LogLimiter log_limit_ ABSL_GUARDED_BY(mu_);
  // Shared with pending AnswerAfterHold timers, which may outlive us.
  std::shared_ptr<std::atomic<int>> held_now_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<uint64_t> held_total_{0};
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_PEER_QUOTA_H_

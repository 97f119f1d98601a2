// Private to membership.cc / membership_state.cc: the state behind
// Membership. Not part of the API.
//
// Note [SWIM in SkipSwarm]
// * The member table holds, per node, its latest verified signed record and
//   this node's opinion of it: ALIVE / LEFT come from the owner's record;
//   SUSPECT / DEAD are opinions that name the record's incarnation. The
//   order for one incarnation is ALIVE < SUSPECT < DEAD, and LEFT is final;
//   a record with a higher incarnation overrides any opinion (refutation,
//   restart).
// * Opinions about an incarnation we do not hold are ignored: nobody can
//   kill a record we have not seen, and anti-entropy brings the record.
// * Hearsay DEAD never kills here: it makes an ALIVE member SUSPECT and our
//   own suspicion timer decides. A node that was cut off (a flapping link)
//   suspects everybody, and when it reconnects its verdicts would otherwise
//   kill healthy members before they can refute. Detection time barely
//   changes: everybody hears the first suspicion within a few gossip rounds.
// * Opinions carry their reporter and its signature; a node that passes
//   hearsay on forwards the reporter's signed update unchanged, so a
//   receiver can tell independent suspicions apart (Note [Dynamic
//   suspicion]) and nobody can speak for another. Hearsay counts only if
//   its reporter is a live member we hold and the signature verifies; the
//   digests of anti-entropy carry no opinions (they are unsigned), the
//   signed updates ride along instead.
//
// Note [Incarnation bounds]
// * Incarnations start at the wall clock in ms (~2^41) and grow by one per
//   change or refutation. A record above kMaxIncarnation (2^62) is refused,
//   and SignSelfLocked refuses to go past it (saturates) rather than wrap:
//   a wrapped incarnation is older than every copy peers hold, so the node
//   could never refute again and would stay DEAD for good.
// * We refute an opinion about ourselves that names our incarnation (even
//   unsigned: refuting costs one increment), or a higher one within
//   kMaxRefutationJump (an earlier life of our key) if it is signed by a
//   member. Anything else is forged and ignored, so a stranger can neither
//   push us towards the ceiling nor make peers hold an incarnation above
//   the one we can sign.
// * First-hand only link samples: a LinkSample is accepted from the node it
//   is `from`, so a peer cannot put words in another's mouth.
//
// Note [Outbound-only members]
// * A member whose record says outbound_only (behind NAT: nobody can open a
//   connection to it) is never a probe target, an indirect-probe helper, a
//   gossip / push-pull / announce destination, nor told about its own
//   suspicion directly: every such call would fail, and each failed probe
//   made it SUSPECT (it flapped ALIVE <-> SUSPECT many times a minute).
// * Its liveness comes from what it sends us: it probes, gossips and
//   push-pulls the dialable members like anyone, on connections it opens,
//   and each request it sends (authenticated sender) sets its last_heard.
//   Every probe tick a member suspects, first-hand, an outbound-only member
//   silent for longer than OutboundSilenceLimitLocked: about three rounds of
//   its probes (it probes each of us once per round of the live members)
//   plus slack, at least 3 s. The usual suspicion then runs: the member
//   refutes in the acks of its next requests, or is declared DEAD.
// * What it receives it gets in replies (acks, push-pull responses), so
//   records and opinions still reach it.
// * A verdict is checked before it kills (Note [Checked verdicts]): when a
//   suspicion's timer runs out we first pull the freshest records by one
//   push-pull with a dialable member other than the suspect; the verdict
//   follows only if the suspect's record did not change meanwhile (a
//   crashed member's does not: its detection takes one more round trip). A NATed node hears news
//   only in replies, and gossip's few retransmissions of a refutation often
//   went elsewhere: in the netns home layout each home node declared the
//   other DEAD on suspicions refuted long before, hearsay or its own failed
//   probes while the other's record did not yet say outbound_only (the
//   first seconds after its join, before its reachability check).
// * Heartbeat: its probe rounds slow down with its local health score (up
//   to 1 + max_health_score times, Note [Dynamic suspicion]), as under
//   load, where late timers raise it; a round of D members then took
//   longer than the silence limit, and the members it reached last
//   suspected it (it flapped ALIVE -> SUSPECT -> ALIVE). So an
//   outbound-only node also pings, every probe_interval (not scaled), the
//   dialable member it sent nothing to for longest, once that is D
//   probe_intervals: each hears from it at least once per healthy round
//   whatever its score. A heartbeat that fails is no probe: it suspects
//   nobody.
// * An outbound-only node hears nobody first-hand (nobody can dial it), so
//   it never suspects anyone for silence, least of all another
//   outbound-only member that it could not hear in any case: it learns of
//   their failures from the dialable members' gossip, and its own timer
//   decides as for any hearsay. (It did: two NATed members suspected each
//   other every few seconds, every member took the suspicion up, and some
//   ran out into DEAD before the refutation came back.)
// * Leave: nobody can tell an outbound-only member of it, so a dialable
//   member that leaves goes on answering, timers stopped, until each live
//   outbound-only member has sent it a request since (the ack, PingReq
//   ack or push-pull response carries the LEFT record), for at most
//   MembershipOptions::leave_linger. Without it, when every dialable member
//   left at once (the end of a run) the outbound-only ones marked them all
//   DEAD.
//
// Note [Refutation over our own requests]
// * A member that cannot be dialed (a home joiner before its reachability
//   check says outbound_only: every probe of it fails) is suspected again
//   and again; whoever suspects it can tell it so only in replies to its
//   own requests, and a refutation reaches the others only in its own
//   messages. Gossip sent each refutation a few times to random members,
//   its probe rounds slowed with every refutation (health score), and in
//   the netns home layout members that missed the refutation, or heard
//   nothing from it for a second, declared it DEAD while it was talking to
//   them (more often under load).
// * So a refutation goes at once to every dialable member (a ping carrying
//   our record), and for as long as a suspicion can last after one
//   (SuspicionBounds::max) the heartbeat pings, every probe_interval
//   whatever our health score, the member we sent nothing to for longest:
//   its reply tells us of a new suspicion within about one gossip spread.
//   The same until a member first sends us a request: a joiner whose
//   record does not yet say outbound_only hears of its first suspicion so
//   (in the netns layout under load its probe rounds, slowed by late
//   timers, left it silent for the whole minimum suspicion, 1 s, and it
//   was convicted); a dialable joiner is probed within a round.
// * A message that names us SUSPECT / DEAD at an incarnation below ours
//   makes its sender owed our record: the reply (when the sender asked) or
//   a ping sent at once (when it answered) carries it, over a connection
//   we open, which is how an outbound-only member is reached at all. The
//   debt is paid by whichever message to the sender goes first. A sender
//   that still holds the old record says so again and is sent it again;
//   one that only forwarded an old opinion gets a record it has (old news:
//   no signature check). Cost: one ping per member per refutation.
//
// Note [Replies bring news]
// * An outbound-only member hears news only in replies, and a reply's
//   gossip is our broadcast queue: a record is sent a few times, to
//   whoever asks first. A record that changed while the member asked
//   others could reach it only by its next push-pull (every
//   push_pull_interval). In the netns home layout s1h held s2h's record
//   from before s2h's reachability verdict (no relays) for 2.4 s after s2h
//   entered, so its hops to s2h failed and were re-routed.
// * So each reply to an outbound-only member also carries the records that
//   changed since our last reply to it (at most half a message's records,
//   oldest change first; the rest in the next reply). It asks some member
//   every probe_interval, so a change reaches it within about one gossip
//   spread plus one interval.
//
// Note [Checked verdicts]
// * The push-pull before a verdict (Note [Outbound-only members]) asks a
//   witness. A check that fails (the witness is itself unreachable, as a
//   home joiner before its reachability verdict, or a loaded machine timed
//   the push-pull out) tells us nothing: it does not convict, the next
//   witness is asked at once. Witnesses that answered us before (a
//   measured RTT) are asked first. At most indirect_probes witnesses per
//   suspicion, then the verdict stands (we cannot learn more); a crashed
//   member is then DEAD at most that many push-pull timeouts later.
// * A timer re-armed meanwhile (a confirmation, the suspect talked) decides
//   again and asks another witness; a check that succeeded and found no
//   fresher record convicts.
//
// Note [Dynamic suspicion] (Lifeguard, Dadgar et al. 2018)
// * A suspicion's timeout starts at SuspicionBounds::max and shrinks towards
//   min as other members confirm it independently (suspicion.h). A
//   confirmation is a SUSPECT (or DEAD) opinion about the same incarnation
//   from a reporter other than the first, or our own failed probe of a member
//   we already suspect; each new one is counted once and passed on (with its
//   reporter), each re-arms the timer at start + timeout(confirmations).
//   A lone suspicion, typically raised by a member that is itself slow and
//   missed the acks, leaves the suspect the long timeout to refute; a dead
//   member fails everybody's probes, so confirmations pile up and the
//   verdict comes after the short one (membership_sim_test measures both).
// * Hearsay is checked: a member we hear is suspected is the next one we
//   probe. A dead member then collects its confirmations within about one
//   protocol period (so the short timeout applies and detection stays within
//   ~3 s), and a live one gets our ping, which carries the suspicion, so it
//   can refute even if nobody else reached it.
// * A suspect that talks is slow, not dead: a request from the suspect
//   itself (its sender id is authenticated) postpones our verdict until it
//   has been silent for `min`, never past start + max. A crashed member
//   sends nothing, so its detection does not change. Its effect is small
//   (membership/README.md), because a slow member reaches only a few
//   others within a second.
// * Buddy system: whoever raises or confirms a suspicion, or takes one up
//   from hearsay (Note [Forged suspicion]), tells the suspect directly,
//   with a deadline as long as the suspicion itself, so a suspect that was
//   merely slow answers with its refutation as soon as it runs.
// * Late timers: a suspicion timer that fires more than kLateTimer after its
//   deadline means our own process did not run for that long (a starved
//   machine); refutations may be queued behind it. Such a verdict is
//   deferred by the lateness (at most `max` in total) and our health score
//   rises, instead of convicting a member for our own stall. A probe tick
//   that fires late raises the health score the same way.
// * Local health (MembershipOptions::max_health_score): +1 per helper of an
//   indirect probe that did not answer at all (a missed nack: the problem
//   is likely ours), +1 for a failed probe with no helper to ask, +1 per
//   refuted suspicion about us or late tick, -1 per answered probe.
// * Locking: one mutex (mu_) guards everything. Work that calls out
//   (transport, listeners) is prepared under the lock and done after it is
//   released; every asynchronous callback goes through Guard(), which drops
//   it once the Membership is shut down (Shutdown, or the destructor) and
//   makes Shutdown wait for callbacks already running. Publish counts the
//   same way, so no listener runs once Shutdown returns, whether the change
//   came from a callback or an incoming request.
//
// Note [Forged suspicion]
// * A member can sign a suspicion about a live member: it is a member, so
//   its opinion verifies, and nobody can tell it from a real one. What we
//   bound is how long it holds: every member that takes a suspicion up from
//   hearsay (ALIVE -> SUSPECT) tells the suspect at once, with the buddy
//   ping of Note [Dynamic suspicion], instead of only probing it at its
//   next probe tick; the suspect refutes to every dialable member at once
//   (Note [Refutation over our own requests]). So every view holds the
//   suspect ALIVE again about two one-way latencies after the first honest
//   member heard the suspicion, whoever the hostile member sent it to: the
//   suspect itself (it refutes on receipt), everybody but the suspect, or a
//   single member just after that member's probe tick (before, the suspect
//   heard of it at the next probe tick or gossip round: up to a probe
//   period plus a round trip).
// * Cost: one ping per member that takes a suspicion up. A real crash is
//   detected as before: the ping to a dead member fails without effect, and
//   the probe that checks the rumour still brings the confirmations.
// * Not done: "direct evidence wins" (a member that heard from the suspect
//   within the last probe period keeps it ALIVE and does not pass the
//   suspicion on). A member hears first-hand from a given member about once
//   per round of its probes (n periods), so its evidence would rarely be
//   fresh and would protect few views; an answer it had cannot tell a forged
//   suspicion from a real one raised since (a member that crashed just
//   after answering us); and a member that withholds the suspicion from
//   gossip costs a real crash its confirmations, so detection slows.
// * SUSPECT counts as live for planning (View::Live), so a forged
//   suspicion costs no routes; it costs each view two changes (ALIVE ->
//   SUSPECT -> ALIVE: two listener calls) and the suspect one incarnation
//   and one step of its health score.
// * An outbound-only suspect cannot be dialed: it hears of a suspicion in
//   the replies to its own requests (Note [Outbound-only members]), so the
//   bound does not hold for it.
#ifndef SKIPSWARM_MEMBERSHIP_MEMBERSHIP_IMPL_H_
#define SKIPSWARM_MEMBERSHIP_MEMBERSHIP_IMPL_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "membership/broadcast_queue.h"
#include "membership/link_stats.h"
#include "membership/membership.h"
#include "membership/revocation.h"
#include "membership/suspicion.h"

namespace skipswarm::membership {

// One Join call: rounds over the bootstrap list.
struct JoinState {
  std::vector<std::string> addresses;  // immutable
  absl::Mutex mu;
  absl::AnyInvocable<void(absl::Status)> done ABSL_GUARDED_BY(mu);
  int round ABSL_GUARDED_BY(mu) = 0;
  int pending ABSL_GUARDED_BY(mu) = 0;
  bool finished ABSL_GUARDED_BY(mu) = false;
  std::vector<std::string> errors ABSL_GUARDED_BY(mu);  // this round's
  // Whether every failure this round was one retrying cannot fix (other
  // swarm, version, identity, allow-list), and the first such status.
  bool all_permanent ABSL_GUARDED_BY(mu) = true;
  absl::Status permanent ABSL_GUARDED_BY(mu);
};

// Note [Gossip admission]
// * A message's gossip is bounded before anything else is done with it:
//   at most 2 x max_records_per_message + 1 records (max_push_pull_records
//   + max_records_per_message + 1 in a push-pull), 2 x
//   max_updates_per_message + 1 opinions (an honest sender's news plus the
//   extras of acks and push-pulls) and kMaxIncomingLinks link samples; a larger one is refused whole (INVALID_ARGUMENT) without a
//   single signature check. Records are at most kMaxRecordBytes each, so a
//   message's verification work is bounded too.
// * Record signatures are checked outside mu_ (PrepareGossip): a short
//   locked pass picks the records that are news, they are verified without
//   the lock, and the locked apply uses the results. A flood of records
//   no longer stalls probes, acks and suspicion timers behind the lock.
// * Each sender's requests and their bytes pass its quota (Note [Peer
//   quotas] in common/peer_quota.h; MembershipOptions::member_quota for a
//   live member, stranger_quota for anyone else); beyond it they are
//   refused with RESOURCE_EXHAUSTED before the gossip is looked at. Honest
//   members send a few per second.
inline constexpr int kMaxIncomingLinks = 256;

// Note [Eviction]
// * A member stays in the table only while the swarm admits it (Note
//   [Admission] in membership/admission.h). Verification admits a record
//   at the moment it arrives; an invite is a lease, so each member keeps
//   the admitted record's end of lease (Member::admitted_until) and every
//   probe tick evicts the members whose lease has ended by the injected
//   clock's Now().
// * Evicting erases the entry, it does not leave a tombstone: listeners
//   hear DEAD, the member leaves every View (the planners drop it), and the
//   daemon's members-only quotas, which count every id in the view,
//   tombstones included, refuse its calls. Its records, wherever they come
//   from, and its requests fail admission from then on, so the entry cannot
//   come back unless it presents a fresh admission (a new invite in a
//   record of a higher incarnation).
// * A revocation list (Note [Revocation] in membership/revocation.h) evicts
//   the members it names the same way, as soon as it is applied, and the
//   list is checked again for every record and request.
// * Members evict independently, each by its own clock: within one probe
//   interval of the expiry plus their clock skew. Nothing is gossiped about
//   it; every member can decide from the record alone.

// Record verifications done outside the lock for one message (Note
// [Gossip admission]): per record, its result, or nothing when the record
// was old news at the time of the check.
struct VerifiedRecords {
  std::vector<std::optional<absl::StatusOr<proto::NodeRecord>>> results;
  // The message's revocation list, verified, when it was newer than ours
  // (Note [Revocation] in membership/revocation.h).
  std::optional<absl::StatusOr<RevocationSet>> revocations;
};

// The sender's own record in a message, verified once by RateLimit when it
// asked whether the sender is joining (Note [Joiners' budget] in
// common/peer_quota.h); PrepareGossip takes its result instead of
// verifying the record again.
struct SenderRecordCheck {
  int index = -1;  // in gossip.records(); -1: none verified
  std::optional<absl::StatusOr<proto::NodeRecord>> result;
};

class Membership::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(MembershipOptions options, const identity::Identity* identity,
       GossipTransport* transport, common::Clock* clock, common::Random rng);

  struct Member {
    common::NodeId id;
    proto::SignedNodeRecord signed_record;
    proto::NodeRecord record;
    proto::MemberState state = proto::MEMBER_STATE_ALIVE;
    absl::Duration state_since;
    common::TimerId suspicion_timer = common::kNoTimer;
    std::optional<Suspicion> suspicion;  // while SUSPECT
    absl::Duration deferred;  // verdict deferred for our own lateness
    // Note [Checked verdicts]: the members asked (push-pull) before our
    // verdict on this suspicion, and whether one such check is in flight.
    std::vector<common::NodeId> witnesses;
    bool checking = false;
    // It showed us an opinion about an incarnation of ours older than the
    // one we hold (Note [Refutation over our own requests]): our next
    // message to it carries our record.
    bool owes_our_record = false;
    // Our version_ when this record arrived, and (for an outbound-only
    // member) at our last reply to it (Note [Replies bring news]).
    uint64_t record_version = 0;
    uint64_t replied_version = 0;
    // When it last sent us a request, and we it (Note [Outbound-only
    // members]).
    absl::Duration last_heard;
    absl::Duration last_sent;
    // The signed update behind a SUSPECT / DEAD state (ours or a member's),
    // passed on in gossip and anti-entropy and shown to the suspect.
    proto::MembershipUpdate opinion;
    // Its record's admission ends then (AdmittedUntil; Note [Eviction]).
    absl::Time admitted_until = absl::InfiniteFuture();
    uint64_t incarnation() const { return record.incarnation(); }
    bool live() const {
      return state == proto::MEMBER_STATE_ALIVE ||
             state == proto::MEMBER_STATE_SUSPECT;
    }
  };
  using Changes = std::vector<MemberChange>;

  // Wraps `f` so it runs only while the Membership exists (see Note).
  template <typename F>
  auto Guard(F f) {
    return [weak = weak_from_this(), f = std::move(f)](auto&&... args) mutable {
      std::shared_ptr<Impl> self = weak.lock();
      if (self == nullptr || !self->Enter()) return;
      f(std::forward<decltype(args)>(args)...);
      self->Exit();
    };
  }
  bool Enter();
  void Exit();
  void Shutdown();  // drop future callbacks and listener calls, wait for running ones

  // ---- membership_state.cc: the table (REQUIRES mu_) ----
  absl::Status SignSelfLocked(uint64_t min_incarnation, proto::MemberState state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Gossip admission]: InvalidArgument if `gossip` is over the
  // limits (`max_records` + max_records_per_message + 1 records), else the records that are news,
  // verified without the lock.
  // `sender_record`: the sender's own record already verified (may be null).
  absl::StatusOr<VerifiedRecords> PrepareGossip(const proto::Gossip& gossip, int max_records,
                                                const SenderRecordCheck* sender_record = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Note [Admission] (membership/admission.h): OK unless the swarm admits
  // selectively and `sender` is neither an admitted member we hold nor the
  // owner of an admissible record in `gossip` (`verified`: PrepareGossip's
  // result for it); otherwise PermissionDenied naming the cause.
  absl::Status CheckSenderAdmitted(const common::NodeId& sender, const proto::Gossip& gossip,
                                   const VerifiedRecords& verified) ABSL_LOCKS_EXCLUDED(mu_);
  // A handler's checks of an incoming message in order: `status` (the
  // request's own checks so far), then PrepareGossip(gossip, max_records),
  // then CheckSenderAdmitted; the first error, else the verified records.
  // `sender_record`: RateLimit's check of the sender's record, reused.
  absl::StatusOr<VerifiedRecords> VerifyIncoming(const absl::Status& status,
                                                 const common::NodeId& sender,
                                                 const proto::Gossip& gossip, int max_records,
                                                 const SenderRecordCheck& sender_record)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The answer to a probe (Ping, PingReq) from `sender` with sequence
  // `seq` that VerifyIncoming refused with `refused`: the revocation notice
  // when `refused` is PermissionDenied and RevocationNotice has one for
  // `sender`, else `refused` itself.
  absl::StatusOr<proto::Ack> ProbeRefusal(const common::NodeId& sender, uint64_t seq,
                                          const absl::Status& refused) ABSL_LOCKS_EXCLUDED(mu_);
  // Per-sender quota of requests and bytes (Note [Gossip admission]); a
  // stranger whose `gossip` carries its own admissible record may draw on
  // the joiners' budget (Note [Joiners' budget] in common/peer_quota.h).
  // `sender_record` gets that record's check when one was made.
  absl::Status RateLimit(const common::NodeId& sender, uint64_t bytes,
                         const proto::Gossip& gossip, SenderRecordCheck* sender_record)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `gossip` carries a record of `sender` that VerifyRecord accepts
  // (only the first record naming it is verified; `check` gets its result).
  bool CarriesOwnAdmissibleRecord(const common::NodeId& sender, const proto::Gossip& gossip,
                                  SenderRecordCheck* check) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `answer` through `reply` at once, or after the quota's hold when
  // `refused` carries one (Note [Refusal hold]).
  template <typename Reply, typename Answer>
  void AnswerRefusal(const absl::Status& refused, Reply reply, Answer answer)
      ABSL_LOCKS_EXCLUDED(mu_) {
    quota_->AnswerAfterHold(refused, [reply = std::move(reply),
                                      answer = std::move(answer)]() mutable {
      reply(std::move(answer));
    });
  }
  // `verified`: PrepareGossip's result for `gossip` (null: verify here).
  void ApplyGossipLocked(const proto::Gossip& gossip,
                         const common::NodeId& sender, Changes* changes,
                         const VerifiedRecords* verified = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyRecordLocked(const proto::SignedNodeRecord& signed_record,
                         Changes* changes,
                         const std::optional<absl::StatusOr<proto::NodeRecord>>*
                             verified = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `signed_record` is old news to us (a duplicate or older).
  bool IsOldNewsLocked(const proto::SignedNodeRecord& signed_record) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `first_hand`: our own probe or suspicion timer, not hearsay (then
  // `reporter` is us and `heard` null). Hearsay passes the received update
  // as `heard`; it has effect only if authentic (OpinionAuthenticLocked).
  void ApplyOpinionLocked(const common::NodeId& id, proto::MemberState state,
                          uint64_t incarnation, const common::NodeId& reporter,
                          bool first_hand, Changes* changes,
                          const proto::MembershipUpdate* heard = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsLiveMemberLocked(const common::NodeId& id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `u` is signed by its reporter, a live member other than us.
  bool OpinionAuthenticLocked(const proto::MembershipUpdate& u)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Our own signed opinion of `m` (state, its incarnation).
  proto::MembershipUpdate OwnOpinionLocked(const Member& m,
                                           proto::MemberState state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Signed opinions about members the peer's digests show as less dead
  // than we hold them (anti-entropy for opinions), at most `limit`.
  void AddOpinionsForDigestsLocked(
      const google::protobuf::RepeatedPtrField<proto::RecordDigest>& digests,
      int limit, proto::Gossip* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(Member& m, proto::MemberState state,
                      const common::NodeId& reporter, Changes* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gossips `signed_update` about `m` and keeps it as m.opinion.
  void QueueOpinionLocked(Member& m, const proto::MembershipUpdate& signed_update)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmSuspicionTimerLocked(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Our own probe of `id` failed: raises a suspicion, or confirms the one we
  // hold. True if either happened (then the caller tells the suspect).
  bool SuspectLocked(const common::NodeId& id, uint64_t incarnation,
                     Changes* changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnSuspicionTimeout(const common::NodeId& id, uint64_t incarnation,
                          absl::Duration deadline);
  int LiveCountLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `sender` (authenticated) sent us a request: if we suspect it, it is
  // alive though slow (Note [Dynamic suspicion]).
  void HeardFromLocked(const common::NodeId& sender)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Our news and first-hand link samples for one outgoing message.
  void FillGossipLocked(proto::Gossip* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells `peer` what we think of it if that is not ALIVE (it can refute),
  // and carries our own record if `peer` holds an older one (Note
  // [Refutation over our own requests]). Every message to one member
  // (request or ack) goes through here.
  void AddOpinionAboutLocked(const common::NodeId& peer, proto::Gossip* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Replies bring news]: into a reply to outbound-only `peer`, the
  // records that changed since our last reply to it.
  void AddRecordsSinceLastReplyLocked(const common::NodeId& peer, proto::Gossip* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `sender`'s message named us SUSPECT / DEAD at `incarnation`: if that is
  // older than ours, it is owed our record (see Note), sent at once.
  void NoteOpinionAboutUsLocked(const common::NodeId& sender, uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<proto::RecordDigest> DigestsLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Live members other than us that we can send to: not outbound-only
  // (Note [Outbound-only members]).
  std::vector<common::NodeId> DialableOthersLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Suspects the outbound-only members that have been silent for longer
  // than OutboundSilenceLimitLocked (first-hand, like a failed probe).
  void SuspectSilentOutboundOnlyLocked(Changes* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration OutboundSilenceLimitLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every member, in id order from the first id >= `peer` on, cyclically
  // (hash order is not deterministic across runs; starting at the peer, a
  // message that holds only the first max_push_pull_records does not always
  // favour the same ids).
  std::vector<std::pair<common::NodeId, const Member*>> MembersForPushPullLocked(
      const common::NodeId& peer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PeerRef RefLocked(const Member& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Eviction]: removes every other member whose admission has ended
  // by now; warns (once) when our own has.
  void EvictUnadmittedLocked(Changes* changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `id` from the table (not us), reporting it DEAD to listeners.
  void EvictLocked(const common::NodeId& id, absl::string_view why, Changes* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ---- membership_revocation.cc (Note [Revocation]) ----
  // Makes `set` (verified `signed_list`) ours if it is newer: evicts the
  // members it revokes and spreads it. False (nothing done) if not newer.
  bool ApplyRevocationsLocked(const proto::SignedRevocationList& signed_list,
                              RevocationSet set, Changes* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether node `id` presenting `invite` is on our revocation list.
  bool IsRevokedLocked(const common::NodeId& id, const proto::SignedInvite& invite) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Our list, when we hold one, for a push-pull (request or response).
  void AddRevocationsLocked(proto::Gossip* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Revocation notice]: the ack that answers a probe from `sender`
  // when our list revokes it (by id, or it was evicted for its invite):
  // our id, `seq` and the list, nothing else; nullopt otherwise.
  std::optional<proto::Ack> RevocationNotice(const common::NodeId& sender, uint64_t seq);
  void CollectGarbageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  View ViewLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(const Changes& changes);

  // ---- membership.cc: the protocol ----
  enum TimerSlot {
    kProbeTimer, kGossipTimer, kPushPullTimer, kRefreshTimer, kReconnectTimer,
    kHeartbeatTimer, kTimerSlots
  };
  void ScheduleReconnect();
  // Outbound-only nodes: the heartbeat (see Note).
  void ScheduleHeartbeat();
  void HeartbeatTick();
  // We are sending `id` a request now (its last_sent).
  void NoteSentLocked(const common::NodeId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An ack that carries news only (gossip, heartbeat): applied, RTT noted.
  void OnNewsAck(const common::NodeId& id, absl::Duration sent_at,
                 absl::StatusOr<proto::Ack> ack);
  void Stop();
  // Runs `done` once each of `ids` that is still live has sent us a request
  // at or after `since` (steady time), or at `deadline` (Leave, Note
  // [Outbound-only members]).
  void AwaitHeardSince(std::vector<common::NodeId> ids, absl::Duration since,
                       absl::Duration deadline, absl::AnyInvocable<void()> done);
  void ScheduleRefresh();
  void ScheduleProbe();
  void AdjustHealthLocked(int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration ProbeIntervalLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration ProbeTimeout(const common::NodeId& peer);
  void ProbeTick(absl::Duration deadline);
  void OnProbeResult(const common::NodeId& target, uint64_t incarnation,
                     absl::Duration sent_at, absl::StatusOr<proto::Ack> ack);
  void IndirectProbe(const common::NodeId& target, uint64_t incarnation);
  void NotifySuspectLater(const common::NodeId& target);
  // Sends `peer` our record (a ping) unless a message since carried it
  // (Note [Refutation over our own requests]).
  void SendOwedRecordLater(const common::NodeId& peer);
  // Note [Checked verdicts]: a witness for the verdict on `suspect`, or none.
  std::optional<PeerRef> PickWitnessLocked(Member& suspect) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnVerdictCheck(const common::NodeId& id, uint64_t incarnation, absl::Status pulled);
  // A timer this late means our process stalled (Note [Dynamic suspicion]).
  absl::Duration LateTimerThreshold() const {
    return options_.probe_interval / 2;
  }
  // Our own timers fired `lateness` after their deadline.
  void ObserveLatenessLocked(absl::Duration lateness)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleGossip();
  void GossipTick();
  void SchedulePushPull();
  void PushPullTick();
  void PushPull(const PeerRef& to, absl::AnyInvocable<void(absl::Status)> done);
  void OnPushPullResponse(const PeerRef& to, proto::PushPullResponse resp);
  void JoinRound(std::shared_ptr<JoinState> join);
  absl::Status CheckRequest(const PeerInfo& from, int version,
                            const std::string& swarm_id,
                            const std::string& from_id, common::NodeId* sender);
  void ObserveRtt(const common::NodeId& peer, absl::Duration sent_at);
  proto::PingRequest NewPingLocked(uint64_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MembershipOptions options_;
  const identity::Identity* const identity_;
  GossipTransport* const transport_;
  common::Clock* const clock_;
  const common::NodeId self_;
  std::vector<Listener> listeners_;  // fixed once started

  mutable absl::Mutex mu_;
  common::Random rng_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, Member> members_ ABSL_GUARDED_BY(mu_);
  BroadcastQueue broadcasts_ ABSL_GUARDED_BY(mu_);
  LinkStats link_stats_ ABSL_GUARDED_BY(mu_);
  // Second-hand view of other nodes' links: (from, to) -> latest sample.
  absl::flat_hash_map<std::pair<common::NodeId, common::NodeId>,
                      proto::LinkSample>
      links_ ABSL_GUARDED_BY(mu_);
  std::vector<common::NodeId> probe_order_ ABSL_GUARDED_BY(mu_);
  // Suspects we heard of: probed before the round-robin goes on.
  std::vector<common::NodeId> probe_next_ ABSL_GUARDED_BY(mu_);
  size_t probe_index_ ABSL_GUARDED_BY(mu_) = 0;
  size_t link_cursor_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  int health_ ABSL_GUARDED_BY(mu_) = 0;  // see MembershipOptions
  // When we last refuted a suspicion about us (steady time; Note
  // [Refutation over our own requests]).
  absl::Duration last_refuted_ ABSL_GUARDED_BY(mu_) = -absl::InfiniteDuration();
  // When a member last sent us a request (steady time); never: maybe
  // nobody can dial us (same Note).
  absl::Duration last_dialed_ ABSL_GUARDED_BY(mu_) = -absl::InfiniteDuration();
  bool first_push_pull_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool warned_self_unadmitted_ ABSL_GUARDED_BY(mu_) = false;
  // Note [Revocation]: the newest list we hold (serial 0: none), what it
  // revokes, and how many more gossip messages carry it.
  proto::SignedRevocationList revocations_ ABSL_GUARDED_BY(mu_);
  RevocationSet revoked_ ABSL_GUARDED_BY(mu_);
  // Members evicted for an invite the list revokes (Membership::IsRevoked).
  absl::flat_hash_set<common::NodeId> revoked_by_invite_ ABSL_GUARDED_BY(mu_);
  int revocation_sends_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_self_revoked_ ABSL_GUARDED_BY(mu_) = false;
  // Membership::SelfAdmission: set when one of the two warnings is logged.
  absl::Status self_admission_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> bootstrap_ ABSL_GUARDED_BY(mu_);
  std::vector<common::TimerId> timers_ ABSL_GUARDED_BY(mu_);  // periodic
  MembershipStats stats_ ABSL_GUARDED_BY(mu_);

  // Per-sender request budget (Note [Gossip admission]); its own lock so a
  // refused flood never touches mu_ (the classifier takes mu_ briefly, for
  // requests the quota has not refused on the table's size).
  std::unique_ptr<common::PeerQuota> quota_;

  absl::Mutex life_mu_;
  bool destroyed_ ABSL_GUARDED_BY(life_mu_) = false;
  int running_ ABSL_GUARDED_BY(life_mu_) = 0;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_MEMBERSHIP_IMPL_H_

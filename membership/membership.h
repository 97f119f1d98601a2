// SWIM membership (Das et al. 2002, with memberlist's refinements): who is in
// the swarm and alive, what each member hosts, and how fast its links are.
//
// Protocol, per node (Note [SWIM in SkipSwarm]):
//  * every probe_interval, ping the next member of a shuffled round-robin;
//    no ack within probe_timeout => ask indirect_probes other members to
//    ping it (PingReq); no ack by the end of the interval => SUSPECT.
//  * a SUSPECT member that does not refute within suspicion_timeout (by
//    signing its record again with a higher incarnation) becomes DEAD. Every
//    node that hears of the suspicion runs its own timer.
//  * news (signed records, suspect/dead opinions) rides on pings and acks;
//    every gossip_interval news also goes to gossip_fanout random members.
//  * every push_pull_interval, full anti-entropy with one random member;
//    every reconnect_interval, with one random DEAD member (partitions heal).
//  * join = push-pull with a bootstrap address (retried with back-off);
//    leave = sign our record with state LEFT and push it to a few members.
// Records are verified (record.h) before they touch the table; opinions
// are applied only to the incarnation they name.
//
//   auto m = *Membership::Create(options, identity.get(), transport, clock, rng);
//   m->AddListener([&](const MemberChange&) { daemon.Replan(); });
//   net.Serve(address, m.get());                 // or the gRPC server
//   m->Start();
//   m->Join({"seed.example.org:7000"}, [](absl::Status s) { ... });
//   View v = m->GetView();
//
// Thread rule: thread-safe. Timer callbacks, transport callbacks and
// incoming requests may run on any thread; listeners run with no lock held,
// on whichever thread applied the change. Destroy the server/transport that
// calls the handler before the Membership; pending timers and callbacks are
// dropped safely by the destructor.
#ifndef SKIPSWARM_MEMBERSHIP_MEMBERSHIP_H_
#define SKIPSWARM_MEMBERSHIP_MEMBERSHIP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/peer_quota.h"
#include "common/clock.h"
#include "common/random.h"
#include "identity/identity.h"
#include "membership/record.h"
#include "membership/transport.h"
#include "membership/view.h"

namespace skipswarm::membership {

struct MembershipOptions {
  RecordPolicy policy;                 // swarm id, clock skew, admission
  // This node's invitation, carried in its record (Note [Admission] in
  // membership/admission.h); empty in an open swarm.
  proto::SignedInvite invite;
  // This node's join work, carried in its record (Note [Join work] in
  // membership/join_work.h): a nonce meeting policy.admission's bits for
  // this node's key; 0 where none is asked.
  uint64_t join_work = 0;
  // The founder's revocation list to start from (Note [Revocation] in
  // membership/revocation.h); empty: none yet. Create refuses one that does
  // not verify against policy.admission.
  proto::SignedRevocationList revocations;
  std::vector<std::string> addresses;  // advertised "host:port"s
  // Initial record contents (change later with UpdateLocalRecord).
  std::vector<uint32_t> stages;
  uint32_t memory_slots = 1;
  double seconds_per_layer_per_sample = 0;

  // Defaults detect a crashed member in every view within ~2-3 s
  // (membership_sim_test measures it).
  absl::Duration probe_interval = absl::Milliseconds(300);
  // Direct-ack deadline; grows to 3 smoothed RTTs for far peers (at most
  // 60% of probe_interval), the rest of the period is for indirect probes.
  absl::Duration probe_timeout = absl::Milliseconds(120);
  int indirect_probes = 3;
  // Local health awareness (Lifeguard): each failed probe round or
  // refutation of a suspicion about us raises a score (≤ this), each
  // answered probe lowers it; probe interval and timeout scale by
  // (1 + score). A node that is itself slow or cut off then suspects others
  // less eagerly.
  int max_health_score = 8;
  // Suspicion (Lifeguard's dynamic timeout, Note [Dynamic suspicion] in
  // membership_impl.h): a SUSPECT member is declared DEAD after between
  // min = suspicion_timeout * max(1, log10(live members)) and
  // suspicion_max_multiplier * min; the timeout starts at the max and
  // shrinks (log scale) to the min with suspicion_confirmations independent
  // confirmations (other members' own failed probes). A dead member is
  // confirmed by everybody within a few periods; a suspicion raised by one
  // slow member stays long enough for the suspect to refute.
  absl::Duration suspicion_timeout = absl::Milliseconds(1000);
  double suspicion_max_multiplier = 4;
  int suspicion_confirmations = 3;
  absl::Duration gossip_interval = absl::Milliseconds(200);
  int gossip_fanout = 3;
  int retransmit_mult = 4;
  // The first push-pull after Start comes within 1-2 probe intervals, so
  // joiners that met through different peers learn of each other early.
  absl::Duration push_pull_interval = absl::Seconds(5);
  absl::Duration push_pull_timeout = absl::Seconds(2);
  // Push-pull with a random DEAD member this often, so the two sides of a
  // healed partition (or a node back from an outage) find each other again.
  absl::Duration reconnect_interval = absl::Seconds(3);
  // Tombstones (DEAD, LEFT) are kept this long so replays of a departed
  // node's records stay rejected; keep it >= policy.max_age, after which
  // its records are stale anyway.
  absl::Duration dead_retention = absl::Hours(25);
  // Leave: nobody can tell an outbound-only member of our leave, so we go
  // on answering until each one has sent us a request since (its reply
  // carries our LEFT record), for at most this long (Note [Outbound-only
  // members] in membership_impl.h). No wait without such members.
  absl::Duration leave_linger = absl::Seconds(3);
  // Reconnect only to members dead for less than this.
  absl::Duration reconnect_window = absl::Minutes(10);
  // Join: rounds over the bootstrap list, back-off doubling between rounds.
  int join_rounds = 5;
  absl::Duration join_backoff = absl::Milliseconds(250);
  absl::Duration join_backoff_max = absl::Seconds(5);
  // Message limits (each Gossip).
  int max_records_per_message = 64;
  int max_updates_per_message = 64;
  int max_links_per_message = 32;
  int max_push_pull_records = 512;
  // EWMA weights of new samples.
  double rtt_alpha = 0.2;
  double throughput_alpha = 0.3;
  // A throughput sample after this long without one starts the link's
  // average afresh (link_stats.h). One minute: far above the gap between
  // hops of a link in use (an iteration, seconds), and below the planners'
  // throughput_ttl (5 min), so a link they re-admit is averaged anew.
  absl::Duration throughput_restart_after = absl::Minutes(1);
  // Note [Peer quotas] (common/peer_quota.h), Note [Gossip admission]: each
  // sender's requests (Ping, PingReq, PushPull) and their bytes. A member
  // (a live record in our table) sends a few small requests a second and
  // push-pulls of at most ~4.6 MiB (577 records of <= 8 KiB); a stranger
  // only needs to join (a push-pull or ping carrying its own record).
  common::QuotaBudget member_quota = {/*messages_per_second=*/100, /*message_burst=*/200,
                                      /*bytes_per_second=*/16 << 20,
                                      /*byte_burst=*/32 << 20, /*max_streams=*/0};
  common::QuotaBudget stranger_quota = {10, 20, 512 << 10, 2 << 20, 0};
  // All strangers together (PeerQuotaOptions::all_strangers): joiners
  // arriving at once share it, so a Sybil burst of fresh identities costs
  // at most this much, whatever their number.
  common::QuotaBudget all_strangers_quota = {200, 400, 8 << 20, 16 << 20, 0};
  // Strangers whose request carries their own admissible record (a joiner:
  // signed, this swarm, with the open swarm's join work or an invite),
  // together, while all_strangers_quota is short (Note [Joiners' budget] in
  // common/peer_quota.h): a Sybil flood of ids without one cannot starve an
  // honest join. A join is a few requests; unset: none.
  // Its byte burst is counted in the node's memory ceiling
  // (kGossipStrangersBurstBytes in node/daemon/reporting/memory_ceiling.h).
  std::optional<common::QuotaBudget> joiners_quota =
      common::QuotaBudget{20, 40, 256 << 10, 1 << 20, 0};
  // Each such stranger's own budget while its record is its proof (Note
  // [Joiners' budget]): what one join sends a receiver before its record is
  // in the receiver's view. Its join push-pulls are rounds whose back-off
  // starts at join_backoff and doubles (a handful in the first seconds),
  // each carrying its own record (<= 8 KiB) and little else, and the first
  // one admitted makes it a member there; the burst covers those rounds
  // and the rate a ping or two of its protocol period. Far under
  // joiners_quota, so one proven identity cannot hold that empty.
  std::optional<common::QuotaBudget> joiner_quota =
      common::QuotaBudget{2, 4, 32 << 10, 128 << 10, 0};
  // Note [Refusal hold]: a refused request asked again within a second is
  // answered after this at most (zero: at once). The daemons set it.
  absl::Duration quota_max_hold = absl::ZeroDuration();
};

struct MembershipStats {
  uint64_t records_rejected = 0;   // forged / stale / wrong swarm / ...
  uint64_t requests_rejected = 0;  // version, swarm id, identity mismatch
  // Records and requests refused by the swarm's admission policy (no,
  // expired, forged or another node's invite; not on the allow-list: Note
  // [Admission] in membership/admission.h). Also counted in the two above.
  uint64_t admission_refused = 0;
  // Members removed from the table because their admission ended (an
  // expired invite; Note [Eviction] in membership_impl.h).
  uint64_t evicted = 0;
  // The revocation list held (serial 0: none) and its entries; lists
  // refused (forged, another swarm's, malformed).
  uint64_t revocation_serial = 0;
  uint64_t revoked_entries = 0;
  uint64_t revocations_rejected = 0;
  // Probes of revoked members answered with the list (Note [Revocation
  // notice] in membership_revocation.cc).
  uint64_t revocation_notices = 0;
  // Opinions unsigned, forged, from a non-member, or naming an incarnation
  // of ours out of reach (Note [Incarnation bounds]).
  uint64_t opinions_rejected = 0;
  // Record signatures checked, and requests refused whole for their size
  // or their sender's rate (Note [Gossip admission]).
  uint64_t signatures_checked = 0;
  uint64_t messages_refused = 0;
  uint64_t probes = 0;
  uint64_t indirect_probes = 0;
  uint64_t suspicions = 0;  // raised by this node
  uint64_t refutations = 0; // of suspicions about this node
  uint64_t confirmations = 0;  // independent confirmations counted
  uint64_t deferred_verdicts = 0;  // suspicion timer fired late (we stalled)
  uint64_t late_ticks = 0;         // probe tick fired late (we stalled)
  int health_score = 0;      // current local health score (0 = healthy)
};

class Membership final : public GossipHandler {
 public:
  using Listener = std::function<void(const MemberChange&)>;

  // `identity`, `transport` and `clock` must outlive the Membership.
  static absl::StatusOr<std::unique_ptr<Membership>> Create(
      MembershipOptions options, const identity::Identity* identity,
      GossipTransport* transport, common::Clock* clock, common::Random rng);
  ~Membership() override;

  // REQUIRES: before Start.
  void AddListener(Listener listener);
  // Starts the periodic probe, gossip and push-pull timers.
  void Start();
  // Contacts the bootstrap addresses until one push-pull succeeds; `done`
  // gets OK, or Unavailable naming each address's last error.
  void Join(std::vector<std::string> bootstrap,
            absl::AnyInvocable<void(absl::Status)> done);
  // Announces LEFT to a few members, then stops the timers; `done` runs
  // once those pushes are answered or timed out and every live
  // outbound-only member has been answered since (at most leave_linger).
  void Leave(absl::AnyInvocable<void()> done);
  // Same, with a last edit of the record signed together with LEFT (the
  // daemon records the last iteration it trains in, Note [Leaving] in
  // node/daemon/gossip/training_members.h).
  void Leave(absl::FunctionRef<void(proto::NodeRecord*)> edit,
             absl::AnyInvocable<void()> done);
  // Stops the timers (a crash, from the swarm's point of view).
  void Stop();
  // Stop, then drops every later timer, transport callback and listener
  // call, and waits for those already running: once it returns no listener
  // runs again, so what the listeners touch may go. The table stays
  // readable and requests are still answered (without listener calls).
  // Idempotent; the destructor calls it. REQUIRES: not called from a
  // listener or another callback of this Membership (it would wait for
  // itself).
  void Shutdown();
  // Push-pull with every live member at once (not just gossip's random
  // few), so a change of our record is known everywhere when `done` runs.
  // `done(reached, asked)`: how many answered out of how many were asked.
  // The daemon's joiner uses it before it relies on others knowing its
  // entry iteration (node/daemon, Note [Entry iteration]).
  void Announce(absl::AnyInvocable<void(int reached, int asked)> done);

  // Edits this node's record (stages, slots, speed, digests, iteration),
  // re-signs it with a higher incarnation and gossips it.
  absl::Status UpdateLocalRecord(
      absl::FunctionRef<void(proto::NodeRecord*)> edit);
  absl::Status SetComputeSpeed(double seconds_per_layer_per_sample);
  // Note [Slots re-announced]: re-signs the record with `slots` memory
  // slots when that is fewer than it holds (true), so planners stop giving
  // this node more micro-batches than it can hold; false (nothing signed)
  // when it is not fewer. InvalidArgument for 0.
  absl::StatusOr<bool> LowerMemorySlots(uint32_t slots);
  // Note [Revocation] (membership/revocation.h): makes `list`, signed by the
  // swarm's founder, this node's revocation list if its serial is higher
  // than the one held: the members it names are evicted and it is gossiped.
  // AlreadyExists when it is not newer; the verification's error otherwise.
  absl::Status AddRevocations(const proto::SignedRevocationList& list);
  // Whether the list held revokes node `id`: named by it, or evicted for an
  // invite it revokes (for the daemon's data-service quotas, which know a
  // caller by its id only).
  bool IsRevoked(const common::NodeId& id) const;
  // OK while the swarm still admits this node; FailedPrecondition naming the
  // cause once it learned that it was revoked (Note [Revocation]) or that
  // its invite expired (Note [Eviction]): every member refuses it then, so
  // the daemon stops instead of running on refused.
  absl::Status SelfAdmission() const;
  // For the pipeline transport: `bytes` moved with `peer` in `elapsed`.
  void ReportTransfer(const common::NodeId& peer, uint64_t bytes,
                      absl::Duration elapsed);
  // For the pipeline transport: a round trip it timed (frame -> ack).
  void ReportRtt(const common::NodeId& peer, absl::Duration rtt);

  // Reachability self-check: asks a live member to ping us at our first
  // advertised address (a PingReq whose target is ourselves). `done` gets
  // OK, FailedPrecondition explaining that peers cannot reach us (NAT,
  // firewall, wrong advertised address), or Unavailable if no member
  // answered the request at all.
  void CheckReachability(absl::AnyInvocable<void(absl::Status)> done);

  const common::NodeId& id() const;
  View GetView() const;
  MembershipStats stats() const;
  // Note [Peer quotas]: the per-sender budget of gossip requests, for its
  // refusal counts (the daemon's /metrics).
  const common::PeerQuota& quota() const;

  // GossipHandler (called by the transport's server side).
  void HandlePing(const PeerInfo& from, const proto::PingRequest& req,
                  AckCallback reply) override;
  void HandlePingReq(const PeerInfo& from, const proto::PingRequest& req,
                     AckCallback reply) override;
  void HandlePushPull(const PeerInfo& from, const proto::PushPullRequest& req,
                      PushPullCallback reply) override;

 private:
  class Impl;
  explicit Membership(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_MEMBERSHIP_H_

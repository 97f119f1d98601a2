// What the hop after a checked replica does with its verdicts (Note
// [Verify trust]): VerifyTrust counts them per member and condemns a
// member whose mismatches outweigh its matches, and VerifiedRoutingView is a
// routing view without the condemned members, so this node's planner and
// route repairs stop sending micro-batches through them.
//
//   VerifyTrust trust(VerifyTrustOptions{});
//   server_options.on_check_verdict = [&](const PeerId& x, bool match) {
//     if (trust.Record(x, match)) ... publish x as a ban ...
//   };
//   VerifiedRoutingView routing(&members_view, &trust);   // the planner's view
//
// Note [Verify trust]
// A verdict comes from CheckOutputAgainstSketch at this node, about a
// member on probation checked against a trusted replica (Note [Verify
// sampling]), so a mismatch is that member's. One mismatch adds a strike;
// a match takes forgive_per_match (0.25) off, never below 0; at
// exclude_at (3) strikes the member is condemned, for good (a restart of
// this node forgets it; the published ban does not). Matches forgive so
// that an honest member is never condemned by a rare false mismatch
// (honest replicas: 0 of several hundred checks in every measurement,
// tests/adversarial/README.md "Verified compute"); they forgive only
// partly so that a liar cannot buy its way out with honest micro-batches:
// one that lies on a share p of them gains p - 0.25 (1 - p) strikes per
// check, and is condemned whenever p > 0.2 (a consistent liar after 3
// checks). A lie on a smaller share moves the loss less and is left to
// robust averaging.
//
// Note [Verify bans]
// A verdict stays with the node that reached it unless others can act on
// it: the hop after X (the catcher) usually hosts the next stage, so it is
// neither X's replica peer (Note [Gossiped bans] counts only those) nor,
// except after the last stage, a data node that plans routes. The catcher
// names X in its record's bans (PublishBans in the gossip daemon), and
// every member adopts the ban of X, for routing (VerifiedRoutingView) and,
// where it shares a stage with X, for averaging (QuorumBans), when
//   - X is a live member on probation in this member's view (verified
//     compute judges those at the full rate, Note [Verify sampling]; a
//     trusted X only under Note [Trusted verify bans]), and
//   - at least kVerifyBanQuorum (2) distinct live, trusted members other
//     than X and this member name X in their bans.
// Why a quorum of accusers and not evidence: evidence another member could
// check would be X's output frame and Y's sketch with signatures binding
// them to X and Y; frames are authenticated by the TLS channel only, so a
// catcher could forge both, and a third party cannot tell a forged
// mismatch from a real one. The signatures now exist where the stage
// server is given keys (Note [Checkable evidence] in
// node/compute/evidence.h: X's signed commitment, Y's signed answer,
// CheckEvidence, the catcher's kept pieces), and a catcher serves them: a
// member that sees a ban of a live newcomer X the quorum did not adopt
// fetches the accuser's pieces and, on one valid mismatch of X against a
// trusted verifier, adopts the ban of X as if the quorum held (Note
// [Evidence bans] in evidence_bans.h: VerifyQuorumBans takes those bans,
// so routing and averaging read one set by one rule). A trusted X keeps
// the quorum rule only (one piece of two trusted members disagreeing does
// not say which lied), unless a piece proves X signed a false input: X's
// own signatures contradict each other, and that ban holds whatever X's
// trust (Note [Evidence bans]). Why not trust weights alone: one trusted liar
// would then ban any newcomer. With the quorum, a single lying accuser (or
// any number of newcomers: they count for nothing) bans nobody; two
// trusted liars can ban a newcomer, never a trusted member (this rule
// applies to a trusted member only under Note [Trusted verify bans]).
// An honest swarm reaches the quorum
// when two catchers see X's outputs: two hosts of the stage after X, or
// two data nodes after the last stage; without signed frames a lone
// catcher protects its own routes and repairs only (a data node that
// catches X is a planner, so its routes already avoid X), and with them
// its evidence convicts a newcomer X everywhere (Note [Evidence bans]). The quorum is recomputed from the current view:
// accusers that die or leave lift it. A newcomer vouched for (it leaves
// probation) before two catchers condemn it: a catcher that vouched for it
// withdraws its vouch at its first mismatch (Note [Vouch withdrawal] in
// node/daemon/gossip/newcomer_ledger.h); one that did not still names it
// in its bans, which then count under Note [Trusted verify bans].
//
// Note [Trusted disputes]
// Trusted members are checked too, at a lower rate (StageServerOptions::
// verify_trusted_rate; the daemon's is a quarter of --verify_rate), so that
// a replica that turns hostile after earning trust is caught. X and Y are
// both trusted there, so a mismatch says that one of them lied, not which.
// RecordPair keeps strikes per pair {X, Y} (a mismatch adds 1, a match
// between the two takes forgive_per_match off, floor 0); a pair at
// dispute_at (2) strikes disputes, and a member that disputes with 2
// distinct partners that are not condemned is condemned here. One liar
// among honest replicas disputes with every partner the checks pair it
// with, while an honest member disputes with the liar only: one liar never
// gets an honest member condemned, and with only two trusted replicas of a
// stage nobody is (there is no third to attribute by). Two liars can
// condemn an honest member they both dispute with, unless one of them is
// condemned first (condemned partners do not count). The verdict is this
// node's: it routes around the member and names it in its record's bans,
// which spread by Note [Trusted verify bans].
// A frame that proves its producer signed a false input (Note [Evidence
// bans]) is neither a strike nor a dispute: the catcher condemns the
// producer at once, trusted or not (VerifyTrust::Condemn), since its own
// signatures say it lied and no partner is needed to attribute it. Only
// that proof does; a sketch mismatch of a trusted member keeps the pair
// rule above.
//
// Note [Trusted verify bans]
// How a trusted member condemned under Note [Trusted disputes] leaves
// other members' routes: the rule of Note [Verify bans] (VerifyQuorumBans,
// so VerifiedRoutingView for routing and QuorumBans for averaging), with
// two differences for an accused that is trusted:
//   - Only accusers that share no stage with it count. A record's bans
//     also carry its group bans (Note [Group bans]: robust averaging, which
//     now and then bans an honest, noisy replica on one peer's judgement),
//     and only a stage peer averages with the accused; such bans spread by
//     Note [Gossiped bans]'s stage-peer majority instead. The catchers of
//     an honest swarm host the next stage or are data nodes, so this costs
//     them nothing unless a catcher also hosts the accused's stage.
//   - It is never adopted while it is the last trusted host of one of its
//     stages (among the live members, those adopted in the same pass and
//     this node's distrusted left out): banning it would leave the stage
//     without a route. Condemnation needs disputes with 2 partners, i.e. 3
//     trusted replicas, so an honest verdict always leaves others.
// A ban that rests on a false-input proof (Note [Evidence bans]) is not a
// verdict that may be wrong: X signed an input hash beside a signed output
// of the hop before that says otherwise, which no one but X can make. It
// holds whatever X's trust and wherever its accuser is, and the last-host
// exemption does not keep X: a proven tamperer computes on inputs other
// than the ones it received, so every step trained through it poisons the
// model (and the group's averaged weights with it), while a stage left
// without a trusted route stalls, visibly, until a newcomer or a stage move
// covers it, and loses nothing already trained. The catcher already drops
// it from its own routes (its condemned leave them whatever the stage
// keeps); the others now do the same. A proven member does count as banned
// in the same pass, so it never keeps another accused as "another host".
// Safety: one lying trusted accuser (any number of newcomers) bans nobody,
// as for newcomers. Two trusted liars that host other stages can take an
// honest trusted member out of routes and of its stage peers' averaging
// (it still gets the reduced shards, so its weights stay the group's)
// where a third host of its stage remains; they can already condemn it at
// their own nodes (Note [Trusted disputes]). Checkable evidence does not
// close that gap (Note [Evidence bans]): a signed piece shows that two
// trusted members disagree, not which of them lied. Nor can liars use a
// proof against an honest member: only its own key signs one.
//
// Thread rule: VerifyTrust is thread-safe; VerifiedRoutingView is as thread-safe
// as the view it wraps (its own cache is locked). Both borrow: the inner view and the trust outlive
// the VerifiedRoutingView.
#ifndef SKIPSWARM_NODE_STAGE_VERIFY_TRUST_H_
#define SKIPSWARM_NODE_STAGE_VERIFY_TRUST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/node_id.h"
#include "node/stage/evidence_bans.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct VerifyTrustOptions {
  // Strikes at which a member is condemned; <= 0: never.
  double exclude_at = 3;
  // Strikes one matching check takes off (the floor is 0).
  double forgive_per_match = 0.25;
  // Pair strikes at which two trusted members dispute (Note [Trusted
  // disputes]); <= 0: never.
  double dispute_at = 2;
};

struct MemberVerdicts {
  int64_t matches = 0;
  int64_t mismatches = 0;
  double strikes = 0;
  bool condemned = false;
};

class VerifyTrust {
 public:
  explicit VerifyTrust(VerifyTrustOptions options = {});

  // One verdict on `checked`. True when it condemned the member (once).
  bool Record(const common::NodeId& checked, bool match);
  // A proof that `id` lied (a false input, Note [Evidence bans]): counted
  // as a mismatch and condemns it at once, whatever its trust and strikes.
  // True when it condemned the member (once).
  bool Condemn(const common::NodeId& id);
  // One verdict on trusted `checked` against trusted `verifier`'s sketch
  // (Note [Trusted disputes]): the members it condemned (ascending, once).
  std::vector<common::NodeId> RecordPair(const common::NodeId& checked,
                                         const common::NodeId& verifier, bool match);
  bool Condemned(const common::NodeId& id) const;
  // The condemned members, ascending.
  std::vector<common::NodeId> condemned() const;
  std::map<common::NodeId, MemberVerdicts> verdicts() const;
  // Increases whenever a member is condemned.
  uint64_t generation() const;
  // The members a mismatch named since the last call, ascending (Note
  // [Vouch withdrawal] in node/daemon/gossip/newcomer_ledger.h): the checked
  // member of Record, both members of a mismatching RecordPair (either may
  // have lied). Bounded by the members checked in between.
  std::vector<common::NodeId> TakeMismatched();

 private:
  const VerifyTrustOptions options_;
  mutable absl::Mutex mu_;
  // Distinct partners `id` disputes with, condemned ones left out.
  int DisputesLocked(const common::NodeId& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<common::NodeId, MemberVerdicts> verdicts_ ABSL_GUARDED_BY(mu_);
  // Strikes per pair of trusted members, the smaller id first.
  std::map<std::pair<common::NodeId, common::NodeId>, double> pairs_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<common::NodeId> mismatched_ ABSL_GUARDED_BY(mu_);
};

// The distinct trusted accusers of a ban Note [Verify bans] adopts.
inline constexpr size_t kVerifyBanQuorum = 2;

// The members `self` bans by Notes [Verify bans] and [Trusted verify bans]
// from `live` (the live members as this node's view shows them, with their
// stages, published bans and probation), each with its accusers
// (ascending). Accusers in `distrusted` (this node's own bans and verdicts)
// do not count. `evidenced` (Note [Evidence bans] in evidence_bans.h): the
// bans this member adopted on checked evidence; each holds, with its
// accuser alone, where the quorum does not already name the accused, while
// the accused is a live member on probation, or, for a false-input proof
// (EvidenceBan::proven), a live member whatever its trust, the last trusted
// host of a stage too. Pure.
std::map<common::NodeId, std::vector<common::NodeId>> VerifyQuorumBans(
    const common::NodeId& self, const std::vector<PeerInfo>& live,
    const std::set<common::NodeId>& distrusted, const EvidencedBans& evidenced = {});

// `inner` as routing sees it without the members `trust` condemned and
// those Note [Verify bans] adopts from the alive members' records and
// `evidence` (optional, Note [Evidence bans]; `self` is this node): they are neither listed nor replicas, but IsAlive still answers as `inner`
// (hops already routed through them go on and end as usual). MarkDead
// reaches `inner`. version() moves with either.
class VerifiedRoutingView final : public SwarmView {
 public:
  VerifiedRoutingView(SwarmView* inner, const VerifyTrust* trust, common::NodeId self,
                      const EvidenceBans* evidence = nullptr)
      : inner_(inner), trust_(trust), self_(self), evidence_(evidence) {}
  std::vector<PeerInfo> Members() const override;
  bool IsAlive(const common::NodeId& id) const override { return inner_->IsAlive(id); }
  std::vector<common::NodeId> Replicas(int stage) const override;
  void MarkDead(const common::NodeId& id) override { inner_->MarkDead(id); }
  // Moves with `inner` (a view whose records' bans change must move too:
  // gossip's does with every snapshot), with this node's verdicts and
  // with its evidence bans.
  uint64_t version() const override {
    return inner_->version() + trust_->generation() +
           (evidence_ != nullptr ? evidence_->generation() : 0);
  }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    return inner_->Link(from, to);
  }
  // `inner`'s record, the condemned's too: the daemons' data node drivers
  // route with this view, and a relayed stopping claim is confirmed by the
  // named node's own record (Note [Confirmed stopping] in
  // node/train/data_node_driver.h). With the base class's nullopt no
  // relayed claim was ever confirmed in a daemon: its micro-batch was
  // dropped at its deadline instead of re-run (a last replica's stop
  // ended an iteration with 0 micro-batches and a NaN loss).
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override {
    return inner_->StopAfter(id);
  }
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override {
    return inner_->Incarnation(id);
  }

 private:
  // This node's condemned and the verify quorum's bans. A function of the
  // inner view (members, liveness, records) and of this node's verdicts,
  // all of which move version(): computed once per version, not on every
  // Members() / Replicas() call of the planner and the route repairs.
  std::set<common::NodeId> Excluded() const ABSL_LOCKS_EXCLUDED(mu_);

  SwarmView* const inner_;
  const VerifyTrust* const trust_;
  const common::NodeId self_;
  const EvidenceBans* const evidence_;  // may be null
  mutable absl::Mutex mu_;
  mutable std::optional<uint64_t> excluded_version_ ABSL_GUARDED_BY(mu_);
  mutable std::set<common::NodeId> excluded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_VERIFY_TRUST_H_

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
// Thread rule: VerifyTrust is thread-safe; VerifiedRoutingView is as thread-safe
// as the view it wraps. Both borrow: the inner view and the trust outlive
// the VerifiedRoutingView.
#ifndef SKIPSWARM_NODE_STAGE_VERIFY_TRUST_H_
#define SKIPSWARM_NODE_STAGE_VERIFY_TRUST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/node_id.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct VerifyTrustOptions {
  // Strikes at which a member is condemned; <= 0: never.
  double exclude_at = 3;
  // Strikes one matching check takes off (the floor is 0).
  double forgive_per_match = 0.25;
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
  bool Condemned(const common::NodeId& id) const;
  // The condemned members, ascending.
  std::vector<common::NodeId> condemned() const;
  std::map<common::NodeId, MemberVerdicts> verdicts() const;
  // Increases whenever a member is condemned.
  uint64_t generation() const;

 private:
  const VerifyTrustOptions options_;
  mutable absl::Mutex mu_;
  std::map<common::NodeId, MemberVerdicts> verdicts_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// `inner` as routing sees it without the members `trust` condemned: they
// are neither listed nor replicas, but IsAlive still answers as `inner`
// (hops already routed through them go on and end as usual). MarkDead
// reaches `inner`. version() moves with either.
class VerifiedRoutingView final : public SwarmView {
 public:
  VerifiedRoutingView(SwarmView* inner, const VerifyTrust* trust) : inner_(inner), trust_(trust) {}
  std::vector<PeerInfo> Members() const override;
  bool IsAlive(const common::NodeId& id) const override { return inner_->IsAlive(id); }
  std::vector<common::NodeId> Replicas(int stage) const override;
  void MarkDead(const common::NodeId& id) override { inner_->MarkDead(id); }
  uint64_t version() const override { return inner_->version() + trust_->generation(); }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    return inner_->Link(from, to);
  }

 private:
  SwarmView* const inner_;
  const VerifyTrust* const trust_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_VERIFY_TRUST_H_

// Lifeguard's dynamic suspicion timeout (Dadgar et al. 2018, "LHA-Suspicion";
// Note [Dynamic suspicion] in membership_impl.h): a suspicion starts with a
// long timeout and shrinks, on a log scale, towards a short one as other
// members independently confirm it. A lone suspicion (often raised by a
// member that is itself slow) gives the suspect time to refute; a member
// that many others fail to reach is declared dead quickly.
//
//   Suspicion s(first_reporter, now, bounds);
//   if (s.Confirm(other_reporter)) { re-arm the timer at s.Deadline(); }
//   s.HeardFromSuspect(now);  // a request from the suspect: re-arm too
//
// Thread rule: thread-compatible (Membership guards it with its mutex).
#ifndef SKIPSWARM_MEMBERSHIP_SUSPICION_H_
#define SKIPSWARM_MEMBERSHIP_SUSPICION_H_

#include <vector>

#include "absl/time/time.h"
#include "common/node_id.h"

namespace skipswarm::membership {

struct SuspicionBounds {
  absl::Duration min;  // after `confirmations` independent confirmations
  absl::Duration max;  // with none
  int confirmations = 0;  // k; 0: always `min`
};

// The bounds for a swarm of `live_members` (ALIVE or SUSPECT, ourselves
// included): min = `base` * max(1, log10(live_members)), so gossip has time
// to reach everybody in larger swarms; max = `max_multiplier` * min; k =
// `confirmations`, but 0 when fewer than k + 2 members could confirm (the
// suspect and the first reporter do not count), as in memberlist.
SuspicionBounds ComputeSuspicionBounds(absl::Duration base, double max_multiplier,
                                       int confirmations, int live_members);

// max - (max - min) * log(c + 1) / log(k + 1), never below min.
absl::Duration SuspicionTimeout(const SuspicionBounds& bounds, int c);

class Suspicion {
 public:
  // `first_reporter` may be zero (unknown: the suspicion came in a digest).
  Suspicion(const common::NodeId& first_reporter, absl::Duration start,
            SuspicionBounds bounds);

  // Counts `reporter` as a confirmation once (not the first reporter, not a
  // zero id, at most k). True if it counted: the caller re-arms its timer
  // and passes the confirmation on.
  bool Confirm(const common::NodeId& reporter);
  // Whether Confirm(reporter) would not count (already counted, the first
  // reporter, zero, or k reached).
  bool HasReporter(const common::NodeId& reporter) const;

  // The suspect itself sent us a request at `at` (an authenticated sign of
  // life: it is slow to answer, not dead). The verdict then waits until it
  // has been silent for `min`, but never past start + max, so a member that
  // talks but never answers is still declared dead.
  void HeardFromSuspect(absl::Duration at);

  int confirmations() const { return static_cast<int>(confirmers_.size()); }
  absl::Duration start() const { return start_; }
  absl::Duration Timeout() const { return SuspicionTimeout(bounds_, confirmations()); }
  absl::Duration Deadline() const;
  const SuspicionBounds& bounds() const { return bounds_; }

 private:
  common::NodeId first_reporter_;
  absl::Duration start_;
  SuspicionBounds bounds_;
  std::vector<common::NodeId> confirmers_;
  absl::Duration heard_ = -absl::InfiniteDuration();
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_SUSPICION_H_

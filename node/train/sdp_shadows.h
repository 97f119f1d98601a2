// SdpShadowStages: the frozen copies a backward-masking SDP node runs
// forward but does not train (model/sdp_assignment.h), kept current.
//
// Note [SDP frozen stages]: a backward-masking node hosts its subnetwork's
// stages as usual (in its record, averaged with every other host) and, on
// the side, a frozen copy of every other stage (TorchStageCompute with
// `frozen`: no gradients, no AdamW state, not in its record, so nobody
// routes through it and it joins no averaging). Before each iteration i
// starts, the node fetches each frozen stage's state at the start of i
// from the lowest-id live host of that stage (GroupComm::FetchState, the
// path replica re-sync uses; the host serves it once its update of i - 1
// is applied) and imports the weights. The host cannot move past i before
// the fetch is answered: its update of i needs this data node at the
// barrier of i. So the weights a frozen copy uses are never stale
// (staleness 0, exactly the reference's); the price is one state transfer
// per frozen stage per iteration (stats().bytes; the state also carries
// the host's AdamW moments, which the import ignores). If a fetch fails
// the copy keeps its older weights and stats() counts how many iterations
// old they are.
//
//   SdpShadowStages shadows(self, {{1, frozen1}, {3, frozen3}}, &view, &group);
//   trainer.SetBeforeIteration([&](uint64_t it, auto done) {
//     shadows.Refresh(it, std::move(done));
//   });
//
// Thread rule: thread-safe; `done` runs on a group thread with no lock
// held. Borrows the computes, the view and the group, which must outlive
// it; destroying it turns pending callbacks into no-ops.
#ifndef SKIPSWARM_NODE_TRAIN_SDP_SHADOWS_H_
#define SKIPSWARM_NODE_TRAIN_SDP_SHADOWS_H_

#include <cstdint>
#include <map>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/lifetime_guard.h"
#include "node/compute/stage_compute.h"
#include "node/stage/swarm_view.h"
#include "node/train/group_comm.h"

namespace skipswarm::node {

struct ShadowStats {
  int64_t refreshes = 0;  // successful stage imports
  int64_t failures = 0;
  int64_t bytes = 0;      // state bytes fetched, all stages, all iterations
  int64_t last_bytes = 0;  // fetched for the last refreshed iteration
  // Iterations since the oldest frozen copy's last refresh, at the latest
  // Refresh (0: every copy holds its hosts' current weights).
  int64_t staleness = 0;
  int64_t max_staleness = 0;
};

class SdpShadowStages {
 public:
  SdpShadowStages(common::NodeId self, std::map<int, StageCompute*> shadows,
                  const SwarmView* view, GroupComm* group);
  ~SdpShadowStages();

  // Refreshes every frozen stage (one after another) to its state at the
  // start of `iteration`; done gets the first error (the rest still ran).
  void Refresh(uint64_t iteration, absl::AnyInvocable<void(absl::Status)> done);

  ShadowStats stats() const;

 private:
  struct Pass;
  void Next(std::shared_ptr<Pass> pass, std::map<int, StageCompute*>::const_iterator it);

  const common::NodeId self_;
  const std::map<int, StageCompute*> shadows_;
  const SwarmView* const view_;
  GroupComm* const group_;
  mutable absl::Mutex mu_;
  ShadowStats stats_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> fresh_at_ ABSL_GUARDED_BY(mu_);  // stage -> iteration of its weights
  common::LifetimeGuard guard_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SDP_SHADOWS_H_

// NodeTrainer: one node's iteration loop (DESIGN.md §1, §6), the same on
// data nodes and relays:
//
//   data node: driver.RunIteration(i) ──┐
//                                       ├─> group.Barrier(i) -> server.EndIteration(i)
//   relay:     ─────────────────────────┘     -> per hosted stage: TakeGradients,
//      group.AllReduce(i, stage) -> ApplyUpdate(sum, visits) (visit-weighted,
//      clipped AdamW) -> report -> server.BeginIteration(i + 1) -> next
//
//   NodeTrainer trainer(&server, computes, &driver_or_null, &group, &clock);
//   trainer.Run(/*first=*/0, /*count=*/50, on_iteration, on_done);
//
// Digests: every replica sends its parameter digest (before the step) with
// its gradients; a disagreement is logged and reported (re-sync from a peer
// is the membership issue's state transfer).
//
// Thread rule: thread-safe; callbacks run on clock / compute threads with no
// lock held. Everything borrowed must outlive the trainer; Stop() and then
// destroying it is safe at any time (pending callbacks become no-ops).
#ifndef SKIPSWARM_NODE_TRAIN_NODE_TRAINER_H_
#define SKIPSWARM_NODE_TRAIN_NODE_TRAINER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "node/compute/stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/train/data_node_driver.h"
#include "node/train/group_comm.h"

namespace skipswarm::node {

struct StageStep {
  UpdateStats update;
  int64_t visits_here = 0;   // this replica's visits
  int64_t visits_total = 0;  // over the replica group
  int replicas = 0;          // contributors
  bool digests_agree = true;
  uint64_t digest_after = 0;
};

struct NodeIterationReport {
  uint64_t iteration = 0;
  std::optional<IterationReport> data;  // data nodes only
  std::map<int, StageStep> stages;
  StageServerStats server;
  absl::Status status;  // a failed reduce or update
};

class NodeTrainer {
 public:
  using IterationCallback = absl::AnyInvocable<void(const NodeIterationReport&)>;
  using DoneCallback = absl::AnyInvocable<void(absl::Status)>;

  // `driver` is null on nodes that host no data stage.
  NodeTrainer(StageServer* server, std::map<int, StageCompute*> stages, DataNodeDriver* driver,
              GroupComm* group, common::Clock* clock);
  ~NodeTrainer();

  // Runs iterations [first, first + count). REQUIRES: not running.
  void Run(uint64_t first, uint64_t count, IterationCallback on_iteration, DoneCallback on_done);
  // Stops after the current iteration's update (on_done gets CANCELLED).
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_NODE_TRAINER_H_

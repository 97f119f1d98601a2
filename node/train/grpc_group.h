// GrpcGroupComm: GroupComm between daemons over StageService (proto/
// stage.proto), served on its own port next to the pipeline transport.
//
//   GrpcGroupOptions o{.self = me, .listen_address = "0.0.0.0:7421"};
//   SS_ASSIGN_OR_RETURN(auto group, GrpcGroupComm::Create(o, &view, clock));
//   SS_RETURN_IF_ERROR(group->AwaitPeers(absl::Seconds(60)));   // startup
//   group->AllReduce(it, stage, contribution, done);
//
// Note [Gradient exchange]: each replica streams its whole contribution
// (flat float32 gradient sum in <= 1 MiB GradientChunks, with its visits and
// parameter digest) to every other live replica of the stage with
// PushGradients; the receiver answers one GradientAck after the last chunk.
// A replica completes when it holds a contribution from every replica the
// view still calls alive, and adds them (its own included) in ascending
// node-id order, so all replicas compute the same bytes. A replica that
// dies before sending is dropped once the view marks it dead (transport
// failure or a failed push); one that dies half-way may leave replicas
// with different sums, which the next iteration's digest check reports.
// All-to-all moves copies per replica: fine for the 2-3 replicas a
// stage has; a ring or tree is the bandwidth-aware next step.
//
// Note [Barrier message]: the iteration barrier rides the same RPC: a data
// node that finished iteration i pushes one empty GradientChunk with
// stage = kBarrierStage to every member; a node passes the barrier once
// every live data node's message (or its own) is in.
//
// Thread rule: thread-safe; `done` callbacks run on the clock's timer
// thread with no lock held. The view and clock must outlive it.
#ifndef SKIPSWARM_NODE_TRAIN_GRPC_GROUP_H_
#define SKIPSWARM_NODE_TRAIN_GRPC_GROUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "node/stage/swarm_view.h"
#include "node/train/group_comm.h"

namespace skipswarm::node {

inline constexpr uint32_t kBarrierStage = 0x7fffffff;

struct GrpcGroupOptions {
  common::NodeId self;
  std::string listen_address = "127.0.0.1:0";
  std::string swarm_id;
  absl::Duration push_deadline = absl::Seconds(60);
  // How often pending barriers / reduces re-check the view for deaths.
  absl::Duration recheck = absl::Milliseconds(50);
  // Liveness of awaited members (Note [Group liveness] in grpc_group.cc).
  absl::Duration probe_interval = absl::Seconds(1);
  absl::Duration probe_timeout = absl::Milliseconds(500);
  // Largest accepted contribution (elements).
  int64_t max_elements = int64_t{1} << 28;
};

class GrpcGroupComm final : public GroupComm {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcGroupComm>> Create(const GrpcGroupOptions& options,
                                                              SwarmView* view,
                                                              common::Clock* clock);
  ~GrpcGroupComm() override;

  int port() const;
  // Waits (blocking) until every member's StageService answers Health, or
  // fails with DEADLINE_EXCEEDED naming the missing ones. For startup.
  absl::Status AwaitPeers(absl::Duration timeout);

  void Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
               BarrierDone done) override;
  void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                 ReduceDone done) override;

  class Impl;

 private:
  explicit GrpcGroupComm(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_GRPC_GROUP_H_

// ForwardingGroup: a GroupComm that passes every call to another one, for
// test groups that change one or two calls (hold a reduce back, fail a
// round, always know a data node) and must pass the rest on unchanged.
// Every virtual of GroupComm is forwarded here, so a wrapper that derives
// from it cannot hide a call the inner group answers (a wrapper that
// forgot HasLiveDataNode or WakeOnDataNode answered GroupComm's defaults
// instead of the hub's).
//
//   class FailingGroup final : public ForwardingGroup {
//    public:
//     using ForwardingGroup::ForwardingGroup;
//     void AllReduce(...) override { ... or ForwardingGroup::AllReduce(...); }
//   };
//
// Thread rule: as thread-safe as the inner group, which outlives it.
#ifndef SKIPSWARM_NODE_TRAIN_FORWARDING_GROUP_H_
#define SKIPSWARM_NODE_TRAIN_FORWARDING_GROUP_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "node/train/group_comm.h"

namespace skipswarm::node {

class ForwardingGroup : public GroupComm {
 public:
  explicit ForwardingGroup(GroupComm* inner) : inner_(inner) {}

  void Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
               BarrierDone done) override {
    inner_->Barrier(iteration, self, data_node, std::move(done));
  }
  void StateIterationBound(uint64_t iteration, const common::NodeId& self,
                           absl::Duration bound) override {
    inner_->StateIterationBound(iteration, self, bound);
  }
  void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                 ReduceDone done) override {
    inner_->AllReduce(iteration, stage, std::move(contribution), std::move(done));
  }
  bool SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) override {
    return inner_->SoleReplica(iteration, stage, self);
  }
  bool HasLiveDataNode(uint64_t iteration) override { return inner_->HasLiveDataNode(iteration); }
  std::optional<uint64_t> LaterDataNodeEntry(uint64_t iteration) override {
    return inner_->LaterDataNodeEntry(iteration);
  }
  uint64_t WakeOnDataNode(absl::AnyInvocable<void()> wake) override {
    return inner_->WakeOnDataNode(std::move(wake));
  }
  bool CancelDataNodeWake(uint64_t id) override { return inner_->CancelDataNodeWake(id); }
  bool OnProbation(const common::NodeId& id) override { return inner_->OnProbation(id); }
  void SetStateProvider(const common::NodeId& self, StateProvider provider) override {
    inner_->SetStateProvider(self, std::move(provider));
  }
  void FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                  StateDone done) override {
    inner_->FetchState(iteration, stage, from, std::move(done));
  }

 protected:
  GroupComm* inner() const { return inner_; }

 private:
  GroupComm* const inner_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_FORWARDING_GROUP_H_

// DataNodeWakes: the wakes GroupComm::WakeOnDataNode arms (Note [Waking on
// a data node] in data_node_wait.h), kept by a group until it learns of a
// live data node. Both groups (InProcessGroupHub, GrpcGroupComm) use it.
//
//   uint64_t id = wakes_.Add(std::move(wake));
//   if (knows_a_data_node) wakes_.WakeAll(clock_);  // each runs once
//   wakes_.Cancel(id);                              // true: it will not run
//
// Thread rule: thread-safe; its lock is a leaf (held for no call out), so
// a group may call it with or without its own lock held. WakeAll runs the
// wakes as zero-delay clock timers, never inline.
#ifndef SKIPSWARM_NODE_TRAIN_DATA_NODE_WAKES_H_
#define SKIPSWARM_NODE_TRAIN_DATA_NODE_WAKES_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace skipswarm::node {

class DataNodeWakes {
 public:
  // Never returns 0 (GroupComm's "no wake").
  uint64_t Add(absl::AnyInvocable<void()> wake);
  // True when `id` was armed (it will not run now).
  bool Cancel(uint64_t id);
  // Schedules every armed wake on `clock` (zero delay) and disarms them.
  void WakeAll(common::Clock* clock);
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, absl::AnyInvocable<void()>> wakes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_DATA_NODE_WAKES_H_

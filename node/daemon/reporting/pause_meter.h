// PauseMeter: how long a data node's training has been paused (Note
// [Paused training] in node/train/data_node_driver.h: no plan is possible,
// e.g. a stage without a live replica), on /metrics:
//   skipswarm_training_paused            1 while paused, else 0
//   skipswarm_training_pauses_total      pauses begun
//   skipswarm_training_paused_seconds_total  seconds paused, counted when a
//                                         pause ends (and by Flush)
//
//   PauseMeter pauses(clock, &metrics);
//   in.on_pause_change = [&](const absl::Status& why) { pauses.OnPauseChange(why); };
//
// Thread rule: thread-safe. `clock` and `metrics` are borrowed and must
// outlive this object.
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_PAUSE_METER_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_PAUSE_METER_H_

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "node/daemon/reporting/metrics.h"

namespace skipswarm::node {

class PauseMeter {
 public:
  PauseMeter(common::Clock* clock, Metrics* metrics);

  // OK: training runs (a pause, if any, ends); otherwise paused (a change
  // of reason while paused is the same pause).
  void OnPauseChange(const absl::Status& why);
  // Adds the time of a pause still running to the seconds counter.
  void Flush();

 private:
  common::Clock* const clock_;
  Metrics* const metrics_;
  absl::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration counted_from_ ABSL_GUARDED_BY(mu_);  // steady time
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_PAUSE_METER_H_

#include "node/daemon/reporting/pause_meter.h"

namespace skipswarm::node {

PauseMeter::PauseMeter(common::Clock* clock, Metrics* metrics)
    : clock_(clock), metrics_(metrics) {
  metrics_->Set("skipswarm_training_paused", 0);
  metrics_->Add("skipswarm_training_pauses_total", 0);
  metrics_->Add("skipswarm_training_paused_seconds_total", 0);
}

void PauseMeter::OnPauseChange(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  const absl::Duration now = clock_->SteadyNow();
  if (!why.ok() && !paused_) {
    paused_ = true;
    counted_from_ = now;
    metrics_->Set("skipswarm_training_paused", 1);
    metrics_->Add("skipswarm_training_pauses_total", 1);
  } else if (why.ok() && paused_) {
    paused_ = false;
    metrics_->Set("skipswarm_training_paused", 0);
    metrics_->Add("skipswarm_training_paused_seconds_total",
                  absl::ToDoubleSeconds(now - counted_from_));
  }
}

void PauseMeter::Flush() {
  absl::MutexLock lock(&mu_);
  if (!paused_) return;
  const absl::Duration now = clock_->SteadyNow();
  metrics_->Add("skipswarm_training_paused_seconds_total",
                absl::ToDoubleSeconds(now - counted_from_));
  counted_from_ = now;
}

}  // namespace skipswarm::node

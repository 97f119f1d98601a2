#include "node/daemon/reporting/serving_health.h"

#include <glog/logging.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

ServingHealth::ServingHealth(std::string node_name, absl::AnyInvocable<void(bool)> set_serving,
                             Metrics* metrics)
    : node_name_(std::move(node_name)), set_serving_(std::move(set_serving)), metrics_(metrics) {
  metrics_->Set("skipswarm_serving", 1);
}

void ServingHealth::Set(const std::string& cause, const absl::Status& why) {
  bool serving;
  std::string reasons;
  {
    absl::MutexLock lock(&mu_);
    auto it = causes_.find(cause);
    const bool had = it != causes_.end();
    if (why.ok() && !had) return;
    if (!why.ok() && had && it->second == why) return;
    if (why.ok()) {
      causes_.erase(it);
    } else {
      causes_[cause] = why;
    }
    serving = causes_.empty();
    metrics_->Set("skipswarm_serving", serving ? 1 : 0);
    metrics_->Set("skipswarm_health_cause", why.ok() ? 0 : 1,
                  absl::StrCat("cause=\"", cause, "\""));
  }
  if (serving) {
    LOG(INFO) << node_name_ << ": health SERVING (" << cause << " cleared)";
  } else {
    LOG(WARNING) << node_name_ << ": health NOT_SERVING: " << Reasons();
  }
  set_serving_(serving);
}

void ServingHealth::ObserveIteration(const NodeIterationReport& r) {
  // An iteration with no finished micro-batch has a NaN mean loss by
  // definition (IterationReport::loss): that says nothing about divergence,
  // so the cause stays as it was.
  if (!r.data || r.data->completed == 0) return;
  Set("diverged", std::isfinite(r.data->loss)
                      ? absl::OkStatus()
                      : absl::DataLossError(absl::StrCat("loss ", r.data->loss,
                                                         " at iteration ", r.iteration)));
}

void ServingHealth::ObservePeers(size_t live_peers) {
  Set("isolated", live_peers > 0
                      ? absl::OkStatus()
                      : absl::UnavailableError("no live peer in this node's gossip view"));
}

bool ServingHealth::serving() const {
  absl::MutexLock lock(&mu_);
  return causes_.empty();
}

std::string ServingHealth::Reasons() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [cause, why] : causes_) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", cause, ": ", why.message());
  }
  return out;
}

}  // namespace skipswarm::node

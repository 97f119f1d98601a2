#include "node/daemon/gossip/gpu_contention.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::node {
namespace {

// Whole seconds: samples on the real clock are a few ms off the period.
std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Seconds(1)));
}

std::string Mib(int64_t bytes) {
  return bytes < 0 ? "? MiB" : absl::StrCat(bytes >> 20, " MiB");
}

// "pid 4242 holds 2048 MiB of this node's GPU"; the three largest when more.
std::string Holders(std::vector<GpuProcess> foreign) {
  std::sort(foreign.begin(), foreign.end(), [](const GpuProcess& a, const GpuProcess& b) {
    return a.used_bytes != b.used_bytes ? a.used_bytes > b.used_bytes : a.pid < b.pid;
  });
  if (foreign.size() == 1) {
    return absl::StrCat("pid ", foreign[0].pid, " holds ", Mib(foreign[0].used_bytes),
                        " of this node's GPU");
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < foreign.size() && i < 3; ++i) {
    parts.push_back(absl::StrCat(foreign[i].pid, " (", Mib(foreign[i].used_bytes), ")"));
  }
  return absl::StrCat(foreign.size(), " other processes use this node's GPU: pids ",
                      absl::StrJoin(parts, ", "), foreign.size() > 3 ? ", ..." : "");
}

}  // namespace

std::optional<std::string> GpuContentionMonitor::Observe(
    const absl::StatusOr<std::vector<GpuProcess>>& sample, absl::Duration now) {
  ++state_.samples;
  if (!sample.ok()) return Failed(sample.status(), now);
  std::vector<GpuProcess> foreign;
  bool own_seen = false;
  for (const GpuProcess& p : *sample) {
    const bool own =
        std::find(options_.own_pids.begin(), options_.own_pids.end(), p.pid) !=
        options_.own_pids.end();
    own_seen = own_seen || own;
    if (!own) foreign.push_back(p);
  }
  if (options_.expect_own && !sample->empty() && !own_seen) {
    return Failed(absl::FailedPreconditionError(absl::StrCat(
                      "the GPU's process list (", sample->size(),
                      " processes) does not include this process, so its PIDs are from "
                      "another PID namespace (a container without the host's PIDs?) and "
                      "ours cannot be told from others'")),
                  now);
  }
  std::optional<std::string> line;
  if (state_.failing) line = "the GPU contention check works again";
  state_.failing = false;
  state_.failure.clear();
  failing_since_.reset();
  state_.foreign_bytes = 0;
  for (const GpuProcess& p : foreign) state_.foreign_bytes += std::max<int64_t>(0, p.used_bytes);

  if (!foreign.empty()) {
    clear_since_.reset();
    if (!foreign_since_) foreign_since_ = now;
    const std::string holders = Holders(foreign);
    if (state_.contended) {
      state_.why = absl::StrCat("GPU contention: ", holders);  // current holders
    } else if (now - *foreign_since_ >= options_.pause_after) {
      state_.contended = true;
      state_.why = absl::StrCat("GPU contention: ", holders);
      line = absl::StrCat(state_.why, " (seen for ", Seconds(now - *foreign_since_),
                          "); pausing");
    }
    return line;
  }
  foreign_since_.reset();
  if (!state_.contended) return line;
  if (!clear_since_) clear_since_ = now;
  if (now - *clear_since_ >= options_.resume_after) {
    state_.contended = false;
    state_.why.clear();
    clear_since_.reset();
    line = absl::StrCat("GPU contention over: no other process on this node's GPU for ",
                        absl::FormatDuration(options_.resume_after), "; resuming");
  }
  return line;
}

std::optional<std::string> GpuContentionMonitor::Failed(const absl::Status& error,
                                                        absl::Duration now) {
  ++state_.failures;
  state_.failure = std::string(error.message());
  std::optional<std::string> line;
  if (!state_.failing) {
    state_.failing = true;
    failing_since_ = now;
    line = absl::StrCat("cannot check for GPU contention: ", error.message(),
                        "; a failed check neither pauses nor resumes the node (a pause for "
                        "contention ends after ",
                        absl::FormatDuration(options_.resume_after), " of failed checks)");
  }
  if (now - *failing_since_ >= options_.resume_after) {
    foreign_since_.reset();
    clear_since_.reset();
    if (state_.contended) {
      state_.contended = false;
      state_.why.clear();
      line = absl::StrCat("the GPU contention check has failed for ",
                          Seconds(now - *failing_since_), " (", error.message(),
                          "); resuming: a broken check does not keep the node paused");
    }
  }
  return line;
}

struct GpuContentionWatch::Ticks {
  absl::Mutex mu;
  bool due ABSL_GUARDED_BY(mu) = true;  // the first sample at once
  bool stop ABSL_GUARDED_BY(mu) = false;
  common::TimerId timer ABSL_GUARDED_BY(mu) = common::kNoTimer;
};

GpuContentionWatch::GpuContentionWatch(GpuContentionOptions options,
                                       std::shared_ptr<GpuProcessLister> lister,
                                       common::Clock* clock)
    : lister_(std::move(lister)),
      clock_(clock),
      poll_every_(options.poll_every),
      ticks_(std::make_shared<Ticks>()),
      monitor_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

GpuContentionWatch::~GpuContentionWatch() {
  common::TimerId timer;
  {
    absl::MutexLock lock(&ticks_->mu);
    ticks_->stop = true;
    timer = ticks_->timer;
  }
  clock_->Cancel(timer);
  thread_.join();
}

void GpuContentionWatch::Loop() {
  Ticks* ticks = ticks_.get();
  const std::weak_ptr<Ticks> weak = ticks_;
  while (true) {
    {
      absl::MutexLock lock(&ticks->mu);
      auto ready = [ticks]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ticks->mu) {
        return ticks->due || ticks->stop;
      };
      ticks->mu.Await(absl::Condition(&ready));
      if (ticks->stop) return;
      ticks->due = false;
      // The next sample's timer before this sample: polls keep their period
      // however long the lister takes, and a sample counted (samples())
      // always has its successor scheduled. Clock timers never run inside
      // RunAfter, so holding ticks->mu here is safe.
      ticks->timer = clock_->RunAfter(poll_every_, [weak] {
        if (std::shared_ptr<Ticks> t = weak.lock()) {
          absl::MutexLock lock(&t->mu);
          t->due = true;
        }
      });
    }
    const absl::StatusOr<std::vector<GpuProcess>> sample = lister_->List();
    std::optional<std::string> line;
    bool warn = false;  // failing, or pausing for contention
    {
      absl::MutexLock lock(&mu_);
      line = monitor_.Observe(sample, clock_->SteadyNow());
      warn = monitor_.state().failing || monitor_.state().contended;
    }
    if (!line) continue;
    if (warn) {
      LOG(WARNING) << lister_->Describe() << ": " << *line;
    } else {
      LOG(INFO) << lister_->Describe() << ": " << *line;
    }
  }
}

GpuContentionState GpuContentionWatch::state() const {
  absl::MutexLock lock(&mu_);
  return monitor_.state();
}

void GpuContentionWatch::WaitForSamples(int64_t n) const {
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return monitor_.state().samples >= n;
  };
  absl::MutexLock lock(&mu_, absl::Condition(&done));
}

}  // namespace skipswarm::node

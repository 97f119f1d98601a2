// A volunteer's pause and resume (Note [Paused members] in
// training_members.h): the operator's requests (NodeControl.Pause, SIGUSR1 /
// SIGUSR2) and quiet hours decide (volunteer_pause.h); this applies the
// decision to our StageServer, our signed record, health, /metrics and the
// status page.
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"

namespace skipswarm::node {

absl::Status GossipDaemon::Parts::CanPause(bool force) {
  // Note [Hosted stages snapshot]: the hosted stages and a pending move's
  // target in one read, whatever main's thread is switching meanwhile.
  const HostedStages::Snapshot ours = hosted.Get();
  bool training = false;
  {
    absl::MutexLock lock(&stack_mu);  // Note [Stack hand-over]
    training = stack != nullptr;
  }
  return CheckPause(ours, training, gossip->membership()->GetView(), self, members->iteration(),
                    force);
}

absl::Status GossipDaemon::Parts::ApplyPause(bool paused, const std::string& why, bool force) {
  absl::MutexLock serial(&pause_mu);
  {
    absl::MutexLock lock(&mu);
    if (volunteer_paused == paused) return absl::OkStatus();
    if (draining) return absl::FailedPreconditionError("this node is draining");
  }
  if (paused) SS_RETURN_IF_ERROR(CanPause(force));
  // Our server first, so forwards planned before the record reaches their
  // data node are refused (and re-routed at once) from now on.
  {
    absl::MutexLock lock(&stack_mu);  // Note [Stack hand-over]
    if (stack) stack->server()->SetPaused(paused);
  }
  absl::Status s = gossip->membership()->UpdateLocalRecord(
      [paused](proto::NodeRecord* r) { r->set_paused(paused); });
  if (!s.ok()) {
    absl::MutexLock lock(&stack_mu);
    if (stack) stack->server()->SetPaused(!paused);
    return s;
  }
  // Push-pull with every live member now, not gossip's random few: the
  // data nodes' next plans go around us (or use us again).
  gossip->membership()->Announce([](int, int) {});
  {
    absl::MutexLock lock(&mu);
    volunteer_paused = paused;
    volunteer_refused.clear();
  }
  {
    // A stage move's or re-entry's new stack may have replaced ours since
    // the first SetPaused (ReplaceStack reads volunteer_paused).
    absl::MutexLock lock(&stack_mu);  // Note [Stack hand-over]
    if (stack) stack->server()->SetPaused(paused);
  }
  health->Set("volunteer_pause", paused ? absl::UnavailableError(why) : absl::OkStatus());
  metrics.Set("skipswarm_volunteer_paused", paused ? 1 : 0);
  if (paused) metrics.Add("skipswarm_volunteer_pauses_total", 1);
  status->SetPaused(paused, why);  // the page's badge and a "pause" event
  LOG(INFO) << base().name << ": "
            << (paused ? absl::StrCat("paused (", why,
                                      "): no new micro-batches; still a member, still averaging")
                       : std::string("resumed: taking micro-batches again"))
            << " at iteration " << members->iteration();
  return absl::OkStatus();
}

void GossipDaemon::Parts::PollVolunteerPause() {
  // Note [GPU contention]: the watch's verdict (its thread samples; this
  // only reads), on /metrics and, when the check starts or stops failing,
  // on the status page.
  std::optional<GpuContentionState> gpu;
  if (gpu_watch) {
    gpu = gpu_watch->state();
    metrics.Set("skipswarm_gpu_contention", gpu->contended ? 1 : 0);
    metrics.Set("skipswarm_gpu_foreign_memory_bytes", static_cast<double>(gpu->foreign_bytes));
    metrics.Set("skipswarm_gpu_contention_check_failures_total",
                static_cast<double>(gpu->failures));
  }
  VolunteerPause::Wanted w;
  std::string gpu_event;
  {
    absl::MutexLock lock(&mu);
    if (gpu) {
      volunteer.SetGpuContention(gpu->contended, gpu->why);
      if (gpu->failing != gpu_check_failing) {
        gpu_check_failing = gpu->failing;
        gpu_event = gpu->failing ? absl::StrCat("GPU contention check failing: ", gpu->failure)
                                 : "GPU contention check works again";
      }
    }
    w = volunteer.At(clock->Now());
  }
  if (!gpu_event.empty()) status->AddEvent("health", gpu_event);
  {
    absl::MutexLock lock(&mu);
    if (w.paused == volunteer_paused) {
      volunteer_refused.clear();
      return;
    }
  }
  absl::Status s = ApplyPause(w.paused, w.why, /*force=*/false);
  if (s.ok()) return;
  // A quiet-hours or GPU-contention pause of a last replica: retried while
  // it holds, logged once (and shown once on the status page).
  const std::string refused =
      absl::StrCat("cannot ", w.paused ? "pause" : "resume", " (", w.why, "): ", s.message());
  {
    absl::MutexLock lock(&mu);
    if (volunteer_refused == s.message()) return;
    volunteer_refused = std::string(s.message());
  }
  LOG(WARNING) << base().name << ": " << refused << "; trying again while it holds";
  status->AddEvent("pause", refused);
}

absl::Status GossipDaemon::RequestPause(bool paused, bool force) {
  Parts& p = *parts_;
  // Refused requests change nothing (the policy would retry them).
  if (paused) SS_RETURN_IF_ERROR(p.CanPause(force));
  VolunteerPause::Wanted w;
  {
    absl::MutexLock lock(&p.mu);
    if (p.draining) return absl::FailedPreconditionError("this node is draining");
    p.volunteer.Request(paused, p.clock->Now());
    w = p.volunteer.At(p.clock->Now());
  }
  return p.ApplyPause(w.paused, w.why, force);
}

bool GossipDaemon::paused() const {
  absl::MutexLock lock(&parts_->mu);
  return parts_->volunteer_paused;
}

}  // namespace skipswarm::node

// GossipDaemon::Run, the training loop, and how it ends: a stop (a signal,
// its bound), a drain (NodeControl.Drain, SIGTERM; Note [Leaving]), a
// revocation or eviction (Note [Revocation]), falling behind the swarm
// (Note [Revived members]) and a stage move's switch (Note [Stage moves]).
// Note [Stopping] and Note [Gossip daemon teardown] (gossip_daemon.cc) say
// what each stop guarantees and in which order the parts go.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"
#include "node/train/grpc_group.h"

namespace skipswarm::node {

absl::Status GossipDaemon::Parts::CanLeave(bool force) {
  if (force) return absl::OkStatus();
  // Note [Hosted stages snapshot]: the control thread's read.
  return CheckLeave(hosted.Get(), gossip->membership()->GetView(), self, members->iteration(),
                    force);
}

// Note [Simultaneous leavers]: two replicas of one stage stopped or drained
// at the same moment each passed the leave check, seeing the other alive,
// and both signed LEFT: the stage was left with no replica while each
// believed the other stays. A leaver now says so first: it signs
// record.leaving, waits leave_settle for the record to spread, then checks
// again. A replica that is itself leaving counts as staying only when its
// node id is larger (StayingReplicas in training_members.h); one that
// stops as a stage's last replica (record.stopping) never does. Of two
// leavers that check at once, then, the smaller id leaves (LEFT at once
// with its exit iteration) and the larger one is refused: a drain fails
// with FailedPrecondition (unless forced) and clears record.leaving, a
// stop (or a SIGTERM whose drain was refused) takes the last replica's
// path (Note [Stopping]) and signs record.stopping. If they do not check
// at once, the later one's second check sees the earlier one's LEFT or
// record: with leave_settle at least twice the spread time, whichever
// order the four signatures come in, at most one leaves at once. A
// SIGTERM still ends within stop_timeout with a checkpoint: only its path
// changes, and the wait is part of its bound.
absl::Status GossipDaemon::Parts::DecideLeave(bool force) {
  if (force) return absl::OkStatus();
  SS_RETURN_IF_ERROR(CanLeave(false));
  if (options.before_leave_intent) options.before_leave_intent();
  SignLeaving(/*leaving=*/true, /*stopping=*/false);
  if (options.before_leave_recheck) options.before_leave_recheck();
  if (options.leave_settle > absl::ZeroDuration()) clock->SleepFor(options.leave_settle);
  absl::Status again = CanLeave(false);
  if (!again.ok()) {
    LOG(INFO) << base().name << ": another replica leaves at the same time: " << again.message();
    SignLeaving(/*leaving=*/false, /*stopping=*/false);
  }
  return again;
}

void GossipDaemon::Parts::SignLeaving(bool leaving, bool stopping, uint64_t stop_after) {
  absl::Status s = gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->set_leaving(leaving);
    r->set_stopping(stopping);
    r->set_stop_after(stopping ? stop_after : 0);
  });
  LOG_IF(WARNING, !s.ok()) << base().name << ": cannot sign our leave intent: " << s;
}

std::optional<int> GossipDaemon::Parts::StageWithoutLiveReplica() {
  const membership::View view = gossip->membership()->GetView();
  const uint64_t it = members->iteration();
  const std::vector<int> ours = Stages();
  for (int s = 0; s < base().model.model.num_stages; ++s) {
    if (std::find(ours.begin(), ours.end(), s) != ours.end()) continue;
    if (OtherLiveReplicas(view, self, s, it).empty()) return s;
  }
  return std::nullopt;
}

std::optional<AloneVerdict> GossipDaemon::Parts::AloneAfterSwarm() {
  if (options.alone_timeout <= absl::ZeroDuration()) return std::nullopt;
  if (alone == nullptr) {
    alone = std::make_unique<AloneCheck>(options.alone_timeout, base().model.model.num_stages,
                                         clock.get());
  }
  if (!alone->Due()) return std::nullopt;
  return alone->Poll(gossip->membership()->GetView(), members->iteration(),
                     static_cast<uint64_t>(base().iterations));
}

absl::Status GossipDaemon::Parts::EndAlone(const AloneVerdict& v) {
  const NodeDaemonOptions& o = base();
  const uint64_t own = members->iteration();
  const bool finished = v.kind == AloneVerdict::kSwarmFinished;
  const std::string alone_for = absl::FormatDuration(absl::Trunc(v.alone_for, absl::Seconds(1)));
  const std::string line =
      finished
          ? absl::StrCat("the swarm finished its ", o.iterations,
                         " iterations without this node: another data node left after "
                         "iteration ",
                         v.at, " while this one stalled at iteration ", own,
                         ", alone for ", alone_for,
                         " (Note [Alone after the swarm]); its state is stale: no checkpoint "
                         "written")
          : absl::StrCat("every other member of the swarm has been DEAD or LEFT for ",
                         alone_for, " while this node trains iteration ",
                         own, " of ", o.iterations,
                         ": the run ended without it or the swarm is unreachable (Note [Alone "
                         "after the swarm]); stopping with a checkpoint");
  LOG(WARNING) << o.name << ": " << line;
  std::printf("%s: %s\n", o.name.c_str(), line.c_str());
  std::fflush(stdout);
  status->AddEvent("node", line);
  // The iteration in progress goes with the stack (nobody finishes it); the
  // computes hold the state after the last finished step.
  ReplaceStack(nullptr);
  if (!finished) SS_RETURN_IF_ERROR(FinalCheckpoint());
  gossip->Leave(absl::Seconds(2), std::max<uint64_t>(1, own) - 1);
  if (finished) return absl::OkStatus();
  return absl::UnavailableError(line);
}

absl::Status GossipDaemon::Parts::FinalCheckpoint() {
  SS_RETURN_IF_ERROR(Checkpoint());
  const NodeDaemonOptions& o = base();
  if (o.model.checkpoint_dir.empty() || computes.empty()) return absl::OkStatus();
  const int64_t step = computes.begin()->second->step();
  LOG(INFO) << o.name << ": checkpoint of step " << step << " written to "
            << o.model.checkpoint_dir;
  std::printf("%s: checkpoint of step %lld written to %s\n", o.name.c_str(),
              static_cast<long long>(step), o.model.checkpoint_dir.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}
absl::Status GossipDaemon::RequestDrain(bool force) {
  Parts& p = *parts_;
  {
    absl::MutexLock lock(&p.mu);
    if (p.draining) return absl::OkStatus();
  }
  // Note [Simultaneous leavers]: blocks for leave_settle.
  SS_RETURN_IF_ERROR(p.DecideLeave(force));
  {
    absl::MutexLock lock(&p.mu);
    if (p.draining) return absl::OkStatus();
    p.draining = true;
  }
  // Note [Leaving]: LEFT with our exit iteration (no new micro-batches
  // come our way), then that iteration finishes (we stay in its barrier
  // and averaging everywhere). The exit iteration is the one the trainer
  // stops after (Note [Stop point] in node/train/node_trainer.cc), so the
  // stop comes first; the trainer is between micro-batches of it for the
  // moment until LEFT goes out.
  std::optional<uint64_t> stops_after;
  {
    absl::MutexLock lock(&p.stack_mu);  // Note [Stack hand-over]
    if (p.stack) {
      stops_after = p.stack->trainer()->Stop();
      // Note [Stopping server]; a forced drain of a last replica as a stop's.
      if (!force || p.CanLeave(false).ok()) p.stack->server()->StopAfter(*stops_after);
    }
  }
  const uint64_t exit_iteration = stops_after.value_or(p.members->iteration());
  LOG(INFO) << p.base().name << ": draining: announcing LEFT, finishing iteration "
            << exit_iteration;
  p.gossip->Leave(absl::Seconds(2), exit_iteration);
  p.status->AddEvent("node", absl::StrCat("draining: announced LEFT, finishing iteration ",
                                          exit_iteration));
  {
    absl::MutexLock lock(&p.mu);
    p.drain_started = p.clock->SteadyNow();
  }
  return absl::OkStatus();
}

absl::Status GossipDaemon::Run(DaemonSignals* signals) {
  Parts& p = *parts_;
  const NodeDaemonOptions& o = p.base();
  p.signals = signals;
  // Note [Restart behind the swarm] (gossip_daemon_join.cc): a founder by
  // its options that finds the swarm training without it enters as a
  // joiner, before the founders' wait or during it.
  bool join = p.joiner;
  if (!join) {
    if (p.start_iteration >= o.iterations) {
      LOG(INFO) << o.name << ": already trained " << p.start_iteration << " iterations";
      return absl::OkStatus();
    }
    join = p.SwarmTrainsWithoutUs();
  }
  if (!join) {
    absl::Status formed = p.WaitForFounders();
    if (absl::IsCancelled(formed)) {
      LOG(INFO) << o.name << ": " << formed.message() << "; nothing trained, exiting";
      // Note [Stopping]: every stop leaves a checkpoint, this one too (the
      // state it was built or resumed with).
      SS_RETURN_IF_ERROR(p.FinalCheckpoint());
      p.gossip->Leave(absl::Seconds(2), 0);
      return absl::OkStatus();
    }
    join = absl::IsAborted(formed);
    if (!join) SS_RETURN_IF_ERROR(formed);
  }
  if (join) {
    p.joiner = true;  // before the trainer's thread exists
    absl::Status entered = p.EnterAsJoiner();
    if (absl::IsCancelled(entered)) {
      // Note [Stopping while joining]: nothing trained, so no checkpoint:
      // what the directory holds stays as it was.
      std::printf("%s: %s; no checkpoint written\n", o.name.c_str(),
                  std::string(entered.message()).c_str());
      std::fflush(stdout);
      LOG(INFO) << o.name << ": " << entered.message() << "; no checkpoint written, exiting";
      p.gossip->Leave(absl::Seconds(2), 0);
      return absl::OkStatus();
    }
    SS_RETURN_IF_ERROR(entered);
  }
  p.run_started = p.clock->SteadyNow();
  // Note [GPU contention]: from now on our own context is on the GPU, so a
  // process list without us is a PID namespace problem, not an idle GPU.
  if (p.options.gpu_lister != nullptr) {
    GpuContentionOptions g = p.options.gpu_contention;
    p.gpu_watch = std::make_unique<GpuContentionWatch>(g, p.options.gpu_lister, p.clock.get());
    p.metrics.Set("skipswarm_gpu_contention", 0);
    LOG(INFO) << o.name << ": watching " << p.gpu_watch->Describe()
              << ": pausing while another process holds memory there for "
              << absl::FormatDuration(g.pause_after) << ", resuming "
              << absl::FormatDuration(g.resume_after) << " after it left";
  }
  // Shared with the trainer's callback, which may outlive this frame when a
  // drain times out.
  struct Finish {
    absl::Notification done;
    absl::Status status;
  };
  std::shared_ptr<Finish> finish;
  bool stopping = false;
  bool left = false;
  // Note [Stopping]: when a stop began, and whether it ran out of time.
  absl::Duration stop_started = absl::InfiniteDuration();
  bool stop_timed_out = false;
  // One segment per hosted stage: a stage move (Note [Stage moves]) ends
  // one at its switch boundary and starts the next.
  // Note [Revived members]: the swarm's iteration when we found ourselves
  // behind it; the segment ends and we re-enter.
  // (A flag and a value rather than std::optional: GCC 12 reports the
  // optional's payload as maybe-uninitialized at its use below.)
  bool behind = false;
  BehindVerdict behind_at;
  // Note [Stopping]: a stop signs LEFT before its final checkpoint and push
  // flush, so its peers plan no micro-batch of a later iteration through it
  // while it writes and flushes.
  //   - Where another live replica of each of its stages stays, it signs
  //     LEFT as the stop begins, with the iteration its trainer stops after
  //     (Note [Stop point]), as a drain does (Note [Leaving]); its stage
  //     server refuses later iterations (Note [Stopping server] in
  //     node/stage/stage_server.h) and the hops before re-route them to the
  //     other replicas.
  //   - The last replica of a stage cannot sign LEFT at once: LEFT takes it
  //     out of every plan, so the iteration it is to finish would have no
  //     route and the stop would wait out its bound. It signs
  //     record.stopping with that iteration instead (Note [Stopping last
  //     replica] in training_members.h: no later plan routes through it; the
  //     data nodes pause for its stage) and LEFT once its trainer has ended.
  //     Its server refuses later iterations too: a plan made before the
  //     record arrived is refused with its stop point, and the data node
  //     re-runs those micro-batches elsewhere or pauses for the stage (Note
  //     [Stopping refusals] in node/stage/stage_server.h) rather than count
  //     as trained what no applied update holds.
  // Two replicas of a stage stopped at the same moment: Note [Simultaneous
  // leavers].
  bool signed_left = false;
  // `refused`: a drain's DecideLeave just refused (Note [Simultaneous
  // leavers]); otherwise the stop decides here, before the trainer's stop
  // point (the node trains on while the intent spreads).
  auto stop_now = [&](absl::Status refused) {
    stopping = true;
    stop_started = p.clock->SteadyNow();
    absl::Status last = refused.ok() ? p.DecideLeave(/*force=*/false) : refused;
    const uint64_t exit_iteration = p.stack->trainer()->Stop();
    if (!last.ok()) {
      // Note [Simultaneous leavers]: nobody counts us as a replica that
      // stays; Note [Stopping last replica] (training_members.h): no plan of
      // a later iteration routes through us.
      p.SignLeaving(/*leaving=*/false, /*stopping=*/true, exit_iteration);
      p.stack->server()->StopAfter(exit_iteration);
      LOG(INFO) << o.name << ": stopping: " << last.message()
                << "; announcing LEFT once iteration " << exit_iteration << " ends";
      return;
    }
    // Note [Stopping server]: micro-batches of later iterations, planned
    // through us before our LEFT reaches their data nodes, go to the other
    // replicas rather than through a node that never applies their update.
    p.stack->server()->StopAfter(exit_iteration);
    LOG(INFO) << o.name << ": stopping: announcing LEFT, finishing iteration " << exit_iteration;
    p.gossip->Leave(absl::Seconds(2), exit_iteration);
    signed_left = true;
    p.status->AddEvent("node", absl::StrCat("stopping: announced LEFT, finishing iteration ",
                                            exit_iteration));
  };
  // Note [Alone after the swarm]: nobody left to train with (same form).
  bool alone = false;
  AloneVerdict alone_verdict;
  // Note [Revocation], Note [Eviction]: once this node learns that the swarm
  // no longer admits it, every member refuses it; it stops with the cause.
  absl::Status admitted;
  while (true) {
    finish = std::make_shared<Finish>();
    behind = false;
    p.stack->trainer()->Run(
        p.start_iteration, o.iterations - p.start_iteration,
        [&p](const NodeIterationReport& r) { p.OnIteration(r); },
        [finish](absl::Status s) {
          finish->status = s;
          finish->done.Notify();
        });
    while (!finish->done.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
      // Quiet hours, GPU contention (Note [Paused members]).
      if (!stopping) p.PollVolunteerPause();
      if (!(admitted = p.gossip->membership()->SelfAdmission()).ok()) break;
      if (!stopping) {
        if (const std::optional<BehindVerdict> ahead = p.SwarmAheadOfUs(); ahead.has_value()) {
          behind = true;
          behind_at = *ahead;
          break;
        }
        if (const std::optional<AloneVerdict> a = p.AloneAfterSwarm(); a.has_value()) {
          alone = true;
          alone_verdict = *a;
          break;
        }
      }
      if (signals == nullptr) continue;
      if (!stopping && signals->stop.load()) {
        LOG(INFO) << o.name << ": stopping after the current iteration";
        stop_now(absl::OkStatus());
      }
      if (!stopping && (signals->pause.exchange(false) || signals->resume.load())) {
        const bool pause = !signals->resume.exchange(false);
        absl::Status s = RequestPause(pause, /*force=*/false);
        LOG_IF(WARNING, !s.ok()) << o.name << ": " << (pause ? "SIGUSR1" : "SIGUSR2")
                                 << ": cannot " << (pause ? "pause" : "resume") << ": "
                                 << s.message();
      }
      if (!stopping && signals->drain.exchange(false)) {
        absl::Status s = RequestDrain(p.options.force_leave);
        if (!s.ok()) {
          // Note [Stopping]: SIGTERM always stops; leaving would lose a
          // stage, so this stops with a checkpoint instead of a drain.
          LOG(WARNING) << o.name << ": SIGTERM: cannot leave the swarm (" << s.message()
                       << "); stopping after the current iteration with a checkpoint instead";
          stop_now(s);
        }
      }
      if (stopping && p.clock->SteadyNow() - stop_started > p.options.stop_timeout) {
        LOG(WARNING) << o.name << ": the current iteration did not finish within "
                     << p.options.stop_timeout << " of the stop; abandoning it";
        stop_timed_out = true;
        break;
      }
      {
        absl::MutexLock lock(&p.mu);
        if (p.draining) stopping = left = true;
      }
      // Note [Stopping]: while training is paused no iteration finishes
      // (the data nodes wait for the lost stage), so a stop does not wait
      // for one: the last finished step is saved at once.
      std::optional<int> lost;
      if (stopping && (lost = p.StageWithoutLiveReplica()).has_value()) {
        LOG(WARNING) << o.name << ": training is paused (stage " << *lost
                     << " has no live replica); stopping without waiting for iteration "
                     << p.members->iteration();
        stop_timed_out = true;
        break;
      }
      absl::MutexLock lock(&p.mu);
      // A drain must end even if a peer never answers our last averaging
      // or the swarm is paused: within the stop bound, with the checkpoint
      // of the last finished step (it used to wait startup_timeout, 120 s,
      // and leave without one).
      if (p.draining && p.clock->SteadyNow() - p.drain_started > p.options.stop_timeout) {
        LOG(WARNING) << o.name << ": the last iteration did not finish within "
                     << p.options.stop_timeout << " of the drain; abandoning it";
        stop_timed_out = true;
        break;
      }
    }
    if (stop_timed_out) break;
    if (!admitted.ok()) {
      LOG(ERROR) << o.name << ": stopping: " << admitted.message();
      p.ReplaceStack(nullptr);  // no checkpoint: a fresh admission joins afresh
      return admitted;
    }
    if (alone) return p.EndAlone(alone_verdict);
    if (behind) {
      absl::Status s = p.CatchUp(behind_at);
      if (s.ok()) continue;
      // Our state is the stale one (or saved by MoveAhead): no checkpoint.
      LOG(ERROR) << o.name << ": behind the swarm and could not catch up: " << s;
      p.ReplaceStack(nullptr);
      p.gossip->Leave(absl::Seconds(2), std::max<uint64_t>(1, p.members->iteration()) - 1);
      // Nothing left to train, or a stop while re-entering.
      if (absl::IsOutOfRange(s) || absl::IsCancelled(s)) return absl::OkStatus();
      return s;
    }
    bool switching = false;
    {
      absl::MutexLock lock(&p.mu);
      switching = p.move != nullptr && p.move->stop_requested && !p.draining &&
                  absl::IsCancelled(finish->status);
    }
    if (!switching || stopping) break;
    SS_RETURN_IF_ERROR(p.SwitchStage());
  }
  if (stop_timed_out) {
    // The trainer must be quiet before its computes are saved: destroying
    // the stack waits for a callback in progress and silences later ones.
    // The computes hold the state after the last finished step.
    p.ReplaceStack(nullptr);
    finish->status = absl::CancelledError("stop timed out");
  }
  {
    absl::MutexLock lock(&p.mu);
    // A drain or a stop signed LEFT with its exit iteration already.
    left = p.draining || signed_left;
  }
  // Done or stopped: we are gone after the last iteration we finished.
  // Note [Stopping]: before the checkpoint and the flush, which take time
  // in which nobody should plan through us.
  if (!left) p.gossip->Leave(absl::Seconds(2), std::max<uint64_t>(1, p.members->iteration()) - 1);
  if (p.options.before_final_checkpoint) p.options.before_final_checkpoint();
  SS_RETURN_IF_ERROR(p.FinalCheckpoint());
  // Note [Leaving with pushes owed] (grpc_group.cc): our finished rounds'
  // pushes go before we do (an exited node fails its peers' probes; a LEFT
  // one still answers them).
  if (p.group != nullptr) p.group->FlushPushes(absl::Seconds(5));
  LOG(INFO) << o.name << ": left the swarm";
  if (absl::IsCancelled(finish->status)) return absl::OkStatus();
  return finish->status;
}

}  // namespace skipswarm::node

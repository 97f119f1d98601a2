// Stage-loss recovery of `skipswarm local`: when every replica of a stage is
// gone, the launcher pauses training, restores the swarm from the newest
// complete checkpoint generation (Note [Checkpoint generations]) and resumes
// every node at that generation's iteration; with no complete generation the
// run stops with an error naming the stage.
//
//   StageLossMonitor monitor(layout);
//   std::optional<LostStage> lost = monitor.Check(live_names, killed_after, reported);
//   if (lost) {
//     absl::StatusOr<RestorePlan> plan = PlanRestore(gen_root, hash, stages, *lost);
//     if (!plan.ok()) return plan.status();                // names the stage
//     ...stop every node...
//     SS_RETURN_IF_ERROR(SeedNodeCheckpoints(*plan, checkpoint_dir, layout));
//     SS_RETURN_IF_ERROR(RewindProgress(progress, plan->resume_at, backup));
//     ...start every node again: each resumes at plan->resume_at...
//   }
//
// Note [Local stage restore]: the launcher is the one process that sees the
// whole local swarm, so it plays the restoring node's part: the nodes write
// their stage checkpoints every --local_checkpoint_every iterations, the
// launcher assembles them into generations (launcher/eval_snapshots.h), and
// a restore gives every node of the layout, the lost stage's replacement
// processes included, the generation's stage files as its own checkpoints.
// All nodes then resume at one iteration (a consistent swarm); the
// iterations after it are re-done, and their progress lines are dropped so
// that loss.csv holds each iteration once. Every node restarts (not only the
// lost stage's): the survivors' state is newer than the generation and
// must roll back with it.
//
// Thread rule: thread-compatible (the launcher's loop).
#ifndef SKIPSWARM_LAUNCHER_STAGE_RECOVERY_H_
#define SKIPSWARM_LAUNCHER_STAGE_RECOVERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "launcher/local_layout.h"
#include "model/checkpoint_generation.h"

namespace skipswarm::launcher {

struct LostStage {
  int stage = -1;
  int64_t after_iteration = -1;  // the last iteration reported
  std::string why;               // "s1r0 killed after iteration 60, s1r1 exited with code 1"
};

// Finds a stage of the layout with no live host.
class StageLossMonitor {
 public:
  explicit StageLossMonitor(LocalLayout layout) : layout_(std::move(layout)) {}

  // `live`: names of the nodes still running; `killed_after`: name -> the
  // iteration after which the launcher killed it; `ended`: name -> how a
  // node that ended by itself ended (DescribeEnd: "exited with code 1",
  // "killed by signal 11 (SIGSEGV)"), else it reads "exited".
  std::optional<LostStage> Check(const std::set<std::string>& live,
                                 const std::map<std::string, int64_t>& killed_after,
                                 int64_t reported,
                                 const std::map<std::string, std::string>& ended = {}) const;

 private:
  const LocalLayout layout_;
};

struct RestorePlan {
  LostStage lost;
  int64_t resume_at = 0;         // the generation's iteration
  model::FoundGeneration generation;
  // Iterations trained and reported that are re-done: after_iteration + 1 - resume_at.
  int64_t iterations_redone() const { return lost.after_iteration + 1 - resume_at; }
};

// The newest complete generation under `generations_root`; FailedPrecondition
// naming the stage when there is none (the run must stop).
absl::StatusOr<RestorePlan> PlanRestore(const std::string& generations_root,
                                        const std::string& config_hash, int num_stages,
                                        const LostStage& lost);

// Writes CHECKPOINT_DIR/NAME-stage-S.ckpt for every node and hosted stage
// of `layout` from the generation (the daemons' resume files, node/daemon/
// stack/stage_checkpoints.h), each atomically, after removing each node's
// unfinished save (Note [Stage set commit]). Call while no node runs.
absl::Status SeedNodeCheckpoints(const RestorePlan& plan, const std::string& checkpoint_dir,
                                 const LocalLayout& layout);

// Keeps the lines of `progress_path` for iterations before `resume_at`
// (and lines without an iteration); the whole old file goes to
// `backup_path`. Call while no node runs.
absl::Status RewindProgress(const std::string& progress_path, int64_t resume_at,
                            const std::string& backup_path);

// One line for the log and the report: "stage 1 restored from generation 60
// (...): 12 iterations re-done, paused 4.2 s".
std::string DescribeRestore(const RestorePlan& plan, double pause_s);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_STAGE_RECOVERY_H_

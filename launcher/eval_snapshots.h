// EvalSnapshots: `skipswarm local --local_eval_every=N` keeps a copy of the
// swarm's stage checkpoints at every N-th iteration, in the layout `skipswarm
// eval --checkpoint=DIR` (and train-ref) use, so the run's validation loss at
// those points can be measured after it ends (tools/experiments/
// local_vs_ref.sh compares it with train-ref's).
//
//   EvalSnapshots snaps(dir + "/checkpoints", dir + "/evals", stages, 50);
//   while (running) snaps.Poll();            // from the launcher's loop
//   snaps.Poll();                            // after the nodes exit (final)
//
// Every node checkpoints its stages to CHECKPOINT_DIR/NAME-stage-S.ckpt
// every N iterations (--node_checkpoint_every; atomically, by rename) and at
// the end. Poll reads the headers of files whose modification time changed
// and, for every step it has not taken yet at which every stage has a file,
// copies one replica's file per stage (replicas hold equal parameters; the
// first name in order) to OUT_DIR/iter-NNNNNN/stage-S.ckpt. A node
// overwrites its file N iterations later, so a launcher polling every
// fraction of a second sees every step.
//
// Thread rule: thread-compatible (the launcher's loop).
#ifndef SKIPSWARM_LAUNCHER_EVAL_SNAPSHOTS_H_
#define SKIPSWARM_LAUNCHER_EVAL_SNAPSHOTS_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace skipswarm::launcher {

class EvalSnapshots {
 public:
  EvalSnapshots(std::string checkpoint_dir, std::string out_dir, int num_stages)
      : checkpoint_dir_(std::move(checkpoint_dir)),
        out_dir_(std::move(out_dir)),
        num_stages_(num_stages) {}

  // Takes every complete step not yet taken; returns the steps taken now.
  std::vector<int64_t> Poll();
  const std::set<int64_t>& taken() const { return taken_; }

  static std::string SnapshotDir(const std::string& out_dir, int64_t step);

 private:
  struct Seen {
    std::filesystem::file_time_type mtime;
    int stage = -1;
    int64_t step = -1;
  };
  const std::string checkpoint_dir_;
  const std::string out_dir_;
  const int num_stages_;
  std::map<std::string, Seen> files_;  // path -> what its header said
  std::set<int64_t> taken_;
};

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_EVAL_SNAPSHOTS_H_

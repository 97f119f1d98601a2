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
// Generations (Note [Checkpoint generations], model/checkpoint_generation.h):
// with a GenerationOptions, every complete step is instead written as a
// checkpoint generation (stage files, then the manifest; bytes read once and
// checked to be of that step, so a file replaced mid-poll is not mixed in),
// and only the newest `keep` are kept. `skipswarm local` keeps them in
// LOCAL_DIR/generations/ to restore a lost stage (launcher/stage_recovery.h).
//
// Thread rule: thread-compatible (the launcher's loop).
#ifndef SKIPSWARM_LAUNCHER_EVAL_SNAPSHOTS_H_
#define SKIPSWARM_LAUNCHER_EVAL_SNAPSHOTS_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace skipswarm::launcher {

struct GenerationOptions {
  // The model's (ModelConfig::ConfigHash); empty: the one the first
  // complete step's stage-0 header names (config_hash() then tells it).
  std::string config_hash;
  int keep = 3;             // newest generations kept
};

class EvalSnapshots {
 public:
  EvalSnapshots(std::string checkpoint_dir, std::string out_dir, int num_stages)
      : checkpoint_dir_(std::move(checkpoint_dir)),
        out_dir_(std::move(out_dir)),
        num_stages_(num_stages) {}
  // Writes generations into `out_dir` instead of eval copies.
  EvalSnapshots(std::string checkpoint_dir, std::string out_dir, int num_stages,
                GenerationOptions generations)
      : checkpoint_dir_(std::move(checkpoint_dir)),
        out_dir_(std::move(out_dir)),
        num_stages_(num_stages),
        generations_(std::move(generations)),
        config_hash_(generations_->config_hash) {}

  // Takes every complete step not yet taken; returns the steps taken now.
  std::vector<int64_t> Poll();
  const std::set<int64_t>& taken() const { return taken_; }
  // Generations: the model's config hash (empty until known).
  const std::string& config_hash() const { return config_hash_; }

  static std::string SnapshotDir(const std::string& out_dir, int64_t step);

 private:
  // Writes generation `step` from one file per stage; false when a file no
  // longer holds that step or the write failed (logged).
  bool TakeGeneration(int64_t step, const std::map<int, std::string>& paths);
  struct Seen {
    std::filesystem::file_time_type mtime;
    int stage = -1;
    int64_t step = -1;
  };
  const std::string checkpoint_dir_;
  const std::string out_dir_;
  const int num_stages_;
  const std::optional<GenerationOptions> generations_;
  std::string config_hash_;
  std::map<std::string, Seen> files_;  // path -> what its header said
  std::set<int64_t> taken_;
};

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_EVAL_SNAPSHOTS_H_

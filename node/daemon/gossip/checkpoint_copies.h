// Checkpoint copies on peers: every stage's checkpoint is also held by k
// nodes that do not host it, so that a stage whose every replica is gone,
// disks included, can still be restored.
//
//   // Every node, at a checkpoint boundary b (trainer thread):
//   state->Publish(s, b, snapshot_of_s);              // each hosted stage s
//   for (int s : stages_not_hosted)
//     if (IsCopyHolder(view, self, s, k)) copier->Request(s, b, StateSources(view, self, s));
//   // A restorer (a joiner, `skipswarm local`):
//   QueryHeldCopies(holder, ...);  FetchStageState({holder}, {.stage = s, .iteration = b});
//
// Note [Checkpoint copies]
// Who: the k (default 2) live members that rank highest for the stage by
// rendezvous hashing of (node id, stage), among those that host some
// stage but not this one, so every member computes the same holders from
// the same view and a member joining or leaving moves few copies.
// When: at every checkpoint boundary (node_checkpoint_every) each replica
// publishes its stage's state at that boundary in its StateServer (served
// after the boundary has passed, so a holder that asks late still gets
// it), and each holder pulls it in the background over the state-transfer
// channel (state_transfer.h: ≤ 1 MiB chunks, CRC-32C each, SHA-256 of the
// whole, a size bound from the stage's parameter count, so a hostile or
// oversized source is refused at its first chunk). Training never waits
// for a copy; a failed pull is logged and the next boundary tries again.
// Where: the holder keeps the newest `keep` copies per stage on its disk
// (CHECKPOINT_DIR/NAME-copies/stage-S-iter-N.ckpt, written atomically) and
// in its StateServer, which serves them to any FetchState for (stage,
// iteration) and lists them in Health (QueryHeldCopies). A restarted
// holder serves the copies its disk kept. The bytes are the stage's
// checkpoint (model/checkpoint.h); the restorer checks the header (stage,
// iteration, model) before use (launcher/peer_copies.h).
//
// Thread rule: CopyHolders / IsCopyHolder are pure. CopyStore is
// thread-safe. CheckpointCopier is thread-safe: Request never blocks (the
// pulls run on its own worker thread, one at a time); the destructor
// waits for a pull in progress (bounded by its deadline).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_CHECKPOINT_COPIES_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_CHECKPOINT_COPIES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_worker.h"
#include "common/node_id.h"
#include "membership/view.h"
#include "node/daemon/gossip/state_transfer.h"

namespace skipswarm::node {

// The holders of `stage`'s copies in `view`, best first (at most k).
std::vector<common::NodeId> CopyHolders(const membership::View& view, int stage, int k);
bool IsCopyHolder(const membership::View& view, const common::NodeId& self, int stage, int k);

// A holder's copies on disk: DIR/stage-S-iter-NNNNNNNNNN.ckpt.
class CopyStore {
 public:
  // Creates DIR when missing; lists the copies already there.
  static absl::StatusOr<std::unique_ptr<CopyStore>> Open(std::string dir, int keep);

  // Writes atomically (temp, fsync, rename), then keeps the newest `keep`
  // copies of the stage.
  absl::Status Put(int stage, uint64_t iteration, absl::string_view bytes);
  // (stage, iteration) of every copy, ascending.
  std::vector<std::pair<int, uint64_t>> List() const;
  absl::StatusOr<std::string> Read(int stage, uint64_t iteration) const;
  std::string PathOf(int stage, uint64_t iteration) const;

 private:
  CopyStore(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {}
  const std::string dir_;
  const int keep_;
  mutable absl::Mutex mu_;  // one writer at a time
};

struct CopierOptions {
  common::NodeId self;
  std::shared_ptr<const identity::PeerCredentials> credentials;  // null: plain text
  std::string swarm_id;
  int keep = 3;  // copies per stage, on disk and served
  // The most bytes a stage's state may have (StateBytesBound of its
  // parameters); larger sources are refused.
  std::function<uint64_t(int stage)> max_bytes;
  absl::Duration deadline = absl::Seconds(10);  // per pull
  size_t max_queued = 8;                        // older requests are dropped
};

class CheckpointCopier {
 public:
  // `server` and `store` (may be null: memory only) must outlive this.
  CheckpointCopier(CopierOptions options, StateServer* server, CopyStore* store);

  // Pulls stage `stage` at boundary `iteration` from the first of
  // `sources` that delivers, then holds it (disk and server).
  void Request(int stage, uint64_t iteration, std::vector<StateSource> sources);
  int copies_made() const;
  int pulls_failed() const;

 private:
  struct Job {
    int stage;
    uint64_t iteration;
    std::vector<StateSource> sources;
  };
  void Pull(const Job& job);

  const CopierOptions options_;
  StateServer* const server_;
  CopyStore* const store_;
  mutable absl::Mutex mu_;
  int made_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  common::JobWorker<Job> worker_;  // last: stops before the fields above go
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_CHECKPOINT_COPIES_H_

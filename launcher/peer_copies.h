// The restore path of `skipswarm local` when a lost stage's disks are gone
// too: the stage comes back from the checkpoint copies its peers hold
// (Note [Checkpoint copies], node/daemon/gossip/checkpoint_copies.h),
// fetched over the state-transfer channel like a joiner's state.
//
//   std::map<std::string, std::string> live = ...;      // name -> address
//   PeerCopies copies = FetchPeerCopies(stage, live, bound);
//   ...stop every node...
//   RepairGenerations(root, hash, S, stage, copies, keep);  // then PlanRestore
//
// Note [Lost disks]: `--local_lose_disks` makes the drill harder than a
// crash: when a stage loses its last replica, the launcher deletes what
// the dead nodes kept on disk (their stage checkpoints and the copies they
// held) and the lost stage's files in every generation the launcher
// assembled (those are the harness's stand-in for the nodes' disks). Only
// the copies live peers hold remain, so a restore proves they are used;
// without them (--local_checkpoint_copies=0) the run stops naming the stage.
//
// Thread rule: free functions; blocking (gRPC) in FetchPeerCopies.
#ifndef SKIPSWARM_LAUNCHER_PEER_COPIES_H_
#define SKIPSWARM_LAUNCHER_PEER_COPIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace skipswarm::launcher {

struct PeerCopy {
  std::string bytes;   // the stage's checkpoint, SHA-256 checked in transfer
  std::string holder;  // the node it came from
};
// Iteration -> the stage's copy at it.
using PeerCopies = std::map<int64_t, PeerCopy>;

// Asks every node of `live` (name -> its state-transfer address, plain
// text, swarm `swarm_id`) which copies of `stage` it holds and fetches each
// iteration's copy from a holder (at most `max_bytes`). Unreachable nodes
// are skipped.
PeerCopies FetchPeerCopies(int stage, const std::map<std::string, std::string>& live,
                           const std::string& swarm_id, uint64_t max_bytes);

// Note [Lost disks]: removes CHECKPOINT_DIR/NAME-stage-*.ckpt and
// CHECKPOINT_DIR/NAME-copies/ of every name in `dead`, and stage `stage`'s
// file in every generation folder under `generations_root`. Returns the
// number of files and folders removed.
int LoseDisks(const std::string& checkpoint_dir, const std::string& generations_root,
              const std::vector<std::string>& dead, int stage);

// Every generation folder under `root` that is not complete and whose
// iteration has a copy of `stage` is written again (WriteGeneration: each
// stage's header checked) with the copy as that stage's file. Returns the
// iterations repaired, newest first.
std::vector<int64_t> RepairGenerations(const std::string& root, const std::string& config_hash,
                                       int num_stages, int stage, const PeerCopies& copies,
                                       int keep);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_PEER_COPIES_H_

#include "launcher/peer_copies.h"

#include <glog/logging.h>

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"
#include "node/daemon/gossip/state_transfer.h"

namespace skipswarm::launcher {
namespace fs = std::filesystem;

PeerCopies FetchPeerCopies(int stage, const std::map<std::string, std::string>& live,
                           const std::string& swarm_id, uint64_t max_bytes) {
  // iteration -> names of the nodes holding it.
  std::map<int64_t, std::vector<std::string>, std::greater<>> holders;
  for (const auto& [name, address] : live) {
    absl::StatusOr<std::vector<std::pair<int, uint64_t>>> held =
        node::QueryHeldCopies(node::StateSource(address), nullptr, absl::Seconds(5));
    if (!held.ok()) {
      LOG(WARNING) << "cannot ask " << name << " (" << address << ") for copies: "
                   << held.status();
      continue;
    }
    for (const auto& [s, it] : *held) {
      if (s == stage) holders[static_cast<int64_t>(it)].push_back(name);
    }
  }
  PeerCopies out;
  for (const auto& [it, names] : holders) {
    std::vector<node::StateSource> sources;
    for (const std::string& n : names) sources.push_back(node::StateSource(live.at(n)));
    node::FetchOptions o;
    o.self = common::NodeId::ForName("skipswarm-local");
    o.swarm_id = swarm_id;
    o.stage = stage;
    o.iteration = static_cast<uint64_t>(it);
    o.deadline = absl::Seconds(20);
    o.max_bytes = max_bytes;
    absl::StatusOr<node::FetchedState> got = node::FetchStageState(sources, o);
    if (!got.ok()) {
      LOG(WARNING) << "copy of stage " << stage << " at " << it << " not fetched: "
                   << got.status();
      continue;
    }
    std::string holder;
    for (const auto& [n, a] : live) {
      if (a == got->source) holder = n;
    }
    out[it] = PeerCopy{std::move(got->bytes), holder};
  }
  return out;
}

int LoseDisks(const std::string& checkpoint_dir, const std::string& generations_root,
              const std::vector<std::string>& dead, int stage) {
  int removed = 0;
  std::error_code ec;
  for (const std::string& name : dead) {
    for (fs::directory_iterator it(checkpoint_dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string f = it->path().filename().string();
      if (absl::StartsWith(f, name + "-stage-")) removed += fs::remove(it->path(), ec) ? 1 : 0;
    }
    removed += fs::remove_all(absl::StrCat(checkpoint_dir, "/", name, "-copies"), ec) > 0;
  }
  for (int64_t it : model::ListGenerationFolders(generations_root)) {
    removed += fs::remove(absl::StrCat(model::GenerationDir(generations_root, it), "/stage-",
                                       stage, ".ckpt"),
                          ec)
                   ? 1
                   : 0;
  }
  return removed;
}

std::vector<int64_t> RepairGenerations(const std::string& root, const std::string& config_hash,
                                       int num_stages, int stage, const PeerCopies& copies,
                                       int keep) {
  std::vector<int64_t> repaired;
  for (int64_t it : model::ListGenerationFolders(root)) {  // newest first
    const std::string dir = model::GenerationDir(root, it);
    auto copy = copies.find(it);
    if (copy == copies.end() || model::CheckGeneration(dir, config_hash, num_stages).ok()) {
      continue;
    }
    // The copy is a peer's bytes that nodes will read as a local file:
    // only version 2 (model/checkpoint.h: version 1 reaches libtorch's loader).
    absl::Status format =
        model::CheckFormatForSource(copy->second.bytes, model::StateSource::kPeer);
    if (!format.ok()) {
      LOG(WARNING) << "generation " << it << " not repaired from " << copy->second.holder
                   << "'s copy: " << format;
      continue;
    }
    std::map<int, std::string> bytes;
    bool whole = true;
    for (int s = 0; s < num_stages && whole; ++s) {
      if (s == stage) {
        bytes[s] = copy->second.bytes;
        continue;
      }
      absl::StatusOr<std::string> b =
          common::ReadFileBytes(absl::StrCat(dir, "/stage-", s, ".ckpt"));
      whole = b.ok();
      if (whole) bytes[s] = *std::move(b);
    }
    if (!whole) continue;
    // WriteGeneration checks every stage's header (stage, iteration, model).
    absl::Status s = model::WriteGeneration(root, it, config_hash, num_stages, bytes, keep);
    if (!s.ok()) {
      LOG(WARNING) << "generation " << it << " not repaired from " << copy->second.holder
                   << "'s copy: " << s;
      continue;
    }
    repaired.push_back(it);
  }
  return repaired;
}

}  // namespace skipswarm::launcher

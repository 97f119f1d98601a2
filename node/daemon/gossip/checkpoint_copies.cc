#include "common/atomic_file.h"
#include "node/daemon/gossip/checkpoint_copies.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/crc32c.h"

namespace skipswarm::node {
namespace {

namespace fs = std::filesystem;

bool Hosts(const membership::MemberInfo& m, int stage) {
  return std::find(m.stages.begin(), m.stages.end(), static_cast<uint32_t>(stage)) !=
         m.stages.end();
}

// Rendezvous score of (member, stage): the same on every node.
uint32_t Score(const common::NodeId& id, int stage) {
  return common::Crc32c(absl::StrCat(id.Bytes(), "/copy-of-stage/", stage));
}

// "stage-S-iter-N.ckpt" -> (S, N).
bool ParseName(const std::string& name, std::pair<int, uint64_t>* out) {
  absl::string_view v = name;
  if (!absl::ConsumePrefix(&v, "stage-") || !absl::ConsumeSuffix(&v, ".ckpt")) return false;
  std::vector<absl::string_view> p = absl::StrSplit(v, "-iter-");
  int s;
  uint64_t it;
  if (p.size() != 2 || !absl::SimpleAtoi(p[0], &s) || !absl::SimpleAtoi(p[1], &it) || s < 0) {
    return false;
  }
  *out = {s, it};
  return true;
}

}  // namespace

std::vector<common::NodeId> CopyHolders(const membership::View& view, int stage, int k) {
  std::vector<std::pair<uint32_t, common::NodeId>> ranked;
  for (const membership::MemberInfo& m : view.members) {
    if (!m.live() || m.stages.empty() || Hosts(m, stage)) continue;
    ranked.push_back({Score(m.id, stage), m.id});
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.Bytes() < b.second.Bytes();
  });
  std::vector<common::NodeId> out;
  for (const auto& [score, id] : ranked) {
    if (static_cast<int>(out.size()) >= k) break;
    out.push_back(id);
  }
  return out;
}

bool IsCopyHolder(const membership::View& view, const common::NodeId& self, int stage, int k) {
  const std::vector<common::NodeId> holders = CopyHolders(view, stage, k);
  return std::find(holders.begin(), holders.end(), self) != holders.end();
}

absl::StatusOr<std::unique_ptr<CopyStore>> CopyStore::Open(std::string dir, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return std::unique_ptr<CopyStore>(new CopyStore(std::move(dir), std::max(1, keep)));
}

std::string CopyStore::PathOf(int stage, uint64_t iteration) const {
  return absl::StrFormat("%s/stage-%d-iter-%010d.ckpt", dir_, stage, iteration);
}

std::vector<std::pair<int, uint64_t>> CopyStore::List() const {
  std::vector<std::pair<int, uint64_t>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::pair<int, uint64_t> key;
    if (it->is_regular_file(ec) && ParseName(it->path().filename().string(), &key)) {
      out.push_back(key);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::string> CopyStore::Read(int stage, uint64_t iteration) const {
  std::ifstream in(PathOf(stage, iteration), std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("no copy of stage ", stage, " at iteration ", iteration, " in ", dir_));
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status CopyStore::Put(int stage, uint64_t iteration, absl::string_view bytes) {
  absl::MutexLock lock(&mu_);
  absl::Status s = common::WriteFileAtomically(PathOf(stage, iteration), bytes);
  if (!s.ok()) return s;
  std::vector<uint64_t> mine;
  for (const auto& [st, it] : List()) {
    if (st == stage) mine.push_back(it);
  }
  std::error_code ec;
  for (size_t i = 0; i + keep_ < mine.size(); ++i) fs::remove(PathOf(stage, mine[i]), ec);
  return absl::OkStatus();
}

CheckpointCopier::CheckpointCopier(CopierOptions options, StateServer* server, CopyStore* store)
    : options_(std::move(options)),
      server_(server),
      store_(store),
      worker_([this](Job& job) { Pull(job); }, options_.max_queued) {}

void CheckpointCopier::Request(int stage, uint64_t iteration, std::vector<StateSource> sources) {
  worker_.Push({stage, iteration, std::move(sources)});
}

int CheckpointCopier::copies_made() const {
  absl::MutexLock lock(&mu_);
  return made_;
}

int CheckpointCopier::pulls_failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

void CheckpointCopier::Pull(const Job& job) {
  FetchOptions o;
  o.self = options_.self;
  o.credentials = options_.credentials;
  o.swarm_id = options_.swarm_id;
  o.stage = job.stage;
  o.iteration = job.iteration;
  o.deadline = options_.deadline;
  o.max_bytes = options_.max_bytes ? options_.max_bytes(job.stage) : 0;
  o.resumes_per_source = 1;
  absl::Status s;
  absl::StatusOr<FetchedState> got = absl::UnavailableError("no live replica to copy from");
  if (!job.sources.empty()) got = FetchStageState(job.sources, o);
  if (got.ok() && store_ != nullptr) s = store_->Put(job.stage, job.iteration, got->bytes);
  if (!got.ok() || !s.ok()) {
    LOG(WARNING) << "checkpoint copy of stage " << job.stage << " at iteration " << job.iteration
                 << " not made (the next checkpoint tries again): "
                 << (got.ok() ? s : got.status());
    absl::MutexLock lock(&mu_);
    ++failed_;
    return;
  }
  LOG(INFO) << "checkpoint copy of stage " << job.stage << " at iteration " << job.iteration
            << " held: " << got->bytes.size() << " bytes from " << got->source;
  server_->HoldCopy(job.stage, job.iteration, StageSnapshot{std::move(got->bytes),
                                                            got->params_digest},
                    options_.keep);
  absl::MutexLock lock(&mu_);
  ++made_;
}

}  // namespace skipswarm::node

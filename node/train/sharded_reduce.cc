#include "node/train/sharded_reduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

// Rounds kept for later (peers ahead of us); more means a confused peer.
constexpr size_t kMaxLaterRounds = 16;

bool Contains(const std::vector<common::NodeId>& v, const common::NodeId& x) {
  return std::binary_search(v.begin(), v.end(), x);
}

}  // namespace

ShardedReduce::ShardedReduce(common::NodeId self, uint64_t iteration, int stage,
                             GradientContribution own)
    : self_(self), iteration_(iteration), stage_(stage), own_(std::move(own)) {}

std::pair<int64_t, int64_t> ShardedReduce::ShardRange(int64_t total, int members, int shard) {
  return {total * shard / members, total * (shard + 1) / members};
}

ReduceMessage ShardedReduce::Message(ReduceMessage::Phase phase, int shard) const {
  ReduceMessage m;
  m.phase = phase;
  m.iteration = iteration_;
  m.stage = stage_;
  m.from = self_;
  m.members = members_;
  m.shard = shard;
  m.total = static_cast<int64_t>(own_.flat.size());
  if (phase == ReduceMessage::Phase::kScatter) {
    const auto [begin, end] = ShardRange(m.total, static_cast<int>(members_.size()), shard);
    m.data = std::make_shared<const std::vector<float>>(own_.flat.begin() + begin,
                                                        own_.flat.begin() + end);
    m.visits = own_.visits;
    m.digest = own_.params_digest;
  } else {
    const Part& mine = gather_.at(index_);
    m.data = mine.data;
    m.visits = mine.visits;
    m.digests = mine.digests;
  }
  return m;
}

std::vector<OutgoingReduce> ShardedReduce::Start(std::vector<common::NodeId> members) {
  if (!Contains(members, self_)) members.push_back(self_);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  members_ = std::move(members);
  index_ = static_cast<int>(std::lower_bound(members_.begin(), members_.end(), self_) -
                            members_.begin());
  scatter_.clear();
  gather_.clear();
  reduced_ = false;
  done_ = false;
  result_ = absl::UnavailableError("not done");
  std::vector<OutgoingReduce> out;
  for (int j = 0; j < static_cast<int>(members_.size()); ++j) {
    if (j != index_) out.push_back({members_[j], Message(ReduceMessage::Phase::kScatter, j)});
  }
  ReduceMessage own = Message(ReduceMessage::Phase::kScatter, index_);
  scatter_[self_] = Part{own.data, own.visits, own.digest, {}};
  auto it = later_.find(members_);
  if (it != later_.end()) {
    std::vector<ReduceMessage> replay = std::move(it->second);
    later_.erase(it);
    for (ReduceMessage& m : replay) {
      if (Check(m).ok()) Accept(std::move(m));
    }
  }
  std::vector<OutgoingReduce> more = Advance();
  out.insert(out.end(), std::make_move_iterator(more.begin()),
             std::make_move_iterator(more.end()));
  return out;
}

absl::StatusOr<std::vector<OutgoingReduce>> ShardedReduce::Receive(ReduceMessage m) {
  if (m.iteration != iteration_ || m.stage != stage_) {
    return absl::InvalidArgumentError("message for another iteration or stage");
  }
  if (!std::is_sorted(m.members.begin(), m.members.end()) ||
      std::adjacent_find(m.members.begin(), m.members.end()) != m.members.end() ||
      !Contains(m.members, m.from) || !Contains(m.members, self_) || m.data == nullptr) {
    return absl::InvalidArgumentError("round members must be ascending and name both ends");
  }
  if (m.members != members_) {
    if (later_.size() < kMaxLaterRounds || later_.count(m.members)) {
      later_[m.members].push_back(std::move(m));
    }
    return std::vector<OutgoingReduce>();
  }
  absl::Status ok = Check(m);
  if (!ok.ok()) return ok;
  Accept(std::move(m));
  return Advance();
}

absl::Status ShardedReduce::Check(const ReduceMessage& m) const {
  const int r = static_cast<int>(members_.size());
  if (m.total != static_cast<int64_t>(own_.flat.size())) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", m.from.ShortString(), " has ",
                                                   m.total, " gradient elements, this one ",
                                                   own_.flat.size()));
  }
  if (m.shard < 0 || m.shard >= r) return absl::InvalidArgumentError("no such shard");
  const auto [begin, end] = ShardRange(m.total, r, m.shard);
  if (static_cast<int64_t>(m.data->size()) != end - begin) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", m.shard, " has ", m.data->size(),
                                                   " elements, expected ", end - begin));
  }
  if (m.phase == ReduceMessage::Phase::kScatter) {
    if (m.shard != index_) return absl::InvalidArgumentError("a part of another shard");
  } else {
    if (m.from != members_[m.shard]) {
      return absl::InvalidArgumentError("a reduced shard from a replica that does not own it");
    }
    if (static_cast<int>(m.digests.size()) != r) {
      return absl::InvalidArgumentError("a reduced shard without every member's digest");
    }
  }
  return absl::OkStatus();
}

void ShardedReduce::Accept(ReduceMessage m) {
  if (m.phase == ReduceMessage::Phase::kScatter) {
    scatter_[m.from] = Part{std::move(m.data), m.visits, m.digest, {}};
  } else {
    gather_[m.shard] = Part{std::move(m.data), m.visits, 0, std::move(m.digests)};
  }
}

std::vector<OutgoingReduce> ShardedReduce::Advance() {
  std::vector<OutgoingReduce> out;
  const int r = static_cast<int>(members_.size());
  if (!reduced_ && static_cast<int>(scatter_.size()) == r) {
    // Ascending member order (scatter_ is ordered by id): the same sums as
    // adding whole contributions in that order.
    auto it = scatter_.begin();
    auto sum = std::make_shared<std::vector<float>>(*it->second.data);
    Part reduced;
    reduced.visits = it->second.visits;
    reduced.digests.push_back(it->second.digest);
    for (++it; it != scatter_.end(); ++it) {
      const std::vector<float>& part = *it->second.data;
      for (size_t i = 0; i < sum->size(); ++i) (*sum)[i] += part[i];
      reduced.visits += it->second.visits;
      reduced.digests.push_back(it->second.digest);
    }
    reduced.data = std::move(sum);
    gather_[index_] = std::move(reduced);
    reduced_ = true;
    for (int j = 0; j < r; ++j) {
      if (j != index_) {
        out.push_back({members_[j], Message(ReduceMessage::Phase::kGather, index_)});
      }
    }
  }
  if (reduced_ && !done_ && static_cast<int>(gather_.size()) == r) {
    done_ = true;
    ReduceResult result;
    result.sum.reserve(own_.flat.size());
    const Part& mine = gather_.at(index_);
    result.visits = mine.visits;
    result.contributors = r;
    for (int k = 0; k < r; ++k) {
      const Part& p = gather_.at(k);
      result.sum.insert(result.sum.end(), p.data->begin(), p.data->end());
      if (p.visits != mine.visits || p.digests != mine.digests) {
        result_ = absl::InternalError(
            absl::StrCat("reduced shards of one round disagree (shard ", k, ")"));
        return out;
      }
    }
    for (int k = 0; k < r; ++k) {
      result.digests.emplace_back(members_[k], mine.digests[k]);
      if (mine.digests[k] != mine.digests[0]) result.digests_agree = false;
    }
    result_ = std::move(result);
  }
  return out;
}

std::optional<std::vector<common::NodeId>> ShardedReduce::SmallerRoundWaiting() const {
  for (auto it = later_.rbegin(); it != later_.rend(); ++it) {
    const std::vector<common::NodeId>& round = it->first;
    if (round.size() < members_.size() && Contains(round, self_) &&
        std::includes(members_.begin(), members_.end(), round.begin(), round.end())) {
      return round;
    }
  }
  return std::nullopt;
}

std::vector<common::NodeId> ShardedReduce::Missing() const {
  std::vector<common::NodeId> missing;
  for (int k = 0; k < static_cast<int>(members_.size()); ++k) {
    if (k == index_) continue;
    const bool part = reduced_ || scatter_.count(members_[k]) > 0;
    if (!part || gather_.count(k) == 0) missing.push_back(members_[k]);
  }
  return missing;
}

}  // namespace skipswarm::node

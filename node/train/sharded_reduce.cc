#include "node/train/sharded_reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

// Rounds kept for later (peers ahead of us); more means a confused peer.
constexpr size_t kMaxLaterRounds = 16;

bool Contains(const std::vector<common::NodeId>& v, const common::NodeId& x) {
  return std::binary_search(v.begin(), v.end(), x);
}

int64_t Bytes(const std::vector<OutgoingReduce>& out) {
  int64_t bytes = 0;
  for (const OutgoingReduce& o : out) {
    const ReduceMessage& m = o.message;
    bytes += m.payload != nullptr ? static_cast<int64_t>(m.payload->size())
                                  : static_cast<int64_t>(m.data->size() * sizeof(float));
  }
  return bytes;
}

}  // namespace

ShardLayout ShardLayout::FromBandwidths(const std::vector<uint64_t>& bytes_per_second) {
  if (bytes_per_second.size() < 2) return {};
  uint64_t top = 0;
  for (uint64_t b : bytes_per_second) {
    if (b == 0) return {};  // someone unknown: equal shards
    top = std::max(top, b);
  }
  // Integer weights in [kShardWeightScale / kMaxShardSpread,
  // kShardWeightScale]: the same on every machine.
  ShardLayout layout;
  for (uint64_t b : bytes_per_second) {
    const unsigned __int128 scaled =
        (static_cast<unsigned __int128>(b) * kShardWeightScale + top / 2) / top;
    layout.weights.push_back(std::max<uint32_t>(kShardWeightScale / kMaxShardSpread,
                                                static_cast<uint32_t>(scaled)));
  }
  if (std::adjacent_find(layout.weights.begin(), layout.weights.end(),
                         std::not_equal_to<>()) == layout.weights.end()) {
    return {};  // all equal: the canonical equal layout
  }
  return layout;
}

std::pair<int64_t, int64_t> ShardLayout::Range(int64_t total, int members, int shard) const {
  if (weights.empty()) return ShardedReduce::ShardRange(total, members, shard);
  uint64_t before = 0, sum = 0;
  for (int k = 0; k < static_cast<int>(weights.size()); ++k) {
    if (k < shard) before += weights[k];
    sum += weights[k];
  }
  const uint64_t through = before + weights[shard];
  auto cut = [total, sum](uint64_t w) {
    return static_cast<int64_t>(static_cast<__int128>(total) * w / sum);
  };
  return {cut(before), cut(through)};
}

absl::Status ShardLayout::Validate(int members) const {
  if (weights.empty()) return absl::OkStatus();
  if (static_cast<int>(weights.size()) != members) {
    return absl::InvalidArgumentError(absl::StrCat("a shard layout of ", weights.size(),
                                                   " weights for a round of ", members));
  }
  for (uint32_t w : weights) {
    if (w == 0 || w > (uint32_t{1} << 16)) {
      return absl::InvalidArgumentError(absl::StrCat("shard weight ", w, " out of range"));
    }
  }
  return absl::OkStatus();
}

ShardedReduce::ShardedReduce(common::NodeId self, uint64_t iteration, int stage,
                             GradientContribution own, uint64_t bandwidth,
                             RobustOptions robust, model::AvgCodecSpec codec,
                             std::vector<float>* gather_residual)
    : self_(self),
      iteration_(iteration),
      stage_(stage),
      own_(std::move(own)),
      bandwidth_(bandwidth),
      robust_(robust),
      own_norm_(L2Norm(own_.flat)),
      codec_(codec),
      gather_residual_(gather_residual) {}

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
  m.layout = layout_;
  if (phase == ReduceMessage::Phase::kScatter) {
    const auto [begin, end] = layout_.Range(m.total, static_cast<int>(members_.size()), shard);
    m.data = std::make_shared<const std::vector<float>>(own_.flat.begin() + begin,
                                                        own_.flat.begin() + end);
    if (codec_.kind != model::AvgCodecKind::kFp32) {
      m.payload = std::make_shared<const std::string>(EncodeShard(
          codec_, m.data->data(), end - begin, begin, own_.factors.get()));
    }
    m.visits = own_.visits;
    m.digest = own_.params_digest;
    m.bandwidth = bandwidth_;
    m.norm = own_norm_;
    m.excluded = excluded_;
  } else {
    const Part& mine = gather_.at(index_);
    m.data = mine.data;
    m.payload = mine.payload;
    m.visits = mine.visits;
    m.digests = mine.digests;
    m.bandwidths = mine.bandwidths;
  }
  return m;
}

std::vector<OutgoingReduce> ShardedReduce::Start(std::vector<common::NodeId> members,
                                                 ShardLayout layout) {
  if (!Contains(members, self_)) members.push_back(self_);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  members_ = std::move(members);
  layout_ = layout.Validate(static_cast<int>(members_.size())).ok() ? std::move(layout)
                                                                     : ShardLayout();
  parked_.clear();
  UndoResidual();
  index_ = static_cast<int>(std::lower_bound(members_.begin(), members_.end(), self_) -
                            members_.begin());
  scatter_.clear();
  gather_.clear();
  reduced_ = false;
  verdicts_.clear();
  done_ = false;
  result_ = absl::UnavailableError("not done");
  // Note [Banned owners]: the members whose reduced shards this replica
  // will not take, and its own parts of their shards.
  excluded_.clear();
  banned_parts_.clear();
  banned_verdicts_.clear();
  answered_.clear();
  banned_owners_shards_.clear();
  for (const common::NodeId& m : members_) {
    if (m != self_ && robust_.banned.count(m) > 0) excluded_.push_back(m);
  }
  std::vector<OutgoingReduce> out;
  for (int j = 0; j < static_cast<int>(members_.size()); ++j) {
    if (j != index_) out.push_back({members_[j], Message(ReduceMessage::Phase::kScatter, j)});
  }
  for (const common::NodeId& b : excluded_) {
    const int k = IndexOf(b);
    ReduceMessage part = Message(ReduceMessage::Phase::kScatter, k);
    banned_parts_[k][self_] =
        Part{part.data, part.payload, part.visits, part.digest, {}, bandwidth_, {}, own_norm_,
             {}};
  }
  ReduceMessage own = Message(ReduceMessage::Phase::kScatter, index_);
  scatter_[self_] = Part{own.data, own.payload, own.visits, own.digest, {}, bandwidth_, {},
                         own_norm_, excluded_};
  std::vector<OutgoingReduce> more = Advance();
  out.insert(out.end(), std::make_move_iterator(more.begin()),
             std::make_move_iterator(more.end()));
  auto it = later_.find(members_);
  if (it != later_.end()) {
    std::vector<ReduceMessage> replay = std::move(it->second);
    later_.erase(it);
    // Take may restart the round (a layout disagreement); the rest of the
    // replay then goes to the restarted round.
    for (ReduceMessage& m : replay) Take(std::move(m), &out);
  }
  Count(out);
  return out;
}

void ShardedReduce::Take(ReduceMessage m, std::vector<OutgoingReduce>* out, bool checked) {
  if (m.layout != layout_) {
    // Note [Shard layout]: the round's first member's cut is the round's.
    // The first member keeps its own: the sender takes it when our
    // messages reach it.
    if (index_ == 0) return;
    if (m.from != members_[0]) {
      // Another member's cut; it may be the first member's, which this
      // member has not seen yet. Kept per sender, phase and cut (messages
      // may arrive out of order: a sender's newer cut before its older).
      // A sender changes its cut at most once per round; more is a
      // confused peer, whose messages are then dropped.
      ParkedKey key{m.from, static_cast<int>(m.phase), m.shard, m.layout.weights};
      if (parked_.size() < 6 * members_.size() || parked_.count(key) > 0) {
        parked_[std::move(key)] = std::move(m);
      }
      return;
    }
    adopted_ = true;
    std::map<ParkedKey, ReduceMessage> parked = std::move(parked_);
    std::vector<OutgoingReduce> again = Start(members_, m.layout);
    sent_bytes_ -= Bytes(again);  // counted once, by our caller
    out->insert(out->end(), std::make_move_iterator(again.begin()),
                std::make_move_iterator(again.end()));
    for (auto& [key, p] : parked) {
      if (p.layout == layout_) Take(std::move(p), out);
    }
    checked = false;
    if (m.layout != layout_) return;  // (Start refused it: not for this round)
  }
  if (!checked && !Check(m).ok()) return;
  // Note [Banned owners]: a part of this replica's shard asks for its parts
  // of the shards whose owners the sender bans.
  std::vector<common::NodeId> asks;
  if (m.phase == ReduceMessage::Phase::kScatter && m.shard == index_) asks = m.excluded;
  const common::NodeId from = m.from;
  Accept(std::move(m));
  if (!asks.empty()) Answer(from, asks, out);
  std::vector<OutgoingReduce> more = Advance();
  out->insert(out->end(), std::make_move_iterator(more.begin()),
              std::make_move_iterator(more.end()));
}

absl::StatusOr<std::vector<OutgoingReduce>> ShardedReduce::Receive(ReduceMessage m) {
  if (m.iteration != iteration_ || m.stage != stage_) {
    return absl::InvalidArgumentError("message for another iteration or stage");
  }
  if (!std::is_sorted(m.members.begin(), m.members.end()) ||
      std::adjacent_find(m.members.begin(), m.members.end()) != m.members.end() ||
      !Contains(m.members, m.from) || m.data == nullptr) {
    return absl::InvalidArgumentError("round members must be ascending and name the sender");
  }
  absl::Status layout_ok = m.layout.Validate(static_cast<int>(m.members.size()));
  if (!layout_ok.ok()) return layout_ok;
  if (!Contains(m.members, self_)) {
    // Note [Late members]: the peers closed the round without us.
    if (m.phase != ReduceMessage::Phase::kGather || !started()) {
      return absl::InvalidArgumentError("a round that does not name this replica");
    }
    absl::Status closed = ReceiveClosed(std::move(m));
    if (!closed.ok()) return closed;
    return std::vector<OutgoingReduce>();
  }
  if (m.members != members_) {
    if (later_.size() < kMaxLaterRounds || later_.count(m.members)) {
      later_[m.members].push_back(std::move(m));
    }
    return std::vector<OutgoingReduce>();
  }
  std::vector<OutgoingReduce> out;
  const bool checked = m.layout == layout_;
  if (checked) {
    absl::Status ok = Check(m);
    if (!ok.ok()) return ok;
  }
  Take(std::move(m), &out, checked);
  Count(out);
  return out;
}

absl::Status ShardedReduce::Check(const ReduceMessage& m) const {
  const int r = static_cast<int>(members_.size());
  if (m.total != static_cast<int64_t>(own_.flat.size())) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", m.from.ShortString(), " has ",
                                                   m.total, " gradient elements, this one ",
                                                   own_.flat.size()));
  }
  if (m.shard < 0 || m.shard >= r) return absl::InvalidArgumentError("no such shard");
  if (m.layout != layout_) return absl::InvalidArgumentError("a message of another shard layout");
  const auto [begin, end] = layout_.Range(m.total, r, m.shard);
  if (static_cast<int64_t>(m.data->size()) != end - begin) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", m.shard, " has ", m.data->size(),
                                                   " elements, expected ", end - begin));
  }
  if (m.phase == ReduceMessage::Phase::kScatter) {
    // Note [Banned owners]: parts of a banned owner's shard come from
    // every other member.
    if (m.shard != index_ && (!Excluded(members_[m.shard]) || m.from == members_[m.shard])) {
      return absl::InvalidArgumentError("a part of another shard");
    }
  } else {
    if (m.from != members_[m.shard]) {
      return absl::InvalidArgumentError("a reduced shard from a replica that does not own it");
    }
    if (static_cast<int>(m.digests.size()) != r || static_cast<int>(m.bandwidths.size()) != r) {
      return absl::InvalidArgumentError(
          "a reduced shard without every member's digest and bandwidth");
    }
    // Note [Robust averaging]: a reduced shard is non-finite only when every
    // part of it was; this member's own part tells.
    const bool mine_finite = std::all_of(own_.flat.begin() + begin, own_.flat.begin() + end,
                                         [](float x) { return std::isfinite(x); });
    if (mine_finite && !std::all_of(m.data->begin(), m.data->end(),
                                    [](float x) { return std::isfinite(x); })) {
      return absl::DataLossError(absl::StrCat("replica ", m.from.ShortString(),
                                              " sent a non-finite reduced shard ", m.shard,
                                              " although this member's part of it is finite"));
    }
  }
  return absl::OkStatus();
}

void ShardedReduce::Accept(ReduceMessage m) {
  if (m.phase == ReduceMessage::Phase::kScatter) {
    (m.shard == index_ ? scatter_ : banned_parts_[m.shard])[m.from] =
        Part{std::move(m.data), std::move(m.payload), m.visits, m.digest, {}, m.bandwidth, {},
             m.norm, std::move(m.excluded)};
  } else {
    // Note [Banned owners]: a banned owner's shard waits for the verdict.
    (Excluded(m.from) ? banned_owners_shards_ : gather_)[m.shard] =
        Part{std::move(m.data), std::move(m.payload), m.visits, 0, std::move(m.digests), 0,
             std::move(m.bandwidths), -1, {}};
  }
}

std::vector<OutgoingReduce> ShardedReduce::Advance() {
  std::vector<OutgoingReduce> out;
  const int r = static_cast<int>(members_.size());
  if (!reduced_ && static_cast<int>(scatter_.size()) == r) {
    // Ascending member order (scatter_ is ordered by id): the same sums as
    // adding whole contributions in that order, each part checked first
    // (Note [Robust averaging]).
    Part reduced;
    std::vector<PartInput> parts;
    for (const auto& [from, part] : scatter_) {
      parts.push_back({from, part.data.get(), part.visits, part.norm});
      reduced.visits += part.visits;
      reduced.digests.push_back(part.digest);
      reduced.bandwidths.push_back(part.bandwidth);
    }
    verdicts_.clear();
    auto sum = std::make_shared<std::vector<float>>(RobustSum(parts, robust_, &verdicts_));
    reduced.data = std::move(sum);
    EncodeReduced(&reduced);
    gather_[index_] = std::move(reduced);
    reduced_ = true;
    for (int j = 0; j < r; ++j) {
      if (j != index_) {
        out.push_back({members_[j], Message(ReduceMessage::Phase::kGather, index_)});
      }
    }
    // Note [Late members]: the members closed out get it too.
    for (const common::NodeId& late : closed_out_) {
      if (!Contains(members_, late)) {
        out.push_back({late, Message(ReduceMessage::Phase::kGather, index_)});
      }
    }
  }
  if (reduced_ && !done_) ReduceBannedShards();
  if (reduced_ && !done_ && static_cast<int>(gather_.size()) == r) {
    done_ = true;
    settled_ = true;
    residual_undo_.clear();
    ReduceResult result;
    result.sum.reserve(own_.flat.size());
    const Part& mine = gather_.at(index_);
    result.visits = mine.visits;
    result.contributors = r;
    for (int k = 0; k < r; ++k) {
      const Part& p = gather_.at(k);
      result.sum.insert(result.sum.end(), p.data->begin(), p.data->end());
      if (p.visits != mine.visits || p.digests != mine.digests ||
          p.bandwidths != mine.bandwidths) {
        result_ = absl::InternalError(
            absl::StrCat("reduced shards of one round disagree (shard ", k, ")"));
        return out;
      }
    }
    for (int k = 0; k < r; ++k) {
      result.digests.emplace_back(members_[k], mine.digests[k]);
      if (mine.digests[k] != mine.digests[0]) result.digests_agree = false;
      result.bandwidths.emplace_back(members_[k], mine.bandwidths[k]);
    }
    result.shard_weights = layout_.weights;
    result.layout_adopted = adopted_;
    result.refused_parts = verdicts_;
    result.refused_parts.insert(result.refused_parts.end(), banned_verdicts_.begin(),
                                banned_verdicts_.end());
    for (const common::NodeId& late : closed_out_) {
      if (!Contains(members_, late)) result.left_out.push_back(late);
    }
    result_ = std::move(result);
  }
  return out;
}

absl::Status ShardedReduce::ReceiveClosed(ReduceMessage m) {
  if (done_) return absl::OkStatus();  // our own round finished first
  const int r = static_cast<int>(m.members.size());
  if (!std::includes(members_.begin(), members_.end(), m.members.begin(), m.members.end())) {
    return absl::InvalidArgumentError("a reduced shard of a round of members not in ours");
  }
  if (m.shard < 0 || m.shard >= r || m.members[m.shard] != m.from) {
    return absl::InvalidArgumentError("a reduced shard from a replica that does not own it");
  }
  if (m.total != static_cast<int64_t>(own_.flat.size())) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", m.from.ShortString(), " has ",
                                                   m.total, " elements, this one ",
                                                   own_.flat.size()));
  }
  const auto [begin, end] = m.layout.Range(m.total, r, m.shard);
  if (static_cast<int64_t>(m.data->size()) != end - begin ||
      static_cast<int>(m.digests.size()) != r || static_cast<int>(m.bandwidths.size()) != r) {
    return absl::InvalidArgumentError("a reduced shard of the wrong size or without its round's "
                                      "digests and bandwidths");
  }
  const auto key = std::make_pair(m.members, m.layout.weights);
  if (closed_.size() >= kMaxLaterRounds && closed_.count(key) == 0) return absl::OkStatus();
  std::map<int, Part>& shards = closed_[key];
  shards[m.shard] = Part{std::move(m.data), std::move(m.payload), m.visits, 0,
                         std::move(m.digests), 0, std::move(m.bandwidths), -1, {}};
  if (static_cast<int>(shards.size()) < r) return absl::OkStatus();
  const Part& first = shards.begin()->second;
  ReduceResult result;
  result.sum.reserve(own_.flat.size());
  for (const auto& [k, p] : shards) {
    if (p.visits != first.visits || p.digests != first.digests ||
        p.bandwidths != first.bandwidths) {
      closed_.erase(key);
      return absl::InvalidArgumentError("reduced shards of one closed round disagree");
    }
    result.sum.insert(result.sum.end(), p.data->begin(), p.data->end());
  }
  result.visits = first.visits;
  result.contributors = r;
  for (int k = 0; k < r; ++k) {
    result.digests.emplace_back(key.first[k], first.digests[k]);
    if (first.digests[k] != first.digests[0]) result.digests_agree = false;
    result.bandwidths.emplace_back(key.first[k], first.bandwidths[k]);
  }
  result.shard_weights = key.second;
  for (const common::NodeId& id : members_) {
    if (!Contains(key.first, id)) result.left_out.push_back(id);
  }
  result.late = true;
  done_ = true;
  UndoResidual();  // our own reduced shard, if any, was not used
  settled_ = true;
  result_ = std::move(result);
  return absl::OkStatus();
}

bool ShardedReduce::Excluded(const common::NodeId& id) const {
  return std::binary_search(excluded_.begin(), excluded_.end(), id);
}

int ShardedReduce::IndexOf(const common::NodeId& id) const {
  return static_cast<int>(std::lower_bound(members_.begin(), members_.end(), id) -
                          members_.begin());
}

bool ShardedReduce::Shunned(int k) const {
  const common::NodeId& owner = members_[k];
  int shunning = 0;
  for (const auto& [from, part] : scatter_) {
    if (from != owner &&
        std::find(part.excluded.begin(), part.excluded.end(), owner) != part.excluded.end()) {
      ++shunning;
    }
  }
  return 2 * shunning > static_cast<int>(members_.size()) - 1;
}

void ShardedReduce::Answer(const common::NodeId& asker, const std::vector<common::NodeId>& asks,
                           std::vector<OutgoingReduce>* out) {
  const size_t most = members_.size();  // a longer list is a confused peer
  for (size_t i = 0; i < asks.size() && i < most; ++i) {
    const common::NodeId& b = asks[i];
    // Not for this replica's own shard (its peers reduce that without its
    // word), nor for the asker's.
    if (b == self_ || b == asker || !Contains(members_, b)) continue;
    const int k = IndexOf(b);
    if (!answered_.insert({asker, k}).second) continue;
    out->push_back({asker, Message(ReduceMessage::Phase::kScatter, k)});
  }
}

void ShardedReduce::ReduceBannedShards() {
  const int r = static_cast<int>(members_.size());
  const Part& mine = gather_.at(index_);
  for (const common::NodeId& b : excluded_) {
    const int k = IndexOf(b);
    if (gather_.count(k) > 0) continue;
    if (!Shunned(k)) {
      auto owners = banned_owners_shards_.find(k);
      if (owners != banned_owners_shards_.end()) gather_[k] = owners->second;
      continue;
    }
    const std::map<common::NodeId, Part>& parts = banned_parts_[k];
    if (static_cast<int>(parts.size()) < r - 1) continue;  // all but the owner's
    const auto [begin, end] = layout_.Range(static_cast<int64_t>(own_.flat.size()), r, k);
    // The owner's part is left out (it is banned) and never read: zeros
    // stand in for it, with the visits it claimed in this replica's shard.
    const std::vector<float> none(static_cast<size_t>(end - begin), 0.0f);
    std::vector<PartInput> inputs;
    for (const common::NodeId& m : members_) {
      if (m == b) {
        inputs.push_back({b, &none, scatter_.at(b).visits, -1});
        continue;
      }
      const Part& p = parts.at(m);
      inputs.push_back({m, p.data.get(), scatter_.at(m).visits, p.norm});
    }
    std::vector<PartVerdict> verdicts;
    Part reduced;
    reduced.data =
        std::make_shared<const std::vector<float>>(RobustSum(inputs, robust_, &verdicts));
    reduced.visits = mine.visits;
    reduced.digests = mine.digests;
    reduced.bandwidths = mine.bandwidths;
    for (const PartVerdict& v : verdicts) {
      if (v.kind != PartVerdict::Kind::kBanned) banned_verdicts_.push_back(v);
    }
    gather_[k] = std::move(reduced);
  }
}

std::vector<common::NodeId> ShardedReduce::Late() const {
  std::vector<common::NodeId> late;
  if (!started() || reduced_) return late;
  for (const common::NodeId& m : members_) {
    if (m != self_ && scatter_.count(m) == 0) late.push_back(m);
  }
  return late;
}

std::vector<OutgoingReduce> ShardedReduce::CloseWithout(const std::vector<common::NodeId>& late,
                                                        ShardLayout layout) {
  std::vector<common::NodeId> rest;
  for (const common::NodeId& m : members_) {
    if (m != self_ && std::find(late.begin(), late.end(), m) != late.end()) {
      if (std::find(closed_out_.begin(), closed_out_.end(), m) == closed_out_.end()) {
        closed_out_.push_back(m);
      }
    } else {
      rest.push_back(m);
    }
  }
  std::sort(closed_out_.begin(), closed_out_.end());
  return Start(std::move(rest), std::move(layout));
}

void ShardedReduce::Count(const std::vector<OutgoingReduce>& out) { sent_bytes_ += Bytes(out); }

// Note [Encoded shards] (shard_codec.h): the reduced shard as it goes out,
// and as every member, this one included, decodes it.
void ShardedReduce::EncodeReduced(Part* reduced) {
  if (codec_.kind == model::AvgCodecKind::kFp32) return;
  const int64_t total = static_cast<int64_t>(own_.flat.size());
  const auto [begin, end] = layout_.Range(total, static_cast<int>(members_.size()), index_);
  float* residual = nullptr;
  std::vector<float> scratch;
  if (gather_residual_ != nullptr && codec_.kind == model::AvgCodecKind::kInt8) {
    if (static_cast<int64_t>(gather_residual_->size()) != total) {
      gather_residual_->assign(total, 0.0f);
    }
    // Note [Restarted rounds]: the feedback of an encoding that is not
    // used is undone; after the round's result, redoing it for peers
    // leaves the feedback alone.
    if (settled_) {
      scratch.assign(gather_residual_->begin() + begin, gather_residual_->begin() + end);
      residual = scratch.data();
    } else {
      residual_undo_begin_ = begin;
      residual_undo_.assign(gather_residual_->begin() + begin, gather_residual_->begin() + end);
      residual = gather_residual_->data() + begin;
    }
  }
  // PowerSGD sends the parts' factors, when every part came as factors and
  // none was left out or scaled (Note [Robust averaging]).
  std::vector<absl::string_view> parts;
  if (verdicts_.empty()) {
    for (const auto& [from, part] : scatter_) {
      if (part.payload == nullptr) {
        parts.clear();
        break;
      }
      parts.push_back(*part.payload);
    }
  }
  auto payload = std::make_shared<const std::string>(
      EncodeReducedShard(codec_, reduced->data->data(), end - begin, begin, residual, parts));
  absl::StatusOr<std::vector<float>> decoded =
      DecodeShard(codec_, *payload, end - begin, begin, total);
  if (!decoded.ok()) return;  // our own encoding: not expected; sent as float32
  reduced->data = std::make_shared<const std::vector<float>>(std::move(decoded).value());
  reduced->payload = std::move(payload);
}

// Note [Restarted rounds]: int8 error feedback (the owner's residual) must
// hold the error of the encodings that were applied, once each. A round
// that restarts after this member encoded its reduced shard (a death, a
// member closed out, another cut) throws that encoding away, so its
// feedback is undone here; otherwise the residual would carry an error
// nobody saw, and the next round would "correct" it.
void ShardedReduce::UndoResidual() {
  if (residual_undo_.empty() || settled_ || gather_residual_ == nullptr) return;
  if (residual_undo_begin_ + static_cast<int64_t>(residual_undo_.size()) <=
      static_cast<int64_t>(gather_residual_->size())) {
    std::copy(residual_undo_.begin(), residual_undo_.end(),
              gather_residual_->begin() + residual_undo_begin_);
  }
  residual_undo_.clear();
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
  std::set<common::NodeId> missing;
  for (int k = 0; k < static_cast<int>(members_.size()); ++k) {
    if (k == index_) continue;
    const bool part = reduced_ || scatter_.count(members_[k]) > 0;
    if (!Excluded(members_[k])) {
      if (!part || gather_.count(k) == 0) missing.insert(members_[k]);
      continue;
    }
    // Note [Banned owners]: its part of this replica's shard, and every
    // other member's part of its shard, or, unless most shun it, its own.
    if (!part) missing.insert(members_[k]);
    if (gather_.count(k) > 0) continue;
    if (reduced_ && !Shunned(k)) {
      missing.insert(members_[k]);
      continue;
    }
    auto parts = banned_parts_.find(k);
    for (const common::NodeId& m : members_) {
      if (m == members_[k]) continue;
      if (parts == banned_parts_.end() || parts->second.count(m) == 0) missing.insert(m);
    }
  }
  return {missing.begin(), missing.end()};
}

}  // namespace skipswarm::node

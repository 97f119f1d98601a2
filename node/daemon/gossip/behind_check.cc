#include "node/daemon/gossip/behind_check.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace skipswarm::node {
namespace {

struct Answers {
  std::optional<uint64_t> highest;
  bool all_answered = true;
  bool any = false;  // anyone listed
};

Answers Ask(const BehindCheck::Query& query) {
  Answers a;
  for (const absl::StatusOr<uint64_t>& it : query()) {
    a.any = true;
    if (!it.ok()) {
      a.all_answered = false;
      continue;
    }
    if (!a.highest.has_value() || *it > *a.highest) a.highest = *it;
  }
  return a;
}

}  // namespace

BehindCheck::BehindCheck(BehindCheckOptions options, common::Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

std::optional<BehindVerdict> BehindCheck::Poll(uint64_t own, const Query& replicas,
                                               const Query& data_nodes) {
  return Poll([own] { return own; }, replicas, data_nodes);
}

bool BehindCheck::DueAt(absl::Duration now) const {
  return !asked_ || now - last_ >= options_.every;
}

bool BehindCheck::DueNow() const { return DueAt(clock_->SteadyNow()); }

bool BehindCheck::Due() {
  const absl::Duration now = clock_->SteadyNow();
  if (!DueAt(now)) return false;
  asked_ = true;
  last_ = now;
  return true;
}

std::optional<BehindVerdict> BehindCheck::Poll(const std::function<uint64_t()>& own_now,
                                               const Query& replicas, const Query& data_nodes) {
  if (!Due()) return std::nullopt;
  const Answers peers = Ask(replicas);
  // Note [Own iteration after the answers]: read after each set of answers.
  uint64_t own = own_now();
  if (peers.highest.has_value() && *peers.highest > own + options_.lead) {
    unanswered_ = 0;
    return BehindVerdict{BehindVerdict::kReenter, *peers.highest};
  }
  // Note [Sole replica behind]: a replica past us (within the lead) is the
  // stage's most advanced copy; it moves ahead, we re-enter from it.
  if (peers.highest.has_value() && *peers.highest > own) {
    unanswered_ = 0;
    return std::nullopt;
  }
  const Answers data = Ask(data_nodes);
  own = own_now();
  // Two iterations ahead of us, the data nodes finished one we did not
  // serve; still so after `stuck_checks` checks at the same iteration, we
  // are stuck, not slow.
  if (data.highest.has_value() && *data.highest >= own + 2) {
    stuck_checks_ = own == stuck_at_ ? stuck_checks_ + 1 : 1;
    stuck_at_ = own;
  } else {
    stuck_checks_ = 0;
  }
  const bool far = data.highest.has_value() && *data.highest > own + options_.lead;
  // A listed replica that does not answer may be what we wait for (a
  // stalled peer holds up our reduce until the group drops it): that is
  // slow, not stuck, so only `far` counts then.
  const bool stuck = stuck_checks_ >= options_.stuck_checks && peers.all_answered;
  if (!far && !stuck) {
    unanswered_ = 0;
    return std::nullopt;
  }
  if (!peers.all_answered && ++unanswered_ < options_.confirm) return std::nullopt;
  unanswered_ = 0;
  stuck_checks_ = 0;
  return BehindVerdict{BehindVerdict::kMoveAhead, *data.highest};
}

std::optional<BehindVerdict> BehindCheck::PollMember(const std::vector<int>& stages,
                                                    const std::function<uint64_t()>& own,
                                                    const AskStage& ask,
                                                    const DroppedQuery& dropped) {
  if (stages.size() != 1) return std::nullopt;
  const int stage = stages.front();
  if (stage == 0) return PollDataNode(own, ask, dropped);
  return Poll(
      own, [&] { return ask(stage, std::numeric_limits<size_t>::max()); },
      [&] { return ask(0, kDataNodesAsked); });
}

std::optional<BehindVerdict> BehindCheck::PollStages(const std::function<uint64_t()>& own,
                                                    const Query& replicas) {
  if (!Due()) return std::nullopt;
  const Answers peers = Ask(replicas);
  // Note [Own iteration after the answers].
  const uint64_t mine = own();
  if (peers.highest.has_value() && *peers.highest > mine + options_.lead) {
    return BehindVerdict{BehindVerdict::kReenter, *peers.highest};
  }
  return std::nullopt;
}

std::optional<BehindVerdict> BehindCheck::PollDataNode(const std::function<uint64_t()>& own,
                                                      const AskStage& ask,
                                                      const DroppedQuery& dropped) {
  if (!Due()) return std::nullopt;
  // Note [Data node behind]: the other data nodes are our replicas; we are
  // the clock, so no data node is asked as one.
  const Answers others = Ask([&] { return ask(0, kDataNodesAsked); });
  // Read after the answers: iterations we finished while asking do not
  // count against us (at ten iterations a second a slow answer is several).
  const uint64_t mine = own();
  if (!others.highest.has_value() || *others.highest < mine + 2) {
    stuck_checks_ = 0;
    return SplitCheck(mine, dropped);
  }
  split_checks_ = 0;
  if (*others.highest > mine + options_.lead || ++stuck_checks_ >= options_.stuck_checks) {
    stuck_checks_ = 0;
    return BehindVerdict{BehindVerdict::kReenter, *others.highest};
  }
  return std::nullopt;
}

std::optional<BehindVerdict> BehindCheck::SplitCheck(uint64_t mine, const DroppedQuery& dropped) {
  // Note [Data nodes split]: a dropped data node within one iteration of
  // ours goes on beside us; further behind, it is stalled (its own check
  // re-enters it).
  std::optional<uint64_t> at;
  if (dropped) {
    for (uint64_t it : dropped()) {
      if (it + 1 >= mine && (!at.has_value() || it > *at)) at = it;
    }
  }
  const int needed = options_.stuck_checks << split_backoff_;
  if (!at.has_value()) {
    split_checks_ = 0;
    if (split_backoff_ > 0 && ++calm_checks_ >= (options_.stuck_checks << kSplitBackoffMax)) {
      --split_backoff_;
      calm_checks_ = 0;
    }
    return std::nullopt;
  }
  calm_checks_ = 0;
  if (++split_checks_ < needed) return std::nullopt;
  split_checks_ = 0;
  split_backoff_ = std::min(split_backoff_ + 1, kSplitBackoffMax);
  return BehindVerdict{BehindVerdict::kReenter, *at, /*split=*/true};
}

}  // namespace skipswarm::node

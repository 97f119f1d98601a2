#include "node/train/inproc_group.h"

#include <glog/logging.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

InProcessGroupHub::InProcessGroupHub(common::Clock* clock, std::vector<PeerInfo> members,
                                     RobustOptions robust, SilentDeadlineOptions silent,
                                     StatedPaceOptions pace)
    : clock_(clock),
      members_(std::move(members)),
      robust_(robust),
      silent_(silent),
      pace_(pace) {}

InProcessGroupHub::~InProcessGroupHub() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, r] : reduces_) {
    if (r.silent_timer != common::kNoTimer) clock_->Cancel(r.silent_timer);
  }
  for (auto& [iteration, b] : barriers_) {
    if (b.silent_timer != common::kNoTimer) clock_->Cancel(b.silent_timer);
  }
}

bool InProcessGroupHub::AwayLocked(const common::NodeId& id, uint64_t iteration) const {
  auto away = away_.find(id);
  return away != away_.end() && away->second.first <= iteration && iteration < away->second.second;
}

std::vector<common::NodeId> InProcessGroupHub::LiveHostsLocked(int stage,
                                                               uint64_t iteration) const {
  std::vector<common::NodeId> out;
  for (const PeerInfo& p : members_) {
    if (dead_.contains(p.id)) continue;
    auto back = back_from_.find(p.id);
    if (back != back_from_.end() && back->second > iteration) continue;
    if (AwayLocked(p.id, iteration)) continue;
    if (std::find(p.stages.begin(), p.stages.end(), stage) != p.stages.end()) out.push_back(p.id);
  }
  return out;
}

bool InProcessGroupHub::HasLiveDataNodeLocked() const {
  for (const PeerInfo& p : members_) {
    if (dead_.contains(p.id)) continue;
    if (std::find(p.stages.begin(), p.stages.end(), 0) != p.stages.end()) return true;
  }
  return false;
}

bool InProcessGroupHub::OnProbation(const common::NodeId& id) {
  absl::MutexLock lock(&mu_);
  for (const PeerInfo& p : members_) {
    if (p.id == id) return p.on_probation;
  }
  return false;
}

bool InProcessGroupHub::HasLiveDataNode(uint64_t iteration) {
  absl::MutexLock lock(&mu_);
  return HasLiveDataNodeLocked();
}

// Armed under mu_, then the live set asked: a data node that arrives or is
// admitted later takes mu_ after this and finds the wake armed.
uint64_t InProcessGroupHub::WakeOnDataNode(absl::AnyInvocable<void()> wake) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = data_node_wakes_.Add(std::move(wake));
  if (HasLiveDataNodeLocked()) data_node_wakes_.WakeAll(clock_);
  return id;
}

bool InProcessGroupHub::CancelDataNodeWake(uint64_t id) { return data_node_wakes_.Cancel(id); }

void InProcessGroupHub::Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
                                BarrierDone done) {
  std::vector<absl::AnyInvocable<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    // Note [Waking on a data node]: a live data node's arrival.
    if (data_node && !dead_.contains(self)) data_node_wakes_.WakeAll(clock_);
    if (data_node) {
      // Note [Stated bounds]: a dropped data node is back; it counts from
      // the iteration after the newest barrier (those up to it may be over).
      auto away = away_.find(self);
      if (away != away_.end() && away->second.second == UINT64_MAX) {
        const uint64_t newest =
            barriers_.empty() ? iteration : std::max(iteration, barriers_.rbegin()->first);
        away->second.second = newest + 1;
        LOG(INFO) << self.ShortString() << " reached the barrier of iteration " << iteration
                  << " after it was dropped; it counts again from iteration " << newest + 1
                  << " (Note [Stated bounds])";
      }
      // Note [Stated pace]: the span since its last release ends here.
      auto s = stated_.find(self);
      if (s != stated_.end()) s->second.pace.Arrived(clock_->SteadyNow());
    }
    if (barriers_.count(iteration) == 0 && last_complete_barrier_.has_value() &&
        iteration <= *last_complete_barrier_) {
      // Long over and forgotten (a dropped data node catching up): pass.
      if (data_node) ReleaseStatedLocked(self, iteration);
      calls.push_back([done = std::move(done)]() mutable { done(absl::OkStatus()); });
    } else {
      BarrierState& b = barriers_[iteration];
      if (data_node) b.arrived.insert(self);
      if (data_node && !b.since.has_value()) {
        b.since = clock_->SteadyNow();
        if (silent_.enabled()) ArmBarrierLocked(iteration, b, silent_.Get());
      }
      b.waiters.push_back(std::move(done));
      const Round round{true, iteration, 0};
      calls = SweepLocked(&round);
    }
  }
  Deliver(std::move(calls));
}

void InProcessGroupHub::StateIterationBound(uint64_t iteration, const common::NodeId& self,
                                            absl::Duration bound) {
  absl::MutexLock lock(&mu_);
  stated_[self].pending = std::make_pair(iteration, bound);
}

void InProcessGroupHub::ReleaseStatedLocked(const common::NodeId& id, uint64_t iteration) {
  auto s = stated_.find(id);
  if (s == stated_.end() || !s->second.pending.has_value() ||
      s->second.pending->first != iteration) {
    return;
  }
  const absl::Duration now = clock_->SteadyNow();
  s->second.bound = s->second.pace.Limit(s->second.pending->second, pace_);
  s->second.pace.Released(s->second.bound, now);
  s->second.released = now;
  s->second.pending.reset();
}

void InProcessGroupHub::ArmBarrierLocked(uint64_t iteration, BarrierState& b,
                                         absl::Duration after) {
  if (b.silent_timer != common::kNoTimer) clock_->Cancel(b.silent_timer);
  b.silent_timer =
      clock_->RunAfter(after, [this, iteration] { DropSilentDataNodes(iteration); });
}

void InProcessGroupHub::DropSilentDataNodes(uint64_t iteration) {
  std::vector<absl::AnyInvocable<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    auto it = barriers_.find(iteration);
    if (it == barriers_.end()) return;
    BarrierState& b = it->second;
    b.silent_timer = common::kNoTimer;
    if (b.complete || !b.since.has_value()) return;
    const absl::Duration now = clock_->SteadyNow();
    const absl::Duration measured = *b.since + silent_.Get();
    std::vector<common::NodeId> drop;
    absl::Duration next = absl::InfiniteDuration();
    for (const common::NodeId& d : LiveHostsLocked(0, iteration)) {
      if (b.arrived.contains(d)) continue;
      // Never released with a stated bound: never dropped (the harness's
      // MarkDead is the hub's failure detector).
      auto s = stated_.find(d);
      std::optional<StatedBound> stated;
      if (s != stated_.end() && s->second.released.has_value()) {
        stated = StatedBound{s->second.bound, *s->second.released};
      }
      const absl::Duration due = StatedDropTime(measured, stated, absl::InfiniteDuration());
      if (due == absl::InfiniteDuration()) continue;
      if (now >= due) {
        drop.push_back(d);
      } else {
        next = std::min(next, due);
      }
    }
    if (next != absl::InfiniteDuration()) ArmBarrierLocked(iteration, b, next - now);
    if (drop.empty()) return;
    b.sampled = true;  // it lasted the deadline: no sample
    for (const common::NodeId& d : drop) {
      away_[d] = {iteration, UINT64_MAX};
      stated_[d].pace.Forget();  // Note [Stated pace]
      LOG(WARNING) << "iteration " << iteration << ": the barrier waited " << (now - *b.since)
                   << " for data node " << d.ShortString() << ", past the measured deadline and "
                   << kStatedBoundFactor << " x its stated bound (" << stated_[d].bound
                   << "); dropping it until it arrives (Note [Stated bounds])";
    }
    calls = SweepLocked();
  }
  Deliver(std::move(calls));
}

void InProcessGroupHub::AllReduce(uint64_t iteration, int stage,
                                  GradientContribution contribution, ReduceDone done) {
  std::vector<absl::AnyInvocable<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    if (reduces_.count({iteration, stage}) == 0 && AwayLocked(contribution.from, iteration)) {
      // Note [Stated bounds]: a dropped data node's round that the others
      // did not hold (yet: a group of one, or not started) or long forgot:
      // its update is not applied (as a round every replica lost), and it
      // never opens a round the others would then be dropped from; the
      // digest check re-syncs it once it counts again.
      calls.push_back([done = std::move(done), iteration, stage]() mutable {
        done(absl::UnavailableError(absl::StrCat(
            "iteration ", iteration, " stage ", stage,
            ": this data node was dropped from the iteration's barrier; its update is not "
            "applied (Note [Stated bounds])")));
      });
      return Deliver(std::move(calls));
    }
    ReduceState& r = reduces_[{iteration, stage}];
    if (r.closed != nullptr) {
      // Note [Late members]: closed without us; the others' average.
      absl::StatusOr<ReduceResult> result = *r.closed;
      if (result.ok()) result->late = true;
      calls.push_back([done = std::move(done), result = std::move(result)]() mutable {
        done(std::move(result));
      });
    } else {
      const common::NodeId from = contribution.from;
      const absl::Duration close_after = contribution.close_after;
      if (!r.since.has_value()) {
        // Note [Silent members in the hub]: the wait starts here.
        r.since = clock_->SteadyNow();
        if (silent_.enabled()) {
          r.silent_timer = clock_->RunAfter(
              silent_.Get(), [this, iteration, stage] { DropSilent(iteration, stage); });
        }
      }
      r.contributions[from] = std::move(contribution);
      r.waiters.push_back(std::move(done));
      if (close_after != absl::InfiniteDuration() && !r.deadline_armed) {
        r.deadline_armed = true;
        clock_->RunAfter(close_after, [this, iteration, stage] { CloseLate(iteration, stage); });
      }
      const Round round{false, iteration, stage};
      calls = SweepLocked(&round);
    }
  }
  Deliver(std::move(calls));
}

bool InProcessGroupHub::SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) {
  absl::MutexLock lock(&mu_);
  auto round = reduces_.find({iteration, stage});
  if (round != reduces_.end() &&
      (!round->second.contributions.empty() || round->second.closed != nullptr)) {
    return false;
  }
  const std::vector<common::NodeId> hosts = LiveHostsLocked(stage, iteration);
  return hosts.size() == 1 && hosts[0] == self;
}

void InProcessGroupHub::CloseLate(uint64_t iteration, int stage) {
  std::vector<absl::AnyInvocable<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    auto it = reduces_.find({iteration, stage});
    if (it == reduces_.end() || it->second.waiters.empty()) return;  // complete already
    it->second.deadline_passed = true;
    const Round round{false, iteration, stage};
    calls = SweepLocked(&round);
  }
  Deliver(std::move(calls));
}

void InProcessGroupHub::DropSilent(uint64_t iteration, int stage) {
  std::vector<absl::AnyInvocable<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    auto it = reduces_.find({iteration, stage});
    if (it == reduces_.end() || it->second.waiters.empty()) return;  // complete already
    ReduceState& r = it->second;
    std::vector<common::NodeId> silent;
    for (const common::NodeId& h : LiveHostsLocked(stage, iteration)) {
      if (r.contributions.count(h) == 0) silent.push_back(h);
    }
    if (silent.empty()) return;
    r.silent_timer = common::kNoTimer;
    r.sampled = true;  // it lasted the deadline: no sample
    for (const common::NodeId& m : silent) {
      dead_.insert(m);
      LOG(WARNING) << "iteration " << iteration << " stage " << stage << ": the averaging waited "
                   << (clock_->SteadyNow() - *r.since) << " for " << m.ShortString()
                   << ", which sent nothing; dropping it (Note [Silent members in the hub])";
    }
    calls = SweepLocked();
  }
  Deliver(std::move(calls));
}

void InProcessGroupHub::MarkDead(const common::NodeId& id) {
  std::vector<absl::AnyInvocable<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    if (!dead_.insert(id).second) return;
    calls = SweepLocked();
  }
  Deliver(std::move(calls));
}

void InProcessGroupHub::Admit(const PeerInfo& member, uint64_t from_iteration) {
  absl::MutexLock lock(&mu_);
  auto it = std::find_if(members_.begin(), members_.end(),
                         [&](const PeerInfo& p) { return p.id == member.id; });
  if (it == members_.end()) {
    members_.push_back(member);
  } else {
    *it = member;
  }
  dead_.erase(member.id);
  back_from_[member.id] = from_iteration;
  if (HasLiveDataNodeLocked()) data_node_wakes_.WakeAll(clock_);  // Note [Waking on a data node]
}

std::vector<absl::AnyInvocable<void()>> InProcessGroupHub::SweepLocked(const Round* only) {
  std::vector<absl::AnyInvocable<void()>> calls;
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (only != nullptr && (!only->barrier || it->first != only->iteration)) {
      ++it;
      continue;
    }
    BarrierState& b = it->second;
    // Once complete it stays so (Note [Stated bounds]: a dropped data node
    // that counts again must not reopen a barrier the others passed).
    bool complete = b.complete;
    if (!complete) {
      const std::vector<common::NodeId> data_nodes = LiveHostsLocked(0, it->first);
      complete = std::all_of(data_nodes.begin(), data_nodes.end(),
                             [&](const common::NodeId& d) { return b.arrived.contains(d); });
    }
    if (!complete) {
      ++it;
      continue;
    }
    if (b.since.has_value() && !b.sampled) {  // Note [Silent members in the hub]
      silent_.Record(clock_->SteadyNow() - *b.since);
      b.sampled = true;
    }
    if (!b.complete) {
      b.complete = true;
      if (b.silent_timer != common::kNoTimer) clock_->Cancel(b.silent_timer);
      b.silent_timer = common::kNoTimer;
      last_complete_barrier_ = std::max(last_complete_barrier_.value_or(it->first), it->first);
    }
    // Note [Stated bounds]: the arrivals' bounds count from their release.
    for (const common::NodeId& d : b.arrived) ReleaseStatedLocked(d, it->first);
    for (BarrierDone& w : b.waiters) {
      calls.push_back([w = std::move(w)]() mutable { w(absl::OkStatus()); });
    }
    b.waiters.clear();
    // Keep the entry while live nodes may still arrive late; they then pass at once.
    ++it;
  }
  for (auto it = reduces_.begin(); it != reduces_.end();) {
    if (only != nullptr && (only->barrier || it->first != std::make_pair(only->iteration,
                                                                         only->stage))) {
      ++it;
      continue;
    }
    ReduceState& r = it->second;
    const std::vector<common::NodeId> hosts = LiveHostsLocked(it->first.second, it->first.first);
    std::vector<common::NodeId> late;
    for (const common::NodeId& h : hosts) {
      if (r.contributions.count(h) == 0) late.push_back(h);
    }
    if ((!late.empty() && !r.deadline_passed) || r.waiters.empty()) {
      ++it;
      continue;
    }
    ReduceResult sum;
    absl::Status error;
    uint64_t digest = 0;
    std::vector<PartInput> parts;
    for (const auto& [id, c] : r.contributions) {
      // Died after contributing, or dropped from this round's barrier.
      if (dead_.contains(id) || AwayLocked(id, it->first.first)) continue;
      if (parts.empty()) {
        digest = c.params_digest;
      } else if (c.flat.size() != parts.front().data->size()) {
        error = absl::InvalidArgumentError(absl::StrCat("replica ", id.ShortString(), " sent ",
                                                        c.flat.size(), " elements, expected ",
                                                        parts.front().data->size()));
        break;
      } else if (c.params_digest != digest) {
        sum.digests_agree = false;
      }
      parts.push_back({id, &c.flat, c.visits, -1});
      sum.visits += c.visits;
      sum.digests.emplace_back(id, c.params_digest);
      ++sum.contributors;
    }
    // Note [Robust averaging]: whole contributions, in ascending id order.
    if (error.ok() && !parts.empty()) {
      RobustOptions robust = robust_;
      for (const PeerInfo& m : members_) {  // Note [Robust averaging across subnetworks]
        if (m.subnetwork) robust.subnetworks[m.id] = m.stages;
      }
      robust.across_classes = it->first.second != 0;  // not the data stage
      sum.sum = RobustSum(parts, robust, &sum.refused_parts);
    }
    sum.left_out = late;
    auto result = std::make_shared<absl::StatusOr<ReduceResult>>(std::move(sum));
    if (!error.ok()) *result = error;
    // Note [Stated bounds]: a data node dropped from this round's barrier
    // gets its result later, as a late member does.
    bool excused = false;
    for (const PeerInfo& m : members_) {
      excused = excused || (AwayLocked(m.id, it->first.first) &&
                            std::find(m.stages.begin(), m.stages.end(), it->first.second) !=
                                m.stages.end());
    }
    if (!late.empty() || excused) r.closed = result;
    // Note [Silent members in the hub]: the first completion is the sample;
    // the deadline's timer has nothing left to do.
    if (r.since.has_value() && !r.sampled) {
      silent_.Record(clock_->SteadyNow() - *r.since);
      r.sampled = true;
    }
    if (r.silent_timer != common::kNoTimer) {
      clock_->Cancel(r.silent_timer);
      r.silent_timer = common::kNoTimer;
    }
    for (ReduceDone& w : r.waiters) {
      calls.push_back([w = std::move(w), result]() mutable { w(*result); });
    }
    r.waiters.clear();
    ++it;
  }
  // Forget rounds that are long over (keep a few for late arrivals).
  while (barriers_.size() > 4) {
    if (barriers_.begin()->second.silent_timer != common::kNoTimer) {
      clock_->Cancel(barriers_.begin()->second.silent_timer);
    }
    barriers_.erase(barriers_.begin());
  }
  while (reduces_.size() > 64) {
    if (reduces_.begin()->second.silent_timer != common::kNoTimer) {
      clock_->Cancel(reduces_.begin()->second.silent_timer);
    }
    reduces_.erase(reduces_.begin());
  }
  return calls;
}

void InProcessGroupHub::SetStateProvider(const common::NodeId& self, StateProvider provider) {
  absl::MutexLock lock(&mu_);
  providers_[self] = std::move(provider);
}

void InProcessGroupHub::FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                                   StateDone done) {
  TryFetch(iteration, stage, from, std::make_shared<StateDone>(std::move(done)), 0);
}

void InProcessGroupHub::TryFetch(uint64_t iteration, int stage, common::NodeId from,
                                 std::shared_ptr<StateDone> done, int attempt) {
  constexpr int kMaxAttempts = 500;
  const absl::Duration wait = attempt == 0 ? absl::ZeroDuration() : absl::Milliseconds(10);
  clock_->RunAfter(wait, [this, iteration, stage, from, done, attempt] {
    StateProvider provider;
    bool dead;
    {
      absl::MutexLock lock(&mu_);
      dead = dead_.contains(from);
      auto it = providers_.find(from);
      if (it != providers_.end()) provider = it->second;
    }
    absl::StatusOr<std::string> state =
        dead || !provider ? absl::UnavailableError(absl::StrCat(from.ShortString(), " is gone"))
                          : provider(stage, iteration);
    if (absl::IsUnavailable(state.status()) && !dead && attempt + 1 < kMaxAttempts) {
      return TryFetch(iteration, stage, from, done, attempt + 1);
    }
    (*done)(std::move(state));
  });
}

void InProcessGroupHub::Deliver(std::vector<absl::AnyInvocable<void()>> calls) {
  for (auto& call : calls) clock_->RunAfter(absl::ZeroDuration(), std::move(call));
}

}  // namespace skipswarm::node

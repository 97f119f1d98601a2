// Completing barriers and reduces (Sweep), Note [Silent members] and Note
// [Group liveness]: probes of awaited members, and AwaitPeers at startup.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/real_clock.h"
#include "node/train/grpc_group_impl.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {

// Note [Group bans] (grpc_group.h): the ban takes effect from the rounds
// this node starts after it (AllReduce hands the banned to RobustSum).
void GrpcGroupComm::Impl::CountOffencesLocked(uint64_t iteration, int stage,
                                              ReduceResult* result) {
  std::map<common::NodeId, std::string> last;
  for (const PartVerdict& v : result->refused_parts) {
    if (v.kind == PartVerdict::Kind::kNonFinite || v.kind == PartVerdict::Kind::kOutlier) {
      last[v.from] = DescribeVerdict(v);
    }
  }
  const std::vector<common::NodeId> reached = offences_.Record(
      iteration, stage, OffenceTally::Offenders(result->refused_parts, options_.self));
  for (const common::NodeId& from : reached) {
    const std::string reason =
        absl::StrCat("its gradient part was refused in ", offences_.Run(stage, from),
                     " rounds of stage ", stage, " in a row, decayed count ",
                     offences_.Score(stage, from), " (last, iteration ", iteration,
                     ": ", last[from], ")");
    {
      absl::MutexLock lock(&bans_mu_);
      if (!banned_.emplace(from, reason).second) continue;
    }
    LOG(WARNING) << "banning " << from.ShortString() << " from the replica group: " << reason;
  }
}

void GrpcGroupComm::Impl::Sweep() {
  std::vector<absl::AnyInvocable<void()>> calls;
  std::vector<OutgoingReduce> out;
  bool recheck = false;
  int waiting = 0;
  std::set<common::NodeId> silent;  // Note [Silent members]
  std::string silent_where;
  bool knows_data_node = false;
  // Note [Entering members] (grpc_group.h): asked outside mu_, as AllReduce
  // asks the view.
  std::set<common::NodeId> entering;
  for (const PeerInfo& p : view_->Members()) {
    if (p.entering && p.id != options_.self) entering.insert(p.id);
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    const absl::Duration now = clock_->SteadyNow();
    const absl::Duration deadline = silent_.Get();
    std::set<common::NodeId>& missing = this->missing;
    const std::vector<common::NodeId> data_nodes = view_->Replicas(0);
    knows_data_node = !data_nodes.empty();
    missing.clear();
    for (auto it = barrier_waiters_.begin(); it != barrier_waiters_.end();) {
      const auto& arrived = arrived_[it->first];
      bool complete = true;
      for (const common::NodeId& d : data_nodes) {
        if (!arrived.count(d)) {
          complete = false;
          missing.insert(d);
        }
      }
      if (!complete) {
        const absl::Duration since =
            barrier_since_.count(it->first) > 0 ? barrier_since_[it->first] : now;
        bool any_arrived = false;
        for (const common::NodeId& d : data_nodes) any_arrived |= arrived.count(d) > 0;
        if (any_arrived) {
          // Note [Stated bounds in the daemons]: each one past both rules.
          bool dropped = false;
          for (const common::NodeId& d : data_nodes) {
            if (!arrived.count(d) && d != options_.self &&
                now > DropTimeLocked(d, since + deadline)) {
              silent.insert(d);
              stated_.erase(d);
              dropped = true;
            }
          }
          if (dropped) {
            silenced_barriers_.insert(it->first);
            silent_where = absl::StrCat("barrier of iteration ", it->first,
                                        " (past 2 x their stated bounds too, if any)");
          }
        }
        ++it;
        continue;
      }
      passed_barrier_ = std::max(passed_barrier_.value_or(it->first), it->first);
      // Note [Stated bounds in the daemons]: the statements that rode this
      // barrier count from its release here.
      for (auto& [d, s] : stated_) {
        if (s.pending.has_value() && s.pending->first <= it->first) {
          s.released = StatedBound{s.pace.Limit(s.pending->second, options_.stated_pace), now};
          s.pace.Released(s.released->bound, now);
          s.pending.reset();
        }
      }
      if (barrier_since_.count(it->first) > 0) {
        if (silenced_barriers_.erase(it->first) == 0) {
          silent_.Record(now - barrier_since_[it->first]);
        }
        barrier_since_.erase(it->first);
      }
      for (BarrierDone& w : it->second) {
        calls.push_back([w = std::move(w)]() mutable { w(absl::OkStatus()); });
      }
      it = barrier_waiters_.erase(it);
    }
    uint64_t newest = 0;
    for (auto& [key, pending] : reduces_) {
      newest = std::max(newest, key.first);
      ShardedReduce& r = *pending.reduce;
      if (pending.delivered) {
        // Note [Gradient exchange]: peers redoing a round we finished (they
        // saw a death after our round completed) get our part again.
        if (std::optional<std::vector<common::NodeId>> round = r.SmallerRoundWaiting()) {
          std::vector<OutgoingReduce> more = r.Start(*round, LayoutFor(key.second, *round));
          out.insert(out.end(), std::make_move_iterator(more.begin()),
                     std::make_move_iterator(more.end()));
        }
        continue;
      }
      std::vector<common::NodeId> live = LiveMembers(key.second);
      // Note [Late members]: members closed out stay out of this round.
      for (const common::NodeId& m : r.closed_out()) {
        live.erase(std::remove(live.begin(), live.end(), m), live.end());
      }
      const bool late_result = r.done() && r.result().ok() && r.result()->late;
      if (live != r.members() && !late_result) {
        LOG(WARNING) << "iteration " << key.first << " stage " << key.second
                     << ": replica group now " << live.size() << " (was " << r.members().size()
                     << "); averaging again without the lost";
        std::vector<OutgoingReduce> more = r.Start(live, LayoutFor(key.second, live));
        out.insert(out.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
        pending.round_since = now;
      }
      // Note [Late members]: the round goes on without `who`, who get the
      // result; the entering and the late close-outs below both use it.
      // (Structured bindings cannot be captured in C++17: named here.)
      const int stage = key.second;
      absl::Duration& round_since = pending.round_since;
      auto close_out = [&](const std::vector<common::NodeId>& who)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        std::vector<common::NodeId> rest;
        for (const common::NodeId& m : r.members()) {
          if (std::find(who.begin(), who.end(), m) == who.end()) rest.push_back(m);
        }
        std::vector<OutgoingReduce> more = r.CloseWithout(who, LayoutFor(stage, rest));
        out.insert(out.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
        round_since = now;
      };
      if (!r.done() && !entering.empty() && now - pending.since >= options_.entering_grace) {
        // Note [Entering members]: not waited for; they get the result.
        std::vector<common::NodeId> closing;
        for (const common::NodeId& m : r.Late()) {
          if (entering.count(m) > 0) closing.push_back(m);
        }
        if (!closing.empty()) {
          LOG(INFO) << "iteration " << key.first << " stage " << key.second << ": "
                    << closing.size()
                    << " member(s) still loading their state at their entry; averaging "
                       "without them, they get the result";
          close_out(closing);
        }
      }
      if (!r.done() && pending.close_after != absl::InfiniteDuration()) {
        // Note [Late members]: a peer's smaller round, or our deadline.
        std::vector<common::NodeId> late;
        if (std::optional<std::vector<common::NodeId>> round = r.SmallerRoundWaiting()) {
          for (const common::NodeId& m : r.members()) {
            if (!std::binary_search(round->begin(), round->end(), m)) late.push_back(m);
          }
        } else if (now - pending.round_since > pending.close_after) {
          late = r.Late();
        }
        if (!late.empty()) {
          LOG(WARNING) << "iteration " << key.first << " stage " << key.second << ": "
                       << late.size() << " member(s) late after " << (now - pending.round_since)
                       << " (deadline " << pending.close_after
                       << "); averaging without them, they get the result";
          close_out(late);
        }
      }
      if (!r.done()) {
        for (const common::NodeId& m : r.Missing()) missing.insert(m);
        if (now - pending.since > deadline) {
          for (const common::NodeId& m : r.Missing()) {
            if (m != options_.self) silent.insert(m);
          }
          pending.silenced = true;
          silent_where = absl::StrCat("averaging of iteration ", key.first, " stage ", key.second);
        }
        ++waiting;
        continue;
      }
      if (!pending.silenced) silent_.Record(now - pending.since);
      auto result = std::make_shared<absl::StatusOr<ReduceResult>>(r.result());
      if (result->ok()) {
        (*result)->sent_bytes = r.sent_bytes();  // Note [Encoded shards]
        CountOffencesLocked(key.first, key.second, &**result);
        // The next round's inputs (Note [Shard layout]).
        std::map<common::NodeId, uint64_t>& figures = figures_[key.second];
        figures.clear();
        for (const auto& [id, b] : (*result)->bandwidths) figures[id] = b;
        if ((*result)->layout_adopted) {
          LOG(WARNING) << "iteration " << key.first << " stage " << key.second
                       << ": this replica's shard layout differed from the round's first "
                          "member's; averaged on that one";
        }
      }
      // One waiter (the usual case) takes the result itself: a copy of
      // the averaged vector less per round. The round keeps its own for a
      // later AllReduce of the same key.
      const bool alone = pending.waiters.size() == 1;
      for (ReduceDone& w : pending.waiters) {
        calls.push_back([w = std::move(w), result, alone]() mutable {
          if (alone) return w(std::move(*result));
          w(*result);
        });
      }
      pending.waiters.clear();
      pending.delivered = true;
    }
    // Finished rounds stay a few iterations for peers that redo them.
    while (!reduces_.empty() && reduces_.begin()->first.first + options_.keep_iterations < newest) {
      reduces_.erase(reduces_.begin());
    }
    recheck = !barrier_waiters_.empty() || waiting > 0;
    // Forget messages of rounds long over.
    while (arrived_.size() > 8) arrived_.erase(arrived_.begin());
    while (barrier_since_.size() > 8) barrier_since_.erase(barrier_since_.begin());
    while (silenced_barriers_.size() > 8) silenced_barriers_.erase(silenced_barriers_.begin());
    if (!silent.empty()) {
      LOG(WARNING) << "the " << silent_where << " waited more than " << deadline << " for "
                   << silent.size()
                   << " member(s) that answer probes but sent nothing; dropping them";
    }
    if (recheck && recheck_armed_) recheck = false;
    if (recheck) recheck_armed_ = true;
  }
  Send(std::move(out));
  for (auto& call : calls) clock_->RunAfter(absl::ZeroDuration(), std::move(call));
  if (knows_data_node) data_node_wakes_.WakeAll(clock_);  // Note [Waking on a data node]
  if (!silent.empty()) {
    for (const common::NodeId& m : silent) view_->MarkDead(m);
    std::weak_ptr<Impl> weak = weak_from_this();
    clock_->RunAfter(absl::ZeroDuration(), [weak] {
      if (auto self = weak.lock()) self->Sweep();
    });
  }
  if (recheck) {
    std::weak_ptr<Impl> weak = weak_from_this();
    clock_->RunAfter(options_.recheck, [weak] {
      if (auto self = weak.lock()) {
        std::set<common::NodeId> probe;
        {
          absl::MutexLock lock(&self->mu_);
          self->recheck_armed_ = false;
          probe = self->missing;
        }
        self->ProbeMissing(probe);
        self->Sweep();
      }
    });
  }
}

// Note [Silent members]: a member that answers its probes but never sends
// its barrier or gradients would stall every replica forever. A barrier
// that at least one data node reached, or a reduce, that waits longer
// than SilentDeadline drops the members it still waits for (MarkDead
// through the group view: out of this round, which is then averaged
// without them; they re-sign or re-sync to come back). A barrier no data
// node reached is left waiting: the data nodes are paused (Note [Paused
// training] in data_node_driver.h), and relays must not spin through
// empty iterations. The deadline follows measured waits (SilentDeadline,
// silent_deadline.h: factor x the slowest recent completed barrier or
// reduce, never under the floor nor above max(initial, floor): Note
// [Silent ceiling]). A wait that ended by dropping a silent
// member is not a sample: counting it multiplied the deadline by the
// factor at every drop (30 s, then 2 min, then 8...).

// Note [Stated bounds in the daemons]: the measured rule alone dropped a
// LIVE data node whose micro-batches legitimately ran to their deadline in
// two waves (Note [Stated bounds] in inproc_group.h); it lost that
// iteration's work and had to re-enter (Note [Data node behind] in
// node/daemon/gossip/behind_check.h). So, as in the hub, each data node
// states an upper bound of its next iteration (GroupComm::
// StateIterationBound), and that statement rides its barrier message
// (GradientChunk.stated_bound_ms); every member counts it from when its
// own barrier of that iteration completes (at once when it is past that
// barrier already). A barrier drops a data node that has not arrived only
// once both the measured deadline (from the barrier's first arrival) and
// kStatedBoundFactor x its last statement have passed (StatedDropTime,
// silent_deadline.h: the hub's rule, one helper). Unlike the hub, a data
// node that never stated (a peer of an older version, a joiner before its
// first barrier) keeps the measured rule: the hub's harness marks the dead
// for it, but here the silent rule is the only one that catches a process
// that answers probes and sends nothing, and "never stated" must not mean
// "waited for forever". A statement is a peer's word, so it is capped at
// GrpcGroupOptions::max_stated_bound (a hung data node holds its stage at
// most 2 x that; the daemons set it to the largest an honest data node of
// their swarm states, MaxHonestIterationBound in silent_deadline.h), and
// it never keeps a dead member in: it only defers the
// silent rule; a member that fails its probes (Note [Group liveness]) or a
// push is marked dead as before, whatever it stated. Below the cap, a
// statement counts at most what the data node's own recent pace allows
// (Note [Stated pace] in silent_deadline.h, GrpcGroupOptions::stated_pace:
// the hub's rule too), so one that ran fast and then states the cap and
// hangs is dropped after minutes, not 2 x the cap. A data node dropped
// for silence loses its statement and its pace; it re-enters as before
// and states again.
absl::Duration GrpcGroupComm::Impl::DropTimeLocked(const common::NodeId& d,
                                                   absl::Duration measured) const {
  auto s = stated_.find(d);
  const std::optional<StatedBound> stated =
      s != stated_.end() ? s->second.released : std::nullopt;
  return StatedDropTime(measured, stated, /*unstated=*/measured);
}

// Note [Group liveness]: replicas of a stage need not share a pipeline
// stream, so the transport may never tell one that another died. While a
// barrier or reduce waits for a member, the member's StageService is
// probed (Health, short deadline) every probe_interval; a member that does
// not answer probe_failures times in a row is marked dead and the round
// finishes without it (a dead process refuses connections, so that takes
// about probe_failures x probe_interval; failed pushes mark it at once).
void GrpcGroupComm::Impl::ProbeMissing(const std::set<common::NodeId>& members) {
  const absl::Duration now = clock_->SteadyNow();
  for (const common::NodeId& m : members) {
    {
      absl::MutexLock lock(&mu_);
      auto it = probed_.find(m);
      if (it != probed_.end() && now - it->second < options_.probe_interval) continue;
      probed_[m] = now;
    }
    std::string address;
    for (const PeerInfo& p : view_->Members()) {
      if (p.id == m) address = p.group_address;
    }
    std::weak_ptr<Impl> weak = weak_from_this();
    PostFor(m, [weak, m, address] {
      auto self = weak.lock();
      if (!self) return;
      auto stub = proto::StageService::NewStub(self->ProbeChannel(address, m));
      grpc::ClientContext context;
      context.set_deadline(common::SystemDeadlineAfter(self->options_.probe_timeout));
      proto::HealthRequest request;
      request.set_protocol_version(proto::kProtocolVersion);
      proto::HealthResponse response;
      grpc::Status s = stub->Health(&context, request, &response);
      int failures = 0;
      {
        absl::MutexLock lock(&self->mu_);
        failures = s.ok() ? 0 : self->probe_failures_[m] + 1;
        self->probe_failures_[m] = failures;
      }
      if (failures >= self->options_.probe_failures) {
        LOG(WARNING) << "member " << m << " (" << address << ") did not answer " << failures
                     << " probes; dropping it from the group: " << s.error_message();
        self->view_->MarkDead(m);
        self->Sweep();
      } else if (!s.ok()) {
        LOG(WARNING) << "member " << m << " (" << address << ") did not answer a probe ("
                     << failures << "/" << self->options_.probe_failures
                     << "): " << s.error_message();
      }
    });
  }
}

// A fresh channel for one Health call to member `to`.
std::shared_ptr<grpc::Channel> GrpcGroupComm::Impl::ProbeChannel(const std::string& address,
                                                                 const common::NodeId& to) const {
  grpc::ChannelArguments args;
  creds().ConfigureChannel(args);
  return grpc::CreateCustomChannel(address, creds().ForChannel(to), args);
}

absl::Status GrpcGroupComm::AwaitPeers(absl::Duration timeout,
                                       const std::function<bool()>& cancelled) {
  const absl::Duration end = impl_->clock_->SteadyNow() + timeout;
  std::vector<std::string> missing;
  for (const PeerInfo& p : impl_->view_->Members()) {
    if (p.id == impl_->options_.self) continue;
    auto stub = proto::StageService::NewStub(impl_->ProbeChannel(p.group_address, p.id));
    proto::HealthRequest request;
    request.set_protocol_version(proto::kProtocolVersion);
    proto::HealthResponse response;
    grpc::Status s;
    // Short waits in a loop, so a stop is seen within ~200 ms.
    while (true) {
      if (cancelled && cancelled()) {
        return absl::CancelledError("stopped while waiting for the swarm's peers to answer");
      }
      const absl::Duration left = end - impl_->clock_->SteadyNow();
      grpc::ClientContext context;
      context.set_deadline(common::SystemDeadlineAfter(
          std::max(absl::ZeroDuration(), std::min(left, absl::Milliseconds(200)))));
      context.set_wait_for_ready(true);
      s = stub->Health(&context, request, &response);
      if (s.ok() || s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
          left <= absl::Milliseconds(200)) {
        break;
      }
    }
    if (!s.ok()) {
      // wait_for_ready hides why the channel never became ready (a refused
      // TLS handshake: the wrong node's certificate, or no TLS there); one
      // immediate call says it.
      grpc::ClientContext again;
      again.set_deadline(common::SystemDeadlineAfter(absl::Seconds(1)));
      grpc::Status why = stub->Health(&again, request, &response);
      if (!why.ok()) s = why;
    }
    if (!s.ok()) {
      missing.push_back(
          absl::StrCat(p.id.ShortString(), "@", p.group_address, " (", s.error_message(), ")"));
    } else if (response.node_id() != p.id.Bytes()) {
      absl::StatusOr<common::NodeId> other = common::NodeId::FromBytes(response.node_id());
      missing.push_back(absl::StrCat(p.id.ShortString(), "@", p.group_address,
                                     " (answered as node ", other.ok() ? other->ShortString() : "?",
                                     ")"));
    }
  }
  if (!missing.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("peers not answering: ", absl::StrJoin(missing, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::node

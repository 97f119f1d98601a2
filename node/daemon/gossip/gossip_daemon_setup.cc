// GossipDaemon's set-up steps (Parts, gossip_daemon_parts.h): the hosted
// stages' computes and the training stack over them (again after a stage
// move), the founders' wait for the swarm to form, and the reachability
// check at join. Create and Run (gossip_daemon.cc) call them in order.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "node/compute/task_runner.h"
#include "node/daemon/gossip/advertise_auto.h"
#include "node/daemon/gossip/first_work_probe.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"
#include "node/daemon/gossip/reachability.h"
#include "node/daemon/gossip/stack_retire.h"
#include "node/daemon/gossip/state_transfer.h"
#include "node/daemon/gossip/training_members.h"
#include "node/daemon/reporting/daemon_reporting.h"
#include "node/daemon/reporting/metrics.h"
#include "node/daemon/reporting/speed_reports.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/daemon/stack/stage_checkpoints.h"
#include "node/daemon/stack/node_backend.h"
#include "node/daemon/stack/training_stack.h"
#include "node/train/grpc_group.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/grpc_transport.h"

namespace skipswarm::node {

// Note [Reachability at join]: once a node has live peers (a joiner after
// its bootstrap, the first founder once the swarm formed) up to three of
// them dial its advertised address back (reachability.h). The verdict is
// one line on stdout and in the log, and the skipswarm_reachable gauge.
// A node nobody could dial is behind NAT (or a firewall): peers cannot open
// connections to it.
bool GossipDaemon::Parts::CheckReachabilityOnce() {
  std::vector<std::string> peers;
  const membership::View view = gossip->membership()->GetView();  // Live() points into it
  for (const membership::MemberInfo* mi : view.Live()) {
    // An outbound-only member cannot take the call (Note [Relayed members]).
    if (mi->id == self || mi->addresses.empty() || mi->outbound_only) continue;
    peers.push_back(mi->addresses.front());
    if (peers.size() == 3) break;
  }
  if (peers.empty()) return false;
  ReachabilityReport r;
  if (advertise_auto_port > 0) {
    r = SettleAdvertiseAuto(peers);
  } else {
    r = CheckReachability(peers, advertised, reachability_options, absl::Seconds(5));
  }
  const std::string line = DescribeReachability(r);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (r.verdict == ReachabilityReport::Verdict::kUnknown) {
    for (const DialBackAnswer& a : r.answers) {
      LOG(WARNING) << base().name << ": reachability: " << a.peer << ": " << a.detail;
    }
    return false;
  }
  reachability_checked = true;
  status->SetReachable(r.verdict == ReachabilityReport::Verdict::kReachable);
  metrics.Set("skipswarm_reachable",
              r.verdict == ReachabilityReport::Verdict::kReachable ? 1.0 : 0.0);
  if (r.verdict == ReachabilityReport::Verdict::kBehindNat) {
    behind_nat = true;
    LOG(WARNING) << base().name << ": " << line;
    for (const DialBackAnswer& a : r.answers) {
      if (!a.detail.empty()) LOG(WARNING) << "  " << a.peer << ": " << a.detail;
    }
    // Note [Outbound-only members] (membership_impl.h): members stop
    // probing us and judge us by what we send them.
    absl::Status marked = gossip->membership()->UpdateLocalRecord(
        [](proto::NodeRecord* record) { record->set_outbound_only(true); });
    if (!marked.ok()) LOG(WARNING) << base().name << ": cannot mark our record: " << marked;
    // Note [Relayed members] (gossip_daemon_relay.cc): everything peers
    // send on connections of their own comes through relays we attach to.
    StartRelayAttacher();
  } else {
    LOG(INFO) << base().name << ": " << line;
  }
  return true;
}

// Note [Unverified joiners]
// A joiner's first record says outbound_only, and the reachability check
// that follows the bootstrap clears it unless the node is behind NAT (a
// check without an answer clears it too: as before, the node is then taken
// for dialable). Members neither probe an outbound-only member nor send it
// anything of their own; they judge it by the requests it sends them (Note
// [Outbound-only members] in membership/membership_impl.h). Before, a
// joiner behind NAT looked dialable for the seconds its check took (the
// peers' dial-backs run to their deadline), every probe of it failed, and
// it was suspected again and again until its record said outbound_only:
// 34-84 SUSPECT verdicts per run of the netns home layout, all in those
// windows (tests/netns/README.md). A reachable joiner spends the same
// seconds unprobed, which costs nothing: it trains only after its entry,
// and a crash meanwhile is still found by its silence. Founders start
// dialable: they form the swarm by dialing each other, and an outbound-
// only member is nobody's dial-back helper or gossip target.
absl::Status GossipDaemon::Parts::JoinAndCheckReachability() {
  membership::Membership* m = gossip->membership();
  if (joiner) {
    SS_RETURN_IF_ERROR(
        m->UpdateLocalRecord([](proto::NodeRecord* r) { r->set_outbound_only(true); }));
  }
  SS_RETURN_IF_ERROR(gossip->Join([this] { return StopRequested(); }));
  {
    const membership::View view = m->GetView();  // Live() points into it
    size_t peers = 0;
    for (const membership::MemberInfo* mi : view.Live()) peers += mi->id != self;
    health->ObservePeers(peers);  // "isolated" until a peer is live
  }
  CheckReachabilityOnce();  // a first node has nobody to ask yet
  if (joiner && !behind_nat) {
    SS_RETURN_IF_ERROR(
        m->UpdateLocalRecord([](proto::NodeRecord* r) { r->set_outbound_only(false); }));
  }
  return absl::OkStatus();
}

// Note [Advertise auto] (advertise_auto.h): the peers observe us, the
// observed host (with our port) and the local address are dialed back, and
// the record advertises the one chosen. The settled line goes to stdout and
// the log, the agreeing peers to skipswarm_advertise_auto_agreeing_peers.
ReachabilityReport GossipDaemon::Parts::SettleAdvertiseAuto(const std::vector<std::string>& peers) {
  // One RPC each; a peer whose record is stale (a joiner that re-advertised
  // moments ago) should not hold the join up for long.
  const std::vector<Observation> seen = ObserveSelf(peers, reachability_options, absl::Seconds(3));
  AutoAdvertiseResult a =
      SettleAutoAdvertise(seen, advertised, advertise_auto_port, [&](const std::string& at) {
        return CheckReachability(peers, at, reachability_options, absl::Seconds(5));
      });
  std::printf("%s\n", a.line.c_str());
  std::fflush(stdout);
  LOG(INFO) << base().name << ": " << a.line;
  for (const Observation& o : seen) {
    LOG(INFO) << "  " << o.peer << " sees us as " << (o.observed.empty() ? "-" : o.observed);
  }
  metrics.Set("skipswarm_advertise_auto_agreeing_peers", a.observed.agreeing,
              absl::StrCat("observers=\"", a.observed.observers, "\""));
  // An unknown verdict is checked again later (the founders' formation):
  // the record keeps its address until a check had an answer.
  if (a.address != advertised && a.report.verdict != ReachabilityReport::Verdict::kUnknown) {
    absl::Status changed = gossip->Readvertise(a.address);
    if (changed.ok()) {
      advertised = a.address;
      status->SetAddress(a.address);
    } else {
      LOG(WARNING) << base().name << ": cannot advertise " << a.address << ": " << changed;
    }
  }
  return std::move(a.report);
}

absl::Status GossipDaemon::Parts::AddCompute(int s) {
  SS_ASSIGN_OR_RETURN(computes[s], backend.create_compute(base(), s, runner.get(), clock.get()));
  probes[s] = std::make_unique<FirstWorkProbe>(
      computes[s].get(),
      [this](bool backward) {
        absl::MutexLock lock(&mu);
        (backward ? timeline.first_backward : timeline.first_forward) = clock->SteadyNow();
      },
      clock.get(),
      [this](bool backward, absl::Duration elapsed) { speed->Observe(backward, elapsed); });
  return absl::OkStatus();
}

// The StageServer over the hosted computes, the data node's planner and
// driver, and the trainer (again after a stage move, Note [Stage moves]):
// the TrainingStack both daemons build, over gossip's own transport,
// routing view and probed computes.
absl::Status GossipDaemon::Parts::BuildServing() {
  const NodeDaemonOptions& o = base();
  // Failed hops are re-routed at the planner's costs, as in NodeDaemon.
  if (!repairer) {
    repairer = std::make_unique<SchedulerRouteRepairer>(DaemonRepairerOptions(o, clock.get()));
  }
  // Every hop's send -> ack time feeds the link stats (Note [Measured speeds]).
  if (!timed_transport) {
    timed_transport = std::make_unique<LinkTimingTransport>(
        transport.get(), clock.get(),
        [this](const PeerId& peer, uint64_t bytes, absl::Duration elapsed) {
          absl::ReaderMutexLock lock(&link_mu);
          if (live_membership != nullptr) live_membership->ReportTransfer(peer, bytes, elapsed);
        });
  }
  TrainingStackInputs in;
  in.transport = timed_transport.get();
  in.clock = clock.get();
  in.routing = routing.get();  // Note [Verify trust]: without the condemned
  in.group = group.get();
  in.repairer = repairer.get();
  for (auto& [s, probe] : probes) in.stages[s] = probe.get();
  for (auto& [s, c] : frozen) {
    if (in.stages.count(s) == 0) in.frozen[s] = c.get();
  }
  in.data = data.get();
  in.swarm_id = gossip->swarm_id();
  // No names: a routes file needs a static --swarm list (refused).
  if (health == nullptr) MakeHealth();  // kept across stage moves
  ServingHealth* h = health.get();
  if (!pauses) pauses = std::make_unique<PauseMeter>(clock.get(), &metrics);
  PauseMeter* pm = pauses.get();
  StatusBoard* board = status.get();
  in.on_pause_change = [h, pm, board](const absl::Status& why) {
    h->Set("paused", why);
    pm->OnPauseChange(why);
    board->SetPaused(!why.ok(), std::string(why.message()));  // the page's badge
  };
  // Note [Newcomer micro-batches]: the quotas' classes (members on
  // probation are the quotas' newcomers).
  in.origin_on_probation = [members = quotas.members](const PeerId& id) {
    return members->Classify(id) == common::PeerClass::kNewcomer;
  };
  // Note [Sending checks]: the members whose outputs are judged are the
  // ones this node does not trust (none without probation); a condemned one
  // leaves `routing` and our record's bans (PublishBans).
  in.judge = backend.output_judge;
  in.member_on_probation = [m = members.get()](const PeerId& id) { return !m->Trusted(id); };
  in.on_check_verdict = [trust = verify_trust.get(), name = o.name](const PeerId& x, bool match) {
    if (trust->Record(x, match)) {
      LOG(WARNING) << name << ": " << x.ShortString()
                   << " condemned by this node's output checks (Note [Verify trust]): "
                      "left out of our routes, named in our record's bans";
    }
  };
  in.on_trusted_verdict = [trust = verify_trust.get(), name = o.name](
                              const PeerId& x, const PeerId& y, bool match) {
    for (const PeerId& id : trust->RecordPair(x, y, match)) {
      LOG(WARNING) << name << ": trusted " << id.ShortString()
                   << " condemned by this node's output checks (Note [Trusted disputes]): "
                      "left out of our routes, named in our record's bans";
    }
  };
  // Note [Evidence bans]: a proven false input condemns its producer here
  // at once, trusted or not (Note [Trusted disputes]).
  in.on_false_input = [trust = verify_trust.get(), name = o.name](const PeerId& x) {
    if (trust->Condemn(x)) {
      LOG(WARNING) << name << ": " << x.ShortString()
                   << " condemned: it signed a false input (Note [Evidence bans]); "
                      "left out of our routes, named in our record's bans";
    }
  };
  // Note [Checkable evidence] (o.sign_frames): our key, and our members'
  // record keys and sign_frames bits.
  in.signer = gossip->identity();
  in.public_key_of = [m = members.get()](const PeerId& id) { return m->PublicKeyOf(id); };
  in.signs_frames = [m = members.get()](const PeerId& id) { return m->SignsFrames(id); };
  SS_ASSIGN_OR_RETURN(std::unique_ptr<TrainingStack> next, TrainingStack::Create(o, in));
  ReplaceStack(std::move(next));  // a stage move or re-entry keeps a pause
  return absl::OkStatus();
}

void GossipDaemon::Parts::ReplaceStack(std::unique_ptr<TrainingStack> next) {
  const bool retire = next == nullptr;
  std::unique_ptr<TrainingStack> old;
  {
    absl::MutexLock lock(&stack_mu);
    if (next != nullptr) {
      // Note [Paused members]: read under stack_mu (then mu; ApplyPause
      // takes them one after the other), so a pause applied while the
      // stack is swapped reaches either this stack or, through ApplyPause's
      // second SetPaused, the one after it.
      bool paused = false;
      {
        absl::MutexLock state_lock(&mu);
        paused = volunteer_paused;
      }
      next->server()->SetPaused(paused);
    }
    old = std::move(stack);
    stack = std::move(next);
  }
  // Note [Stack hand-over]: outside the lock (the release sends notices,
  // the destruction waits out a trainer callback). A stack replaced by
  // none releases what its server holds, so the micro-batches' origins
  // learn of the drop at once; a new stack is only ever built after that
  // (BuildServing's callers drop the old one first), since the release
  // discards by the old server's local ids in the shared computes.
  if (retire) {
    RetireStack(std::move(old));
  } else {
    old.reset();
  }
}

void GossipDaemon::Parts::MakeHealth() {
  health = std::make_unique<ServingHealth>(
      base().name,
      [this, s = server.get()](bool serving) {
        s->SetServing(serving);
        status->AddEvent("health", serving ? std::string("SERVING")
                                           : absl::StrCat("NOT_SERVING: ", health->Reasons()));
      },
      &metrics);
  status->SetHealth(health.get());
}

absl::Status GossipDaemon::Parts::BuildTraining() {
  const NodeDaemonOptions& o = base();
  runner = std::make_unique<ThreadTaskRunner>();
  ComputeSpeedOptions speed_options;
  speed_options.layers_per_stage =
      std::max(1, o.model.model.num_layers / std::max(1, o.model.model.num_stages));
  speed_options.samples_per_mb = o.model.samples_per_mb;
  speed = std::make_unique<ComputeSpeedMeter>(speed_options);
  {
    absl::WriterMutexLock lock(&link_mu);
    live_membership = gossip->membership();
  }
  const std::vector<int> stages = Stages();
  for (int s : stages) SS_RETURN_IF_ERROR(AddCompute(s));
  SS_ASSIGN_OR_RETURN(frozen, backend.create_frozen(o, stages, runner.get()));
  if (computes.count(0) > 0) {
    SS_ASSIGN_OR_RETURN(data, backend.create_data(o));
  }
  // Founders resume from their checkpoints; a joiner takes a replica's state.
  if (!joiner) {
    SS_ASSIGN_OR_RETURN(start_iteration, ResumeFromStageCheckpoints(o, BorrowComputes(computes)));
  }
  SS_RETURN_IF_ERROR(BuildServing());
  SS_ASSIGN_OR_RETURN(metrics_server, StartDaemonMetricsServer(o, &metrics, status.get()));
  return absl::OkStatus();
}

absl::Status GossipDaemon::Parts::WaitForFounders() {
  const NodeDaemonOptions& o = base();
  const std::vector<int> stages = Stages();
  SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->clear_stages();
    for (int s : stages) r->add_stages(static_cast<uint32_t>(s));
    r->set_subnetwork(o.sdp != model::SdpMode::kOff);  // Note [Mixed local swarm]
    r->set_verify_frames(true);  // Note [Sending checks]
    r->set_sign_frames(o.sign_frames);  // Note [Checkable evidence]
    r->set_iteration(0);  // a founder (Note [Daemon records])
  }));
  const size_t want = static_cast<size_t>(std::max(1, options.expect_members));
  const absl::Duration deadline = clock->SteadyNow() + o.startup_timeout;
  absl::Duration next_probe = clock->SteadyNow() + absl::Seconds(1);
  std::string missing;
  while (true) {
    const membership::View view = gossip->membership()->GetView();
    size_t ready = 0;
    std::vector<bool> covered(o.model.model.num_stages, false);
    for (const membership::MemberInfo* mi : view.Live()) {
      if (!TrainsIn(*mi, start_iteration, TrainingFace::kGroup)) continue;
      ++ready;
      for (uint32_t s : mi->stages) {
        if (s < covered.size()) covered[s] = true;
      }
    }
    missing.clear();
    for (size_t s = 0; s < covered.size(); ++s) {
      if (!covered[s]) absl::StrAppend(&missing, missing.empty() ? "" : ",", s);
    }
    if (ready >= want && missing.empty()) break;
    // Note [Stopping]: a signal while the swarm forms is honoured at once.
    if (signals != nullptr && (signals->stop.load() || signals->drain.load())) {
      return absl::CancelledError("stopped by a signal while waiting for the swarm to form");
    }
    // Note [Restart behind the swarm] (gossip_daemon_join.cc): out of every
    // face again; Run enters as a joiner.
    if (clock->SteadyNow() >= next_probe) {
      next_probe = clock->SteadyNow() + absl::Seconds(1);
      if (SwarmTrainsWithoutUs()) {
        SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord(
            [](proto::NodeRecord* r) { r->clear_stages(); }));
        return absl::AbortedError("the swarm trains without us");
      }
    }
    if (clock->SteadyNow() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the swarm did not form: ", ready, " of ", want, " members ready",
          missing.empty() ? "" : absl::StrCat(", no replica of stage(s) ", missing)));
    }
    clock->SleepFor(absl::Milliseconds(50));
  }
  // Everything we know (every founder's record) to every live member, so
  // no founder starts routing through a peer that cannot yet dial the next
  // hop.
  SS_ASSIGN_OR_RETURN(int reached, gossip->Announce(absl::Seconds(5)));
  (void)reached;
  if (!reachability_checked) CheckReachabilityOnce();
  members->SetIteration(start_iteration);
  state->OnBoundary(start_iteration, Digests());
  SS_RETURN_IF_ERROR(group->AwaitPeers(o.startup_timeout, [this] {
    return signals != nullptr && (signals->stop.load() || signals->drain.load());
  }));
  LOG(INFO) << o.name << ": swarm formed (" << members->group()->Members().size()
            << " members); training iterations " << start_iteration << ".." << o.iterations - 1;
  return absl::OkStatus();
}

}  // namespace skipswarm::node

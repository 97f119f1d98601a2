// GossipDaemon, the joiner's side (Note [Entry iteration] in
// training_members.h): choosing the entry iteration, announcing it,
// fetching the stage's state at that boundary, and the time-to-first-
// useful-work report. Also the source side's snapshot.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/backoff.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"
#include "model/sdp_assignment.h"
#include "node/daemon/gossip/join_planning.h"
#include "node/daemon/gossip/join_role.h"

namespace skipswarm::node {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// How long announcing our entry and registering our state request may take
// at most, as a share of an iteration: the entry lead covers it.
constexpr absl::Duration kEntryMargin = absl::Milliseconds(500);
constexpr int kEntryAttempts = 4;
// The least time the source's progress is watched before its iteration
// time sets the entry lead.
constexpr absl::Duration kLeadSample = absl::Milliseconds(100);
// Note [Routed once ready]: how long the announce of our loaded state may
// hold back our first iteration; gossip spreads the record anyway.
constexpr absl::Duration kReadyAnnounceTimeout = absl::Seconds(2);
// How long a joiner waits for a live replica of its stage (gossip still
// converging) before it looks for peers' copies, and between two looks.
constexpr absl::Duration kRestoreGrace = absl::Seconds(3);

// Note [Join retries]: the pauses between two rounds of a joiner's fetch.
common::BackoffOptions JoinBackoff() {
  common::BackoffOptions b;
  b.initial = absl::Milliseconds(200);
  b.max = absl::Seconds(5);
  return b;
}

}  // namespace

// Note [A subnetwork joins]: with --sdp=auto a joiner asks ChooseJoinRole
// (Note [Join role]) instead of ChooseJoinStage. Its inputs are the
// model's shape and parameter count, P = SdpStagesPerWorker(S, sdp_keep),
// this node's micro-batches, path length and averaging, and its memory
// slots: an SDP node runs every hop of its routes itself and needs a slot
// per stage of the model (the check `skipswarm node --sdp` makes), so with
// fewer it can hold no subnetwork. The choice and its reason (both
// candidates' tokens per second, or why one did not fit) are logged. A
// subnetwork is trained with forward masking (backward masking's frozen
// copies cost a state fetch per frozen stage per iteration); its record
// says so (NodeRecord.subnetwork) from the entry on, so pipeline planners
// never route through it. Its entry fetches every one of its stages'
// state at the same boundary: the requests go out at once (one thread per
// stage beyond the first), all before the boundary, so the stages are of
// one iteration; a failure of any is the round's. A subnetwork joiner is
// never restored from peers' copies (a stage without a live host has
// none to average with anyway) and does not re-enter when behind (Note
// [Behind on any stage] is for pipeline members).
absl::StatusOr<std::vector<int>> GossipDaemon::Parts::PlaceJoiner() {
  NodeDaemonOptions& o = options.base;
  const model::ModelConfig& config = o.model.model;
  scheduler::ModelShape shape;
  shape.num_stages = config.num_stages;
  shape.layers_per_stage = std::max(1, config.num_layers / shape.num_stages);
  shape.samples_per_mb = o.model.samples_per_mb;
  JoinRoleInputs in;
  in.model.shape = shape;
  in.model.tokens_per_sample = config.seq_len;
  in.model.params = static_cast<double>(config.ParameterCount());
  in.model.sdp_stages = model::SdpStagesPerWorker(config.num_stages, options.sdp_keep);
  in.workload.mb_per_data_node = o.mbs_per_iteration;
  in.workload.path_length = o.path_length > 0 ? o.path_length : config.num_stages;
  in.averaging = o.model.averaging;
  in.sec_per_layer_sample = options.fixed_compute_speed;  // <= 0: the default estimate
  in.memory_slots = o.memory_slots;
  in.max_stages = o.memory_slots >= config.num_stages ? 0 : 1;
  membership::Membership* m = gossip->membership();
  absl::Status last = absl::UnavailableError("no view yet");
  const absl::Duration deadline = clock->SteadyNow() + o.startup_timeout;
  while (true) {
    if (options.choose_role) {
      absl::StatusOr<JoinRole> r = ChooseJoinRole(m->GetView(), self, in);
      if (r.ok()) {
        if (r->sdp) o.sdp = model::SdpMode::kForward;
        LOG(INFO) << o.name << ": --sdp=auto: the allocation makes this node "
                  << (r->sdp ? "an SDP worker on subnetwork " : "a pipeline host of stage ")
                  << absl::StrJoin(r->stages, "+") << " (" << r->reason << ")";
        status->AddEvent("role", absl::StrCat(r->sdp ? "sdp " : "pipeline ",
                                              absl::StrJoin(r->stages, "+"), ": ", r->reason));
        return r->stages;
      }
      if (absl::IsInvalidArgument(r.status())) return r.status();
      last = r.status();
    } else {
      absl::StatusOr<int> s = ChooseJoinStage(m->GetView(), self, shape, 0,
                                              /*allow_data_stage=*/true);
      if (s.ok()) {
        LOG(INFO) << o.name << ": the allocation puts this node on stage " << *s;
        return std::vector<int>{*s};
      }
      last = s.status();
    }
    SS_RETURN_IF_ERROR(JoinWaitEnds("while choosing a stage"));
    if (clock->SteadyNow() > deadline) return last;
    clock->SleepFor(absl::Milliseconds(100));  // the swarm is still forming
  }
}

absl::StatusOr<StageSnapshot> GossipDaemon::Parts::Snapshot(int stage) {
  auto it = computes.find(stage);
  if (it == computes.end()) return absl::NotFoundError("stage not hosted");
  // In memory (no scratch file): the same bytes a checkpoint holds.
  SS_ASSIGN_OR_RETURN(std::string bytes, it->second->ExportState());
  return StageSnapshot{std::move(bytes), it->second->ParamsDigest()};
}

// Note [Join retries]: a joiner's state fetch can fail for reasons that
// another try cures: its source died or stopped while the bytes flowed
// (the chaos soak's replacements lost their only source that way), every
// source passed the boundary before the request came, a quota was full, the
// bytes did not load or their digest differed. Before, any such failure
// ended the joiner (exit 1) although another replica, or a peer's
// checkpoint copy once the stage had no live replica left, could deliver.
// Now a failed round withdraws the announced entry (our record lists no
// stage, so no data node plans routes through us while we wait), waits a
// jittered, growing pause (common::Backoff: 200 ms to 5 s, seeded by the
// model seed and our id) and starts again from the view: the live replicas
// that answer (a dead one drops out of the view), and, once the stage has
// had no live replica for the grace, the newest copy a peer holds (Note
// [Restore from peer copies]). Rounds go on until the start-up deadline;
// the error then names the last failure and the number of rounds. Failures
// no retry cures end at once: nothing left to join, a stop signal.
//
// Note [Stopping while joining]: a joiner has no trained state until its
// entry, so a stop (SIGINT, SIGTERM) while it starts or joins writes no
// checkpoint: the files already in its checkpoint directory (a restarted
// node's) stay as they were, where a checkpoint of the freshly built or
// half-fetched stage would have replaced them. Main installs its signal
// handlers before GossipDaemon::Create (before, a SIGTERM during the
// bootstrap, the model build or the stage choice killed the process with
// the default action, exit 143); Create's waits (bootstrap, stage choice),
// the wait for a source, the pause between rounds and the fetch itself
// (FetchOptions::cancelled) end at once; the joiner signs LEFT (an entry it
// announced is withdrawn with it) and exits 0.
//
// Note [Revoked while joining]: a node revoked or evicted (Note
// [Revocation], Note [Eviction]) while it joins, or while it re-enters
// behind the swarm (Note [Revived members]: a revoked replica whose frames
// every member refuses soon trails its stage's replicas, whose Health still
// answers it), is refused by every source. The wait for a source, the
// fetch (FetchOptions::cancelled) and the pause between rounds used to
// retry until the start-up deadline (120 s) although its membership had
// learnt the cause (Membership::SelfAdmission); they end at once with that
// cause, and the node stops with it (exit 1), as Run does while it trains.
// So do the two waits before them: the stage choice (PlaceJoiner, in
// Create) and, behind NAT, the wait for our relays (AwaitOwnRelays: a
// revoked node is refused every relay, so it used to wait out the
// deadline there).
absl::Status GossipDaemon::Parts::JoinWaitEnds(const std::string& while_doing) const {
  if (StopRequested()) return JoinStopped(while_doing);
  return gossip->membership()->SelfAdmission();
}

// Note [Restart behind the swarm]: a node restarted on its founder's
// options (a crash and its service manager's restart, a reboot) resumes
// from its own newest checkpoint, or from nothing, while the swarm it left
// trained on. As a founder it published its stage at iteration 0
// (WaitForFounders), so every planner routed to it and its replicas waited
// for its averaging, while it waited for the swarm to form with founders
// that were gone, until its start-up deadline (the chaos soak with
// restarts, node/daemon/chaos_soak.md, hung a stage this way), or trained
// from its checkpoint's step until the behind check sent it back to enter
// (Note [Revived members]). So before the founders' wait, and once a
// second during it, it asks its stage's live replicas for their iteration
// and enters as a joiner (a live replica's state at a new entry iteration;
// its own checkpoint is superseded by the swarm's newer state) when one
// trains without it:
//  - more than the stage server's lead past our start (the behind check's
//    own verdict, here before we are routed to); or
//  - past our start and further on than when we asked it before: founders
//    forming (for the first time, or a whole swarm restarted from one
//    generation) wait for each other, so none advances before we are in.
//    A founder whose replicas wait at a newer step than ours (a swarm
//    restarted from checkpoints of different steps) stays a founder, as
//    before.
// While it waits as a founder its record names its stage, so a restart
// within the lead is planned through for up to a probe period (1 s) before
// it enters.
// A member hosting several stages (--host_stages=1+2) enters as a joiner
// when a live replica of any one of its stages trains without it by the
// rule above: each stage's state then comes from that stage's own live
// replicas, all at one entry boundary (TryEntry, as for a subnetwork
// joiner, Note [A subnetwork joins]). Before, only one-stage members asked,
// and a restarted two-stage member waited as a founder until its start-up
// deadline (restart_behind_test's two-stage case).
// A stage of ours with no live replica (we were its last) pauses the
// swarm in the iteration it cannot plan, so the other stages' replicas do
// not advance and wait there: with such a stage, a live replica of
// another stage past our start at all (not only past the lead) makes us a
// joiner. EnterAsJoiner then restores the orphaned stage from the newest
// copy a peer holds and fetches the others from their replicas, all at
// the paused iteration (Note [Restore from peer copies]). A member all of
// whose stages are orphaned (a restarted one-stage member that was its
// stage's last replica, a data node whose stage had no other) asks the
// replicas of another stage of the model by the same rule. Before, it asked
// nobody and stayed a founder: the founders' records still said iteration
// 0, so the swarm "formed" at once and it trained from its own start
// (fresh parameters at step 0 when its disk was gone) until the behind
// check moved it ahead with those parameters (Note [Sole replica behind]),
// while peers held a copy of the stage it never asked for.
// Subnetwork (SDP)
// members are left out as well: a restarted SDP founder was not examined
// (an --sdp=auto node takes no --host_stages, so it is a joiner anyway).
bool GossipDaemon::Parts::SwarmTrainsWithoutUs() {
  const std::vector<int> stages = Stages();
  if (stages.empty() || base().sdp != model::SdpMode::kOff) return false;
  const uint64_t own = static_cast<uint64_t>(std::max<int64_t>(0, start_iteration));
  const uint64_t lead = static_cast<uint64_t>(StageServerOptions().max_iteration_lead);
  // A stage of ours without a live replica: the others' replicas past our
  // start at all (the swarm paused there for that stage, above).
  const membership::View view = RoutedView();
  bool orphaned = false;
  bool all_orphaned = true;
  for (int stage : stages) {
    const bool none = StateSources(view, self, stage).empty();
    orphaned = orphaned || none;
    all_orphaned = all_orphaned && none;
  }
  // Every stage of ours orphaned: none of ours has a replica to ask, so
  // the replicas of one other stage (the lowest with any) are: they wait
  // in the paused iteration too. One stage's, as many as for one of ours:
  // a sole replica of its stage (a founder of a small swarm) asks this on
  // every probe while the swarm forms.
  std::vector<int> asked = stages;
  if (all_orphaned) {
    asked.clear();
    for (int s = 0; s < base().model.model.num_stages && asked.empty(); ++s) {
      if (std::find(stages.begin(), stages.end(), s) == stages.end() &&
          !StateSources(view, self, s).empty()) {
        asked.push_back(s);
      }
    }
  }
  return AskEachStagesReplicas(
      view, asked,
      [&](const StateSource& a) { return QuerySourceIteration(a, credentials, absl::Seconds(2)); },
      [&](int stage, const StateSource& a, const absl::StatusOr<uint64_t>& at) {
        if (!at.ok()) return false;
        auto before = behind_probe.find(a.id);
        const bool advancing = before != behind_probe.end() && *at > before->second;
        behind_probe[a.id] = *at;
        if (*at <= own || (*at <= own + lead && !advancing && !orphaned)) return false;
        const std::string line = absl::StrCat(
            base().name, ": restarted behind the swarm: our checkpoint resumed us at iteration ",
            own, ", stage ", stage, "'s replica ", a.id.ShortString(), " trains at ", *at,
            "; entering as a joiner with the swarm's state (Note [Restart behind the swarm])");
        LOG(WARNING) << line;
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        metrics.Add("skipswarm_restarts_behind_total", 1);
        return true;
      });
}

// Note [Behind on any stage]: a member hosting several stages
// (--host_stages=1+2) that stalls while it trains (a SIGSTOP, a suspended
// machine, or its replica groups dropping it) trails its replicas as a
// one-stage member does (Note [Revived members]); the running check used
// to skip it, so it never re-entered: its record still named its stages,
// planners routed through it and its stage servers refused the data nodes'
// frames far ahead of its stuck iteration (every such micro-batch dropped),
// or it trained alone at an old step. It now asks the live replicas of
// each of its stages (this function, shared with the restart rule, Note
// [Restart behind the swarm]: a peer hosting two of our stages is asked
// once) and re-enters as a joiner for all of its stages when one of them
// is more than the lead ahead of our iteration: behind on any stage is
// behind on all, as one trainer runs them in one iteration. Each stage's
// state then comes from that stage's own live replicas at one entry
// boundary (TryEntry). Only the replicas' rule applies (BehindCheck::
// PollStages): none of the data-node clock's (Note [Sole replica behind],
// Note [Data node behind]), which needs a move ahead of several stages'
// own states at once, not built. A stage of ours with no other live
// replica (we are its last) is skipped: the other stages' replicas are
// asked, and when we re-enter, EnterAsJoiner restores that stage from the
// newest copy a peer holds (Note [Restore from peer copies]; the updates
// after the copy are lost, logged and counted). While we are its only
// replica the swarm cannot run ahead of us by the lead, so this fires
// only once gossip has left us out of the stage. Subnetwork (SDP)
// members, which host several stages too, are left out as before (Note
// [A subnetwork joins]).
bool GossipDaemon::Parts::AskEachStagesReplicas(const membership::View& view,
                                                const std::vector<int>& stages,
                                                const IterationQuery& query,
                                                const StageAnswerSeen& seen,
                                                std::vector<int>* orphaned) const {
  std::vector<std::vector<StateSource>> sources;
  for (int stage : stages) {
    sources.push_back(StateSources(view, self, stage));
    if (sources.back().empty() && orphaned != nullptr) orphaned->push_back(stage);
  }
  std::set<common::NodeId> asked;
  for (size_t i = 0; i < stages.size(); ++i) {
    for (const StateSource& a : sources[i]) {
      if (!asked.insert(a.id).second) continue;
      if (seen(stages[i], a, query(a))) return true;
    }
  }
  return false;
}

absl::Status GossipDaemon::Parts::EnterAsJoiner() {
  const NodeDaemonOptions& o = base();
  const std::vector<int> stages = Stages();
  const int stage = stages.front();
  membership::Membership* m = gossip->membership();
  // The source's current iteration fixes our entry (Note [Entry iteration]).
  std::vector<StateSource> sources;
  absl::StatusOr<uint64_t> current = absl::UnavailableError("no live replica");
  const absl::Duration deadline = clock->SteadyNow() + o.startup_timeout;
  // Note [Relayed entry]: behind NAT, the entry goes out in the record that
  // names our relays. Before the entry is chosen, so the lead still covers
  // the announce and the state request.
  SS_RETURN_IF_ERROR(AwaitOwnRelays(deadline));
  // Note [Restore from peer copies] (gossip_daemon_restore.cc): no live
  // replica for a while, and a peer holds a copy of the stage.
  const absl::Duration began = clock->SteadyNow();
  absl::Duration copies_asked = -absl::InfiniteDuration();
  bool restored = false;
  absl::Status stopped;
  // The stages of ours without a live replica, as last seen (the error at
  // the deadline names the first).
  std::vector<int> orphaned;
  auto ask_sources = [&] {
    while (true) {
      stopped = JoinWaitEnds(absl::StrCat("while waiting for a source of stage ", stage));
      if (!stopped.ok()) return;
      const membership::View view = RoutedView();
      orphaned.clear();
      for (int s : stages) {
        if (StateSources(view, self, s).empty()) orphaned.push_back(s);
      }
      sources = StateSources(view, self, stage);
      // With a stage orphaned the swarm cannot pass its paused iteration:
      // no entry after it can come, so no state transfer alone serves us.
      if (!orphaned.empty()) {
        current = absl::UnavailableError(absl::StrCat(
            "stage ", orphaned.front(),
            " has no live replica and no restore of it (from a peer's copy or our own state) "
            "succeeded"));
      }
      for (size_t i = 0; orphaned.empty() && i < sources.size(); ++i) {
        current = QuerySourceIteration(sources[i], credentials, absl::Seconds(2));
        if (current.ok()) break;
      }
      if (current.ok() || clock->SteadyNow() > deadline) break;
      const absl::Duration now = clock->SteadyNow();
      // A subnetwork joiner is not restored (Note [A subnetwork joins]).
      if (!orphaned.empty() && o.sdp == model::SdpMode::kOff && now - began >= kRestoreGrace &&
          now - copies_asked >= kRestoreGrace) {
        copies_asked = now;
        int missing = -1;
        absl::StatusOr<bool> r = EnterFromPeerCopies(orphaned, &missing);
        if (!r.ok() && absl::IsCancelled(r.status())) {
          stopped = r.status();
          return;
        }
        if (!r.ok()) {
          LOG(WARNING) << o.name << ": stage" << (orphaned.size() > 1 ? "s " : " ")
                       << absl::StrJoin(orphaned, "+")
                       << " without a live replica; restoring from peers' copies failed: "
                       << r.status();
        } else if (!*r) {
          LOG(INFO) << o.name << ": stage " << missing
                    << " has no live replica and no peer holds a copy of it yet; waiting";
        } else {
          restored = true;
          return;
        }
      }
      clock->SleepFor(absl::Milliseconds(100));  // replicas not training yet
    }
  };
  FetchOptions fo;
  fo.self = self;
  fo.swarm_id = gossip->swarm_id();
  fo.credentials = credentials;
  fo.stage = stage;
  fo.deadline = o.startup_timeout;
  fo.max_bytes = StateBytesBound(static_cast<uint64_t>(computes.at(stage)->num_params()));
  fo.on_first_chunk = [this] {
    absl::MutexLock lock(&mu);
    if (timeline.first_chunk == absl::ZeroDuration()) timeline.first_chunk = clock->SteadyNow();
  };
  fo.cancelled = [this] { return !JoinWaitEnds("during the state fetch").ok(); };
  common::Backoff backoff(JoinBackoff(), o.model.seed ^ std::hash<std::string>()(self.Bytes()));
  int lead = std::max(1, options.entry_lead);
  absl::Status failure;
  for (int round = 1;; ++round) {
    ask_sources();
    if (!stopped.ok()) return stopped;
    if (restored) return absl::OkStatus();
    if (!current.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "no replica of stage ", orphaned.empty() ? stage : orphaned.front(), " answers: ",
          current.status().message(),
          failure.ok() ? "" : absl::StrCat(" (after ", round - 1, " failed rounds; last: ",
                                           failure.ToString(), ")")));
    }
    // The very next boundary when an iteration is long enough to announce
    // and register our state request in it; more iterations when they are
    // short. The iteration time comes from the source's progress since we
    // first asked (in Create).
    // Not from a short sample: a swarm's first iterations can come in a
    // burst, and a rate from a few milliseconds of it put the entry past
    // the run's end (a lead of 293 at a source at iteration 7 of 300).
    const absl::Duration sampled = clock->SteadyNow() - source_first_asked;
    if (source_first_iteration.has_value() && *current > *source_first_iteration &&
        sampled >= kLeadSample) {
      const absl::Duration per_iteration = sampled / (*current - *source_first_iteration);
      const int wanted =
          static_cast<int>(std::ceil(absl::FDivDuration(kEntryMargin, per_iteration)));
      if (wanted > lead) {
        lead = wanted;
        LOG(INFO) << o.name << ": swarm iterations take ~" << per_iteration << "; entry lead "
                  << lead;
      }
    }
    failure = TryEntry(stages, *current, &lead, sources, fo);
    if (failure.ok()) return absl::OkStatus();
    // A fetch our revocation cancelled ends with the revocation's cause.
    SS_RETURN_IF_ERROR(m->SelfAdmission());  // Note [Revoked while joining]
    if (absl::IsCancelled(failure) || absl::IsOutOfRange(failure)) return failure;
    // Note [Join retries]: out of every face until the next round announces.
    SS_RETURN_IF_ERROR(m->UpdateLocalRecord([](proto::NodeRecord* r) {
      r->clear_stages();
      r->set_entering(false);  // a peer's copy may be the next round's state
    }));
    const absl::Duration pause = backoff.Next();
    if (clock->SteadyNow() + pause > deadline) {
      return absl::Status(failure.code(),
                          absl::StrCat("stage ", stage, ": no source delivered in ", round,
                                       " rounds before the start-up deadline; last: ",
                                       failure.message()));
    }
    LOG(WARNING) << o.name << ": round " << round << " of fetching stage " << stage
                 << " failed (" << failure << "); trying again in " << pause
                 << " (another replica, or a peer's copy when none is live)";
    metrics.Add("skipswarm_join_retries_total", 1);
    const absl::Duration until = clock->SteadyNow() + pause;
    while (clock->SteadyNow() < until) {
      SS_RETURN_IF_ERROR(JoinWaitEnds("between two tries of the state fetch"));
      clock->SleepFor(std::min(absl::Milliseconds(50), until - clock->SteadyNow()));
    }
    current = absl::UnavailableError("not asked yet");
  }
}

absl::Status GossipDaemon::Parts::TryEntry(const std::vector<int>& stages, uint64_t current,
                                           int* lead, const std::vector<StateSource>& sources,
                                           FetchOptions fo) {
  const NodeDaemonOptions& o = base();
  membership::Membership* m = gossip->membership();
  uint64_t entry = 0;
  // Per stage, in `stages` order (Note [A subnetwork joins]).
  std::vector<absl::StatusOr<FetchedState>> got(stages.size(), absl::UnknownError("not fetched"));
  std::vector<std::vector<StateSource>> others(stages.size());
  for (size_t i = 1; i < stages.size(); ++i) others[i] = StateSources(RoutedView(), self, stages[i]);
  for (int attempt = 1;; ++attempt) {
    if (current + 1 >= static_cast<uint64_t>(o.iterations)) {
      return absl::OutOfRangeError(absl::StrCat(
          "the swarm is at iteration ", current, " of ", o.iterations, "; nothing left to join"));
    }
    // A lead past the run's end enters at its last iteration.
    entry = std::min(current + *lead, static_cast<uint64_t>(o.iterations) - 1);
    // Note [Entry iteration]: frames routed to us for `entry` before our
    // state is loaded must wait for BeginIteration(entry); the server
    // refuses frames far ahead of its own iteration (Note [Behind the
    // swarm] in node/stage/stage_server.h), so it stands at entry - 1.
    if (entry > 0) stack->server()->BeginIteration(entry - 1);
    // Note [Entry in the group] (node/train/grpc_group_push.cc): likewise
    // our group's push window, before anyone averages with us for `entry`
    // (a re-entering member's stood at the iteration it was stuck in).
    if (group != nullptr) group->EnterAt(entry);
    // Note [Routed once ready]: in the replica group from `entry`, routed
    // once the state is loaded (below).
    SS_RETURN_IF_ERROR(m->UpdateLocalRecord([&](proto::NodeRecord* r) {
      r->clear_stages();
      for (int s : stages) r->add_stages(static_cast<uint32_t>(s));
      r->set_subnetwork(o.sdp != model::SdpMode::kOff);  // Note [Mixed local swarm]
      r->set_verify_frames(true);  // Note [Sending checks]
      r->set_sign_frames(o.sign_frames);  // Note [Checkable evidence]
      r->set_iteration(entry);
      r->set_entering(true);
    }));
    SS_ASSIGN_OR_RETURN(int reached, gossip->Announce(absl::Seconds(5)));
    {
      absl::MutexLock lock(&mu);
      timeline.announced = clock->SteadyNow();
      timeline.entry = entry;
      timeline.entry_attempts = attempt;
    }
    LOG(INFO) << o.name << ": entering stage" << (stages.size() > 1 ? "s " : " ")
              << absl::StrJoin(stages, "+") << " at iteration " << entry << " (source at "
              << current << "); announced to " << reached << " members";
    if (options.before_state_request) options.before_state_request(entry);
    // At once: the request must reach the source before its boundary.
    fo.iteration = entry;
    {
      std::vector<std::thread> more;
      for (size_t i = 1; i < stages.size(); ++i) {
        FetchOptions f = fo;
        f.stage = stages[i];
        f.max_bytes =
            StateBytesBound(static_cast<uint64_t>(computes.at(stages[i])->num_params()));
        f.on_first_chunk = nullptr;
        more.emplace_back([&got, &others, i, f] { got[i] = FetchStageState(others[i], f); });
      }
      got[0] = FetchStageState(sources, fo);
      for (std::thread& t : more) t.join();
    }
    // The round's error: the first other than FAILED_PRECONDITION, if any.
    absl::Status round;
    for (size_t i = 0; i < stages.size(); ++i) {
      if (got[i].ok()) continue;
      if (round.ok() || absl::IsFailedPrecondition(round)) {
        round = absl::Status(got[i].status().code(),
                             absl::StrCat(stages.size() > 1 ? absl::StrCat("stage ", stages[i], ": ")
                                                            : "",
                                          got[i].status().message()));
      }
    }
    if (round.ok()) break;
    if (!absl::IsFailedPrecondition(round) || attempt == kEntryAttempts) return round;
    // The sources passed boundary `entry` before our request came: a later
    // entry (members that planned `entry` with us drop those frames when
    // we skip it; Note [Entry iteration]).
    LOG(WARNING) << o.name << ": " << round.message() << "; announcing a later entry";
    ++*lead;
    for (const StateSource& a : sources) {
      absl::StatusOr<uint64_t> at = QuerySourceIteration(a, credentials, absl::Seconds(2));
      if (at.ok()) {
        current = *at;
        break;
      }
    }
  }
  size_t bytes = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const int at = stages[i];
    const FetchedState& fetched = *got[i];
    absl::StatusOr<int64_t> step = computes[at]->ImportState(fetched.bytes);
    if (!step.ok()) {
      return absl::DataLossError(absl::StrCat("the state of stage ", at, " from ", fetched.source,
                                              " did not load: ", step.status().message()));
    }
    // A stage's step trails the swarm's iteration by the updates its
    // replicas all skipped (a failed averaging round, a stage restored from
    // an older generation); the state is still its replicas' (the digest
    // below). One from a later step than the boundary asked for is not.
    if (*step < 0 || static_cast<uint64_t>(*step) > entry) {
      return absl::DataLossError(absl::StrCat("transferred state from ", fetched.source,
                                              " is at step ", *step, ", past boundary ", entry));
    }
    if (static_cast<uint64_t>(*step) != entry) {
      LOG(INFO) << o.name << ": stage " << at << "'s state at boundary " << entry
                << " is at step " << *step << " (its replicas skipped " << entry - *step
                << " updates earlier)";
    }
    if (computes[at]->ParamsDigest() != fetched.params_digest) {
      return absl::DataLossError(absl::StrCat(
          "transferred state's digest differs from its source's (", fetched.source, ")"));
    }
    bytes += fetched.bytes.size();
    LOG(INFO) << o.name << ": state of stage " << at << " at iteration " << entry << " ("
              << fetched.bytes.size() << " bytes, " << fetched.streams << " stream(s)) from "
              << fetched.source << "; digest " << absl::StrFormat("%016x", fetched.params_digest);
  }
  {
    absl::MutexLock lock(&mu);
    timeline.state_loaded = clock->SteadyNow();
    timeline.state_bytes = bytes;
    timeline.streams = got[0]->streams;
    timeline.sources_tried = got[0]->sources_tried;
    timeline.source = got[0]->source;
  }
  start_iteration = static_cast<int64_t>(entry);
  members->SetIteration(entry);
  state->OnBoundary(entry, Digests());
  // Note [Routed once ready]: routes may use us now. Announced so the data
  // nodes' next plans have it; gossip carries it to whoever this misses.
  SS_RETURN_IF_ERROR(m->UpdateLocalRecord([](proto::NodeRecord* r) { r->set_entering(false); }));
  absl::StatusOr<int> told = gossip->Announce(kReadyAnnounceTimeout);
  if (!told.ok()) {
    LOG(WARNING) << o.name << ": announcing that our state is loaded: " << told.status()
                 << " (gossip carries it)";
  } else {
    LOG(INFO) << o.name << ": ready for micro-batches from iteration " << entry
              << "; announced to " << *told << " members";
  }
  return absl::OkStatus();
}

std::optional<BehindVerdict> GossipDaemon::Parts::SwarmAheadOfUs() {
  if (options.behind_check_every <= absl::ZeroDuration()) return std::nullopt;
  // Data nodes included (Note [Data node behind]); a subnetwork (SDP)
  // member does not re-enter (Note [Behind on any stage]).
  const std::vector<int> stages = Stages();
  if (stages.empty() || stack == nullptr) return std::nullopt;
  if (stages.size() > 1 && base().sdp != model::SdpMode::kOff) return std::nullopt;
  {
    absl::MutexLock lock(&mu);
    if (draining || move != nullptr) return std::nullopt;
  }
  if (behind == nullptr) {
    BehindCheckOptions bo;
    bo.every = options.behind_check_every;
    bo.lead = static_cast<uint64_t>(StageServerOptions().max_iteration_lead);
    behind = std::make_unique<BehindCheck>(bo, clock.get());
  }
  // Not due: PollMember would ask nobody, so no view is built for it.
  if (!behind->DueNow()) return std::nullopt;
  const membership::View view = RoutedView();
  auto iteration = [&](const StateSource& a) {
    return health_channels.QueryIteration(a, credentials, absl::Milliseconds(500));
  };
  if (stages.size() > 1) {  // Note [Behind on any stage]
    return behind->PollStages([&] { return members->iteration(); }, [&] {
      std::vector<absl::StatusOr<uint64_t>> answers;
      AskEachStagesReplicas(view, stages, iteration,
                            [&](int, const StateSource&, const absl::StatusOr<uint64_t>& at) {
                              answers.push_back(at);
                              return false;
                            });
      return answers;
    });
  }
  // Note [Data nodes split]: the data nodes that answered, for `dropped`.
  std::vector<std::pair<common::NodeId, uint64_t>> data_answers;
  auto ask = [&](int of, size_t at_most) {
    std::vector<absl::StatusOr<uint64_t>> answers;
    for (const StateSource& a : StateSources(view, self, of)) {
      if (answers.size() == at_most) break;
      answers.push_back(iteration(a));
      if (of == 0 && answers.back().ok()) data_answers.emplace_back(a.id, *answers.back());
    }
    return answers;
  };
  // Gossip calls them live (StateSources) and their entry admits them to
  // our iteration's group; our replica group does not: a local verdict of
  // ours (a joiner whose entry is still ahead of us is no split).
  auto dropped = [&] {
    std::vector<uint64_t> out;
    const uint64_t now = members->iteration();
    for (const auto& [id, at] : data_answers) {
      const membership::MemberInfo* m = view.Find(id);
      if (m == nullptr || !YieldsTo(self, id) || !TrainsIn(*m, now, TrainingFace::kGroup)) {
        continue;
      }
      if (!members->group()->IsAlive(id)) out.push_back(at);
    }
    return out;
  };
  return behind->PollMember(stages, [&] { return members->iteration(); }, ask, dropped);
}

absl::Status GossipDaemon::Parts::CatchUp(const BehindVerdict& verdict) {
  if (verdict.split) {
    LOG(WARNING) << base().name << ": a data node our replica group dropped goes on in step with "
                 << "us (at " << verdict.at << ", Note [Data nodes split]); re-entering with its "
                 << "state so stage 0 is averaged together again";
  }
  return verdict.kind == BehindVerdict::kMoveAhead ? MoveAhead(verdict.at)
                                                   : Reenter(verdict.at);
}

absl::Status GossipDaemon::Parts::MoveAhead(uint64_t data_at) {
  const NodeDaemonOptions& o = base();
  const int stage = Stages().front();
  const uint64_t own = members->iteration();
  // As in Reenter: the stuck iteration goes with the stack, its gradients
  // with ZeroGrad; the compute keeps its parameters and optimizer state.
  ReplaceStack(nullptr);
  StageCompute* compute = computes.at(stage).get();
  compute->ZeroGrad();
  const uint64_t to = std::min<uint64_t>(data_at, static_cast<uint64_t>(o.iterations));
  if (compute->step() < 0 || static_cast<uint64_t>(compute->step()) > to) {
    return absl::InternalError(absl::StrCat("stage ", stage, " is at step ", compute->step(),
                                            ", past the data nodes' iteration ", data_at));
  }
  // Note [Restored step]: the iterations we missed pass without an update.
  const uint64_t skipped = to - static_cast<uint64_t>(compute->step());
  const std::vector<float> nothing(static_cast<size_t>(compute->num_params()), 0.f);
  for (uint64_t i = 0; i < skipped; ++i) {
    SS_RETURN_IF_ERROR(compute->ApplyUpdate(nothing, 0).status());
  }
  const std::string line = absl::StrCat(
      "stage ", stage, " is behind the swarm and no live replica of it is ahead of this one: at ",
      "iteration ", own, ", the data nodes at ", data_at,
      " (Note [Sole replica behind]); moving ahead with this replica's own parameters and "
      "optimizer state to iteration ", to, " (", skipped, " iterations without an update)");
  LOG(WARNING) << o.name << ": " << line;
  std::printf("%s: %s\n", o.name.c_str(), line.c_str());
  std::fflush(stdout);
  metrics.Add("skipswarm_sole_replica_skips_total", 1);
  metrics.Add("skipswarm_sole_replica_skipped_iterations_total", static_cast<double>(skipped));
  status->AddEvent("behind", line);
  members->SetIteration(to);
  behind->Reset();
  if (to >= static_cast<uint64_t>(o.iterations)) {
    // The data nodes are done: what we hold is the stage's final state.
    SS_RETURN_IF_ERROR(FinalCheckpoint());
    return absl::OutOfRangeError(
        absl::StrCat("the data nodes are at iteration ", data_at, " of ", o.iterations));
  }
  SS_RETURN_IF_ERROR(BuildServing());
  start_iteration = static_cast<int64_t>(to);
  state->OnBoundary(to, Digests());
  return absl::OkStatus();
}

absl::Status GossipDaemon::Parts::Reenter(uint64_t swarm_at) {
  const NodeDaemonOptions& o = base();
  const std::vector<int> stages = Stages();
  const int stage = stages.front();
  const std::string named = absl::StrJoin(stages, "+");
  const uint64_t own = members->iteration();
  // Note [Data node behind]: a data node's replicas are the other data nodes.
  const std::string ahead = stages.size() > 1 ? absl::StrCat("a replica of one of stages ", named)
                            : stage == 0      ? std::string("another data node")
                                              : absl::StrCat("a replica of stage ", stage);
  const char* note = stages.size() > 1 ? "Behind on any stage"
                     : stage == 0      ? "Data node behind"
                                       : "Revived members";
  LOG(WARNING) << o.name << ": behind the swarm: at iteration " << own << ", " << ahead << " at "
               << swarm_at << " (Note [" << note << "]); re-entering with a live replica's state";
  std::printf("behind the swarm: at iteration %llu, stage %s's replicas at %llu; re-entering\n",
              static_cast<unsigned long long>(own), named.c_str(),
              static_cast<unsigned long long>(swarm_at));
  std::fflush(stdout);
  metrics.Add("skipswarm_reentries_total", 1);
  status->AddEvent("behind", absl::StrCat("at ", own, ", replicas at ", swarm_at, ": re-entering"));
  // Out of both faces of every peer (Note [Daemon records]: no stage, not
  // training) before anything else: no more routes or averaging with us.
  SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord(
      [](proto::NodeRecord* r) { r->clear_stages(); }));
  // Note [Data node behind]: the dead verdicts we made while stalled (our
  // own hops and probes timing out) would outlast the re-entry.
  members->ForgetLocalVerdicts();
  // The stuck iteration goes with the stack: its trainer's callbacks turn
  // into no-ops and its server detaches (frames to us are refused and
  // re-routed). The compute stays; its state is replaced below.
  ReplaceStack(nullptr);
  for (int s : stages) computes.at(s)->ZeroGrad();
  SS_RETURN_IF_ERROR(BuildServing());
  SS_RETURN_IF_ERROR(EnterAsJoiner());
  behind->Reset();
  LOG(INFO) << o.name << ": re-entered stage " << named << " at iteration " << start_iteration
            << " (" << (static_cast<int64_t>(start_iteration) - static_cast<int64_t>(own))
            << " iterations after the one we were stuck in)";
  return absl::OkStatus();
}

void GossipDaemon::Parts::ReportJoin() {
  JoinTimeline t;
  {
    absl::MutexLock lock(&mu);
    if (!joiner || timeline.reported || timeline.first_backward == absl::ZeroDuration() ||
        timeline.digests_checked < 0) {
      return;
    }
    timeline.reported = true;
    t = timeline;
  }
  // Note [Entry iteration]: the first micro-batch may come in the entry
  // iteration itself; its frames wait for the state, so it ends after
  // state_loaded.
  const double total = Seconds(t.first_backward - t.start);
  const std::string line = absl::StrFormat(
      "{\"node\":\"%s\",\"stage\":%d,\"entry\":%d,\"entry_attempts\":%d,\"process_s\":%.3f,"
      "\"manifest_s\":%.3f,"
      "\"bootstrap_s\":%.3f,\"place_build_s\":%.3f,\"announce_s\":%.3f,"
      "\"wait_source_boundary_s\":%.3f,\"state_transfer_s\":%.3f,\"first_mb_s\":%.3f,"
      "\"total_s\":%.3f,\"from_spawn_s\":%.3f,\"state_bytes\":%d,\"streams\":%d,"
      "\"digest_after_first_step\":\"%016x\",\"digests_agree\":%s}",
      base().name, Stages().front(), t.entry, t.entry_attempts, Seconds(t.process_age),
      Seconds(options.manifest_fetch_time),
      Seconds(t.bootstrapped - t.start), Seconds(t.placed - t.bootstrapped),
      Seconds(t.announced - t.placed), Seconds(t.first_chunk - t.announced),
      Seconds(t.state_loaded - t.first_chunk), Seconds(t.first_backward - t.state_loaded), total,
      Seconds(t.process_age) + total, t.state_bytes, t.streams, t.digest_after_first_step,
      t.digests_checked == 1 ? "true" : "false");
  LOG(INFO) << base().name << ": JOIN " << line;
  std::printf("JOIN %s\n", line.c_str());
  std::fflush(stdout);
  if (!options.join_report_file.empty()) {
    std::ofstream out(options.join_report_file, std::ios::app);
    out << line << "\n";
  }
}

}  // namespace skipswarm::node

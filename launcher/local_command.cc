#include "launcher/local_command.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/free_port.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "launcher/eval_snapshots.h"
#include "launcher/local_chaos.h"
#include "launcher/local_config.h"
#include "launcher/local_layout.h"
#include "launcher/local_processes.h"
#include "launcher/local_report.h"
#include "launcher/peer_copies.h"
#include "launcher/progress_log.h"
#include "membership/record.h"
#include "launcher/stage_recovery.h"
#include "nlohmann/json.hpp"
#include "model/model_flags.h"
#include "model/sdp_flags.h"
#include "node/daemon/gossip/state_transfer.h"

ABSL_FLAG(int, local_data_nodes, 2, "Data nodes (hosting stage 0) of the local swarm.");
ABSL_FLAG(int, local_replicas, 2, "Replicas of each non-zero stage.");
ABSL_FLAG(bool, local_mixed, false,
          "With --sdp: the SDP nodes (w0, ...) train beside the pipeline swarm (d0, ..., "
          "s1r0, ...), averaging their stages with its replicas (Note [Mixed local swarm] in "
          "launcher/local_layout.h; gossip, or a static list that marks them sdp:).");
ABSL_FLAG(int64_t, local_iterations, 200, "Iterations to train.");
ABSL_FLAG(int, local_mbs, 4, "Micro-batches per data node per iteration.");
ABSL_FLAG(int, local_memory_slots, 4, "Memory slots per node.");
ABSL_FLAG(std::string, local_planner, "skippipe",
          "Route planner of the data nodes: skippipe (the scheduler's; full in-order routes at "
          "--path_length=0, skip routes that may swap stages below it), inorder, "
          "pipeline, noskip, random.");
ABSL_FLAG(int, local_path_length, 0, "Stages per route incl. stage 0 (skipping); 0: all.");
ABSL_FLAG(bool, local_planner_link_costs, true,
          "Nodes get --node_planner_link_costs: hop costs from measured links (gossip); false: "
          "uniform hop estimates (for comparisons).");
ABSL_FLAG(std::string, local_caps, "",
          "Slow links: comma-separated NAME@MBIT; node NAME gets --max_upload_mbps and "
          "--max_download_mbps = MBIT (its pipeline frames through a ShapingTransport).");
ABSL_FLAG(std::string, local_sync_caps, "",
          "Slow replica averaging: comma-separated NAME@MBIT; node NAME gets "
          "--max_sync_upload_mbps = MBIT (its gradient / pseudo-gradient pushes only).");
ABSL_FLAG(std::string, local_node_config, "",
          "Extra config keys for single nodes: comma-separated NAME:KEY=VALUE (node NAME's "
          "config file gets \"KEY\": \"VALUE\"; e.g. s1r1:avg_outlier_factor=0). A key the "
          "node binary does not know fails that node at start.");
ABSL_FLAG(int, local_rebalance_every, 0,
          "Gossip: every node gets --rebalance_every=N (stage rebalancing, Note [Stage moves]; "
          "0: off).");
ABSL_FLAG(std::string, kill, "",
          "Fault injection: comma-separated NAME@ITER; SIGKILL node NAME once iteration ITER "
          "is reported (e.g. s2r1@50).");
ABSL_FLAG(std::string, local_membership, "gossip",
          "gossip: node d0 starts the swarm and the others --join it (membership/); static: "
          "every node gets the full --swarm list (always so with --wan).");
ABSL_FLAG(int64_t, local_join_at, -1,
          "Gossip: once iteration N is reported, start one more node (j0, no stage given) that "
          "joins the training swarm; its time-to-first-useful-work goes to join.jsonl.");
ABSL_FLAG(bool, local_tls, false,
          "Mutual TLS between the nodes (a key per node in LOCAL_DIR/keys/; static lists pin "
          "each node's id) instead of plain text (--insecure, the default for speed).");
ABSL_FLAG(bool, local_record_routes, false,
          "Every data node appends the routes it plans to LOCAL_DIR/routes/NAME.routes "
          "(model/route_record.h), for `skipswarm train-ref --routes_file=...`.");
ABSL_FLAG(int64_t, local_eval_every, 0,
          "> 0: nodes checkpoint every N iterations and the launcher keeps a copy per step in "
          "LOCAL_DIR/evals/iter-NNNNNN/ (plus the final one) for `skipswarm eval --checkpoint`.");
ABSL_FLAG(int64_t, local_checkpoint_every, 10,
          "Nodes checkpoint every N iterations and the launcher keeps the newest "
          "--keep_generations complete sets as checkpoint generations in "
          "LOCAL_DIR/generations/; a stage that loses every replica is restored from the newest "
          "(every node resumes at its iteration). 0: none (a lost stage stops the run).");
ABSL_FLAG(int, local_keep_generations, 3, "Checkpoint generations kept (>= 1).");
ABSL_FLAG(int, local_checkpoint_copies, 2,
          "Gossip: every node gets --checkpoint_copies=N (Note [Checkpoint copies]: each "
          "stage's checkpoint is also held by N nodes that do not host it); a lost stage whose "
          "generation files are gone is restored from a live peer's copy. 0: none.");
ABSL_FLAG(bool, local_lose_disks, false,
          "Drill (Note [Lost disks], launcher/peer_copies.h): when a stage loses its last "
          "replica, delete the dead nodes' checkpoints and copies and the stage's files in "
          "every generation, so that only the copies live peers hold can restore it.");
ABSL_FLAG(int, local_max_restores, 3,
          "Stage restores before a further stage loss stops the run.");
ABSL_FLAG(int, local_status_port, 0,
          "The first node serves its live status page (GET /, /status.json) and /metrics on "
          "127.0.0.1:PORT while the swarm runs (0: a free port, printed at start; -1: none).");
ABSL_FLAG(int64_t, local_chaos_seed, 0,
          "> 0: the chaos agent (launcher/local_chaos.h; gossip): seeded random SIGKILLs of "
          "non-data nodes (at most --chaos_max_dead of them dead at once), a replacement "
          "joiner for the same stage 5 s after each, and SIGSTOP/SIGCONT stalls of a member.");
ABSL_FLAG(double, local_chaos_kill_every_s, 20, "Chaos: mean seconds between kills.");
ABSL_FLAG(double, local_chaos_stall_every_s, 30, "Chaos: mean seconds between stalls.");
ABSL_FLAG(double, local_chaos_stall_s, 5, "Chaos: how long a stalled member stays stopped.");
ABSL_FLAG(int, local_chaos_restart_every, 0,
          "Chaos: every Nth kill is answered by restarting the killed node itself on its own "
          "config and checkpoints (Note [Restart on own disk]) instead of a joiner; 0: never.");
ABSL_FLAG(double, local_chaos_max_dead, 0.5,
          "Chaos: the most non-data nodes dead at once, as a fraction of the layout's.");
ABSL_FLAG(std::string, local_dir, "skipswarm-local",
          "Folder for configs, logs, checkpoints, loss.csv and loss.svg (wiped at start).");

namespace skipswarm::launcher {
namespace {

// Main-level: SIGINT and SIGTERM. The first stops every node with a
// checkpoint; a second one ends them at once (SIGKILL, no checkpoint).
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signals{0};
void OnSignal(int) {
  g_signals.fetch_add(1);
  g_interrupted.store(true);
}

std::string JsonString(const std::string& s) { return nlohmann::json(s).dump(); }

using Child = LocalChild;
using Point = ProgressPoint;

// Marks a folder `skipswarm local` made, so that only such a folder is wiped.
constexpr char kLocalDirMarker[] = ".skipswarm-local";

absl::Status Run(const LocalSwarmPlanner& wan) {
  // The launcher is main-level code: it picks the real clock for its
  // timestamps and polling.
  std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  SS_ASSIGN_OR_RETURN(model::ModelFlags flags, model::ReadModelFlags());
  const int stages = flags.model.num_stages;
  const int data_nodes = absl::GetFlag(FLAGS_local_data_nodes);
  const int replicas = absl::GetFlag(FLAGS_local_replicas);
  int64_t iterations = absl::GetFlag(FLAGS_local_iterations);
  if (data_nodes < 1 || replicas < 1 || iterations < 1) {
    return absl::InvalidArgumentError("--data_nodes, --replicas and "
                                      "--iterations must be >= 1");
  }
  const std::string dir = std::filesystem::absolute(absl::GetFlag(FLAGS_local_dir)).string();
  std::error_code ec;
  // Only a folder this launcher made (its marker file inside) is wiped:
  // --local_dir=$HOME must not erase a home.
  const std::string marker = dir + "/" + kLocalDirMarker;
  if (std::filesystem::exists(dir, ec)) {
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dir=", dir, " exists and is not a folder"));
    }
    if (!std::filesystem::is_empty(dir, ec) && !std::filesystem::exists(marker, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--dir=", dir, " is not empty and was not made by skipswarm local (no ",
          kLocalDirMarker, " file in it); refusing to delete it: pass a new or empty folder"));
    }
  }
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir + "/logs", ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  {
    std::ofstream m(marker);
    m << "made by skipswarm local; the next run with this --dir deletes this folder\n";
    if (!m) return absl::UnavailableError(absl::StrCat("cannot write ", marker));
  }

  // Layout and ports.
  std::optional<LocalSwarmPlan> wan_plan;
  if (wan) {
    SS_ASSIGN_OR_RETURN(wan_plan, wan(dir));
  }
  SS_ASSIGN_OR_RETURN(const model::SdpOptions sdp, model::ReadSdpFlags());
  if (sdp.mode != model::SdpMode::kOff && wan_plan) {
    return absl::InvalidArgumentError("--sdp lays the swarm out itself: drop --wan");
  }
  LocalConfigOptions co;
  co.dir = dir;
  LocalSwarmLayout swarm;
  if (wan_plan) {
    for (const LocalNodePlan& n : wan_plan->nodes) {
      swarm.nodes.push_back({n.name, n.stages});
      co.extra_config[n.name] = n.extra_config;
    }
    if (wan_plan->iterations > 0) iterations = wan_plan->iterations;
  } else {
    LayoutOptions lo;
    lo.num_stages = stages;
    lo.data_nodes = data_nodes;
    lo.replicas = replicas;
    lo.sdp = sdp;
    lo.mixed = absl::GetFlag(FLAGS_local_mixed);
    SS_ASSIGN_OR_RETURN(swarm, MakeLocalLayout(lo));
  }
  const LocalLayout& layout = swarm.nodes;
  SS_RETURN_IF_ERROR(
      CheckLayoutFitsInMemory(flags, layout, absl::GetFlag(FLAGS_local_mbs)));
  // Per-node bandwidth caps (a replica behind a slow home link).
  SS_RETURN_IF_ERROR(AddLinkCaps(absl::GetFlag(FLAGS_local_caps), "local_caps",
                                 {"max_upload_mbps", "max_download_mbps"}, layout,
                                 &co.extra_config));
  SS_RETURN_IF_ERROR(AddLinkCaps(absl::GetFlag(FLAGS_local_sync_caps), "local_sync_caps",
                                 {"max_sync_upload_mbps"}, layout, &co.extra_config));
  SS_RETURN_IF_ERROR(
      AddNodeConfig(absl::GetFlag(FLAGS_local_node_config), layout, &co.extra_config));
  // The first node's status page (node/daemon/reporting/status_page.h).
  int status_port = absl::GetFlag(FLAGS_local_status_port);
  if (status_port == 0) {
    SS_ASSIGN_OR_RETURN(status_port, common::FreeLoopbackPort());
  }
  if (status_port > 0) {
    std::string& extra = co.extra_config[layout.front().first];
    absl::StrAppend(&extra, extra.empty() ? "" : ",\n  ", "\"metrics_port\": ", status_port);
  }
  // Membership: gossip (the first node founds, the others --join it; every
  // other port is picked by the node) or the static list (WAN runs name
  // their links).
  const bool gossip = !wan_plan && absl::GetFlag(FLAGS_local_membership) == "gossip";
  if (!gossip && absl::GetFlag(FLAGS_local_membership) != "static" && !wan_plan) {
    return absl::InvalidArgumentError("--membership must be gossip or static");
  }
  const int rebalance_every = absl::GetFlag(FLAGS_local_rebalance_every);
  if (rebalance_every < 0 || (rebalance_every > 0 && !gossip)) {
    return absl::InvalidArgumentError(
        "--rebalance_every needs --membership=gossip (no --wan) and N >= 0");
  }
  const bool tls = absl::GetFlag(FLAGS_local_tls);
  const int checkpoint_copies = absl::GetFlag(FLAGS_local_checkpoint_copies);
  const bool lose_disks = absl::GetFlag(FLAGS_local_lose_disks);
  if (checkpoint_copies < 0) {
    return absl::InvalidArgumentError("--checkpoint_copies must be >= 0");
  }
  co.gossip = gossip;
  co.tls = tls;
  co.rebalance_every = rebalance_every;
  co.checkpoint_copies = checkpoint_copies;
  co.founder = layout.front().first;
  // Note [One swarm per run] (local_config.h).
  std::random_device entropy;
  co.swarm_name = LocalSwarmName((uint64_t{entropy()} << 32) ^ entropy());
  const std::string swarm_name = co.swarm_name;
  co.expect_members = layout.size();
  co.sdp = sdp.mode;
  co.sdp_nodes = swarm.sdp;  // a static list marks them (sdp:)
  SS_RETURN_IF_ERROR(AssignLocalAddresses(layout, &co));
  // Gossip: every node's one address, for the checkpoint copies.
  const std::map<std::string, std::string> addresses = co.addresses;

  // The model flags as given to us, passed on to every node.
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::EndsWith(flag->Filename(), model::kModelFlagsFile)) continue;
    if (name == "checkpoint_dir" || name == "threads") continue;
    co.model_settings.push_back(absl::StrCat(JsonString(std::string(name)), ": ",
                                             JsonString(flag->CurrentValue())));
  }
  const std::string progress = dir + "/progress.jsonl";
  const bool record_routes = absl::GetFlag(FLAGS_local_record_routes);
  if (record_routes) std::filesystem::create_directories(dir + "/routes", ec);
  const int64_t eval_every = absl::GetFlag(FLAGS_local_eval_every);
  std::optional<EvalSnapshots> snapshots;
  if (eval_every > 0) snapshots.emplace(dir + "/checkpoints", dir + "/evals", stages);
  // Note [Local stage restore] (launcher/stage_recovery.h).
  const int64_t checkpoint_every = absl::GetFlag(FLAGS_local_checkpoint_every);
  const int keep_generations = absl::GetFlag(FLAGS_local_keep_generations);
  const int max_restores = absl::GetFlag(FLAGS_local_max_restores);
  if (checkpoint_every < 0 || keep_generations < 1 || max_restores < 0) {
    return absl::InvalidArgumentError("--checkpoint_every and --max_restores must be "
                                      ">= 0, --keep_generations >= 1");
  }
  // One checkpoint period for both uses: the eval one when given.
  const int64_t node_checkpoint_every = eval_every > 0 ? eval_every : checkpoint_every;
  std::optional<EvalSnapshots> generations;
  if (node_checkpoint_every > 0) {
    generations.emplace(dir + "/checkpoints", dir + "/generations", stages,
                        GenerationOptions{"", keep_generations});
  }
  co.iterations = iterations;
  co.mbs = absl::GetFlag(FLAGS_local_mbs);
  co.memory_slots = absl::GetFlag(FLAGS_local_memory_slots);
  // A subnetwork's micro-batch holds a slot per stage on its one node.
  co.sdp_memory_slots = std::max(co.memory_slots, stages);
  co.planner = absl::GetFlag(FLAGS_local_planner);
  co.path_length = absl::GetFlag(FLAGS_local_path_length);
  co.planner_link_costs = absl::GetFlag(FLAGS_local_planner_link_costs);
  co.progress_file = progress;
  co.record_routes = record_routes;
  co.checkpoint_every = node_checkpoint_every;
  const LocalConfigs configs(std::move(co));
  std::vector<Child> children;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto write_config = [&](const std::string& name, const std::vector<int>& st,
                          bool joiner = false) { return configs.Write(name, st, joiner); };
  // Fault plan.
  std::vector<std::string> node_names;
  for (const auto& n : layout) node_names.push_back(n.first);
  const std::map<std::string, int64_t> no_planned_kills;
  SS_ASSIGN_OR_RETURN(auto kills,
                      ParseKillPlan(absl::GetFlag(FLAGS_kill),
                                    wan_plan ? wan_plan->kills : no_planned_kills, node_names,
                                    absl::GetFlag(FLAGS_local_join_at) >= 0));

  for (const auto& [name, st] : layout) {
    const std::string config = write_config(name, st);
    Child c;
    c.name = name;
    SS_ASSIGN_OR_RETURN(c.pid, SpawnNode(dir, name, config));
    children.push_back(c);
  }
  if (wan_plan) {
    std::printf("skipswarm local: %zu nodes, %s, %lld iterations; logs in %s/logs\n",
                children.size(), wan_plan->description.c_str(),
                static_cast<long long>(iterations), dir.c_str());
  } else if (sdp.mode != model::SdpMode::kOff) {
    if (swarm.pipeline_data_nodes > 0) {
      std::printf("skipswarm local: %zu pipeline nodes (%d data nodes, %d stages x %d "
                  "replicas) and ",
                  layout.size() - swarm.sdp.size(), data_nodes, stages - 1, replicas);
    } else {
      std::printf("skipswarm local: ");
    }
    std::printf("%zu SDP nodes (%s masking, %d of %d stages each:",
                swarm.sdp.size(), model::SdpModeName(sdp.mode).c_str(),
                swarm.assignment.stages_per_worker, stages);
    for (const auto& [name, st] : layout) {
      if (swarm.sdp.count(name) == 0) continue;
      std::printf(" %s=%s", name.c_str(), model::FormatStageSet(st).c_str());
    }
    std::printf("), %lld iterations; logs in %s/logs\n", static_cast<long long>(iterations),
                dir.c_str());
  } else {
    std::printf("skipswarm local: %zu nodes (%d data nodes, %d stages x %d replicas), %lld "
                "iterations; logs in %s/logs\n",
                children.size(), data_nodes, stages - 1, replicas,
                static_cast<long long>(iterations), dir.c_str());
  }
  if (status_port > 0) {
    std::printf("status page of %s: http://127.0.0.1:%d/ (live while the swarm runs)\n",
                layout.front().first.c_str(), status_port);
  }

  std::map<int64_t, Point> points;
  int64_t rerouted = 0;  // every node's re-routes so far (ReadProgress)
  const int64_t join_at = absl::GetFlag(FLAGS_local_join_at);
  absl::Duration joiner_spawned = absl::InfiniteDuration();
  absl::Duration joined_after = absl::InfiniteDuration();  // spawn -> JOIN line
  std::string join_line;
  bool interrupted_sent = false;
  bool killed_all = false;  // a second signal
  // Stage loss (no live host of a stage before the last iteration): the
  // swarm is restored from the newest checkpoint generation (Note [Local
  // stage restore]); without one it stops with an error naming the stage
  // instead of printing empty iterations (Note [Paused training] keeps the
  // data nodes waiting meanwhile).
  std::string lost;
  int restores = 0;
  // The chaos agent (launcher/local_chaos.h) and the replacements it
  // started (name -> stage), which the stage-loss check counts too.
  const int64_t chaos_seed = absl::GetFlag(FLAGS_local_chaos_seed);
  if (chaos_seed > 0 && !gossip) {
    return absl::InvalidArgumentError("--chaos_seed needs --membership=gossip");
  }
  std::optional<LocalChaos> chaos;
  std::map<std::string, int> replacements;
  std::set<std::string> serving_replacements;  // reported an iteration
  // Note [Restart on own disk]: restarted nodes that have not reported an
  // iteration since (they do not serve yet: Note [Survivable chaos]).
  std::set<std::string> catching_up;
  std::map<std::string, int> stage_of;  // non-data nodes of the layout
  for (const auto& [name, st] : layout) {
    if (st.size() == 1 && st[0] != 0) stage_of[name] = st[0];
  }
  if (chaos_seed > 0) {
    ChaosOptions co;
    co.seed = static_cast<uint64_t>(chaos_seed);
    co.kill_every = absl::Seconds(absl::GetFlag(FLAGS_local_chaos_kill_every_s));
    co.stall_every = absl::Seconds(absl::GetFlag(FLAGS_local_chaos_stall_every_s));
    co.stall_for = absl::Seconds(absl::GetFlag(FLAGS_local_chaos_stall_s));
    co.max_dead_fraction = absl::GetFlag(FLAGS_local_chaos_max_dead);
    co.restart_every = absl::GetFlag(FLAGS_local_chaos_restart_every);
    if (co.restart_every < 0) {
      return absl::InvalidArgumentError("--local_chaos_restart_every must be >= 0");
    }
    if (co.kill_every <= absl::ZeroDuration() || co.stall_every <= absl::ZeroDuration() ||
        co.stall_for < absl::ZeroDuration() || !(co.max_dead_fraction >= 0) ||
        co.max_dead_fraction > 1) {
      return absl::InvalidArgumentError(
          "--chaos_*: positive intervals, stall >= 0, max_dead in [0, 1]");
    }
    chaos.emplace(co, static_cast<int>(stage_of.size()), clock->SteadyNow());
  }
  // The longest wall-clock wait for the next iteration (restores included).
  absl::Duration last_new_iteration = clock->SteadyNow();
  int64_t last_trained = -1;  // Note [Chaos waits for progress]
  absl::Duration longest_wait;
  int64_t longest_wait_after = -1;
  std::optional<RestorePlan> restoring;  // restored, training not yet resumed
  std::string peer_copy_holder;          // the restoring stage's copy came from it
  absl::Duration paused_at;
  // The daemons' clocks restart with them: training seconds before the
  // latest restore's iteration, added to the later points' elapsed_s.
  int64_t resumed_at = -1;
  double elapsed_before = 0;
  auto train_seconds = [&](int64_t it, const Point& p) {
    return p.elapsed + (resumed_at >= 0 && it >= resumed_at ? elapsed_before : 0);
  };
  std::vector<RunEvent> restore_events;
  std::map<std::string, int64_t> killed_after;
  int64_t joined_at_iteration = -1;  // when j0 was started (plot marker)
  absl::Duration stop_deadline = absl::InfiniteDuration();
  constexpr absl::Duration kStopGrace = absl::Seconds(30);
  int alive = static_cast<int>(children.size());
  int64_t shown = -1;
  while (alive > 0) {
    for (Child& c : children) {
      if (c.exited) continue;
      struct rusage ru {};
      if (wait4(c.pid, &c.status, WNOHANG, &ru) == c.pid) {
        RecordExit(ru, c);
        --alive;
      }
    }
    ReadProgress(progress, points, rerouted);
    int64_t reported = points.empty() ? -1 : points.rbegin()->first;
    for (Child& c : children) {
      auto k = kills.find(c.name);
      if (k != kills.end() && !c.exited && reported >= k->second) {
        std::printf("\nkilling %s (SIGKILL) after iteration %lld\n", c.name.c_str(),
                    static_cast<long long>(reported));
        kill(c.pid, SIGKILL);
        killed_after[c.name] = reported;
        kills.erase(k);
        std::ofstream log(dir + "/kills.log", std::ios::app);
        log << absl::FormatTime("%Y%m%d %H:%M:%E6S", clock->Now(), absl::LocalTimeZone()) << " "
            << c.name << " after iteration " << reported << "\n";
      }
    }
    if (lost.empty() && reported + 1 < iterations && !g_interrupted.load()) {
      std::set<std::string> live;
      // Note [How a node ended] (local_processes.h): the newest process of
      // each name that ended, and how.
      std::map<std::string, const Child*> ended_child;
      std::map<std::string, std::string> ended;
      for (const Child& c : children) {
        if (!c.exited) {
          live.insert(c.name);
        } else {
          ended_child[c.name] = &c;
          ended[c.name] = DescribeEnd(c.status);
        }
      }
      LocalLayout hosts = layout;
      for (const auto& [name, stage] : replacements) hosts.push_back({name, {stage}});
      if (std::optional<LostStage> gone =
              StageLossMonitor(hosts).Check(live, killed_after, reported, ended)) {
        // The lost stage's nodes that ended by themselves: how, and their
        // logs' last lines, while the logs still exist.
        for (const auto& [name, st] : hosts) {
          if (std::find(st.begin(), st.end(), gone->stage) == st.end()) continue;
          if (killed_after.count(name) > 0 || ended_child.count(name) == 0) continue;
          std::printf("\n%s", DescribeNodeEnd(dir, *ended_child.at(name)).c_str());
        }
        std::fflush(stdout);
        absl::StatusOr<RestorePlan> plan = absl::FailedPreconditionError(absl::StrCat(
            "stage ", gone->stage, " was lost: no live replica is left (", gone->why,
            "); training stopped after iteration ", reported, " of ", iterations,
            generations ? absl::StrCat(" (", restores, " restores done, --max_restores=",
                                       max_restores, ")")
                        : " (no checkpoint generations: --checkpoint_every=0)"));
        if (generations && restores < max_restores) {
          // Paused: every node stops (their state rolls back with the
          // generation anyway); the generation is chosen once all are gone.
          std::printf("\ntraining paused: stage %d has no live replica (%s) after iteration %lld; "
                      "restoring it from the newest checkpoint generation\n",
                      gone->stage, gone->why.c_str(), static_cast<long long>(reported));
          paused_at = clock->SteadyNow();
          // Note [Lost disks] (peer_copies.h): the dead nodes' disks go too.
          if (lose_disks) {
            std::vector<std::string> dead;
            for (const auto& [name, st] : layout) {
              if (live.count(name) == 0) dead.push_back(name);
            }
            const int removed = LoseDisks(dir + "/checkpoints", dir + "/generations", dead,
                                          gone->stage);
            std::printf("lost disks: deleted %d checkpoint files and folders of %s and stage "
                        "%d's files in every generation\n",
                        removed, absl::StrJoin(dead, ", ").c_str(), gone->stage);
          }
          // Note [Checkpoint copies]: what the live peers hold of the stage,
          // fetched before they stop (over the state-transfer channel).
          PeerCopies copies;
          if (gossip && !tls && checkpoint_copies > 0) {
            std::map<std::string, std::string> live_addresses;
            for (const std::string& name : live) {
              if (addresses.count(name) > 0) live_addresses[name] = addresses.at(name);
            }
            // The run's swarm (Note [One swarm per run]), with no secret.
            copies = FetchPeerCopies(
                gone->stage, live_addresses, membership::DeriveSwarmId(swarm_name, ""),
                node::StateBytesBound(
                    static_cast<uint64_t>(flags.model.StageParameterCount(gone->stage))));
          }
          for (Child& c : children) {
            if (c.exited) continue;
            kill(c.pid, SIGKILL);
            struct rusage ru {};
            wait4(c.pid, &c.status, 0, &ru);
            RecordExit(ru, c);
            --alive;
          }
          generations->Poll();
          const std::vector<int64_t> repaired =
              RepairGenerations(dir + "/generations", generations->config_hash(), stages,
                                gone->stage, copies, keep_generations);
          plan = PlanRestore(dir + "/generations", generations->config_hash(), stages, *gone);
          peer_copy_holder.clear();
          if (plan.ok() &&
              std::find(repaired.begin(), repaired.end(), plan->resume_at) != repaired.end()) {
            peer_copy_holder = copies.at(plan->resume_at).holder;
            std::printf("stage %d at generation %lld comes from the checkpoint copy held by %s "
                        "(%zu copies fetched from live peers)\n",
                        gone->stage, static_cast<long long>(plan->resume_at),
                        peer_copy_holder.c_str(), copies.size());
          }
        }
        if (plan.ok()) {
          ++restores;
          SS_RETURN_IF_ERROR(SeedNodeCheckpoints(*plan, dir + "/checkpoints", layout));
          SS_RETURN_IF_ERROR(RewindProgress(
              progress, plan->resume_at,
              absl::StrCat(dir, "/progress.before-restore-", restores, ".jsonl")));
          ReadProgress(progress, points, rerouted);
          shown = -1;
          elapsed_before = points.empty() ? 0 : train_seconds(points.rbegin()->first,
                                                              points.rbegin()->second);
          resumed_at = plan->resume_at;
          for (const auto& [name, st] : layout) {
            Child c;
            c.name = name;
            SS_ASSIGN_OR_RETURN(c.pid, SpawnNode(dir, name, absl::StrCat(dir, "/", name, ".json")));
            children.push_back(c);
            ++alive;
          }
          restoring = *std::move(plan);
          replacements.clear();  // stopped with the rest; the layout restarts
          if (chaos) chaos->Reset(clock->SteadyNow());
        } else {
          lost = std::string(plan.status().message());
          std::printf("\n%s; stopping every node\n", lost.c_str());
          for (Child& c : children) {
            if (!c.exited) kill(c.pid, SIGINT);
          }
          stop_deadline = clock->SteadyNow() + kStopGrace;
        }
        continue;
      }
    }
    if (restoring && !points.empty() && points.rbegin()->first >= restoring->resume_at) {
      // The first iteration after the restore is reported: training resumed.
      const double pause_s = absl::ToDoubleSeconds(clock->SteadyNow() - paused_at);
      const std::string line = DescribeRestore(*restoring, pause_s);
      std::printf("\n%s\n", line.c_str());
      std::ofstream log(dir + "/recovery.jsonl", std::ios::app);
      log << nlohmann::json{{"stage", restoring->lost.stage},
                            {"lost_after_iteration", restoring->lost.after_iteration},
                            {"resumed_at_iteration", restoring->resume_at},
                            {"iterations_redone", restoring->iterations_redone()},
                            {"pause_s", pause_s},
                            {"from_peer_copy", peer_copy_holder},
                            {"skipped", restoring->generation.skipped}}
                 .dump()
          << "\n";
      restore_events.push_back({restoring->resume_at,
                                absl::StrCat("stage ", restoring->lost.stage, " restored")});
      restoring.reset();
    }
    if (clock->SteadyNow() > stop_deadline) {
      for (Child& c : children) {
        if (c.exited) continue;
        std::printf("\n%s did not stop within %s; SIGKILL\n", c.name.c_str(),
                    absl::FormatDuration(kStopGrace).c_str());
        kill(c.pid, SIGKILL);
      }
      stop_deadline = absl::InfiniteDuration();
    }
    if (gossip && join_at >= 0 && joiner_spawned == absl::InfiniteDuration() &&
        reported >= join_at) {
      std::printf("\nstarting joiner j0 after iteration %lld\n", static_cast<long long>(reported));
      Child c;
      c.name = "j0";
      SS_ASSIGN_OR_RETURN(c.pid, SpawnNode(dir, c.name, write_config(c.name, {})));
      children.push_back(c);
      ++alive;
      joiner_spawned = clock->SteadyNow();
      joined_at_iteration = reported;
    }
    if (joiner_spawned != absl::InfiniteDuration() && joined_after == absl::InfiniteDuration()) {
      std::ifstream in(dir + "/join.jsonl");
      if (std::getline(in, join_line)) joined_after = clock->SteadyNow() - joiner_spawned;
    }
    // Note [Chaos waits for progress]: the newest iteration in which a
    // micro-batch finished (the data nodes go on with empty ones while a
    // stage cannot serve).
    if (chaos) {
      for (auto it = points.rbegin(); it != points.rend() && it->first > last_trained; ++it) {
        if (it->second.completed == 0) continue;
        last_trained = it->first;
        chaos->SwarmAdvanced(clock->SteadyNow());
        break;
      }
    }
    // Chaos starts once a generation can exist (a stage lost before the
    // first one cannot be restored) and ends 10 iterations before the end.
    if (chaos && !restoring && reported >= 2 * node_checkpoint_every &&
        reported + 10 < iterations &&
        !g_interrupted.load() && lost.empty()) {
      // The latest process of each name (a restore starts new ones).
      std::map<std::string, Child*> latest;
      for (Child& c : children) latest[c.name] = &c;
      std::vector<ChaosNode> nodes;
      for (const auto& [name, c] : latest) {
        auto st = stage_of.find(name);
        auto rp = replacements.find(name);
        if (st == stage_of.end() && rp == replacements.end()) continue;  // data nodes, j0
        // Note [Survivable chaos]: a replacement serves once it trained.
        bool serving = !c->exited;
        if (serving && rp != replacements.end() && serving_replacements.count(name) == 0) {
          serving = ReportedAnIteration(dir, name);
          if (serving) serving_replacements.insert(name);
        }
        if (serving && catching_up.count(name) > 0) {
          serving = ReportedAnIteration(dir, name);  // its log since the restart
          if (serving) catching_up.erase(name);
        }
        nodes.push_back({name, st != stage_of.end() ? st->second : rp->second, !c->exited,
                         serving});
      }
      for (const ChaosAction& a : chaos->Step(clock->SteadyNow(), nodes)) {
        Child* c = a.name.empty() ? nullptr : latest[a.name];
        if (a.kind == ChaosAction::kRespawn && !a.name.empty()) {
          // Note [Restart on own disk]: the same config, identity and
          // checkpoints; the old process's logs are kept beside.
          const int restart = chaos->restarts();
          for (const char* ext : {".out", ".err"}) {
            const std::string log = absl::StrCat(dir, "/logs/", a.name, ext);
            std::rename(log.c_str(), absl::StrCat(dir, "/logs/", a.name, ".before-restart-",
                                                  restart, ext).c_str());
          }
          std::printf("\nchaos: restarting %s on its own disk (stage %d) after iteration %lld\n",
                      a.name.c_str(), a.stage, static_cast<long long>(reported));
          Child child;
          child.name = a.name;
          SS_ASSIGN_OR_RETURN(child.pid,
                              SpawnNode(dir, a.name, absl::StrCat(dir, "/", a.name, ".json")));
          children.push_back(child);
          ++alive;
          catching_up.insert(a.name);
          std::ofstream log(dir + "/chaos.log", std::ios::app);
          log << absl::FormatTime("%Y%m%d %H:%M:%E6S", clock->Now(), absl::LocalTimeZone())
              << " restarting " << a.name << " after iteration " << reported << "\n";
          continue;
        }
        if (a.kind == ChaosAction::kRespawn) {
          const std::string name = absl::StrCat("c", chaos->respawns());
          std::printf("\nchaos: starting %s (joins stage %d) after iteration %lld\n",
                      name.c_str(), a.stage, static_cast<long long>(reported));
          Child child;
          child.name = name;
          SS_ASSIGN_OR_RETURN(child.pid,
                              SpawnNode(dir, name, write_config(name, {a.stage}, true)));
          children.push_back(child);
          ++alive;
          replacements[name] = a.stage;
          continue;
        }
        if (c == nullptr || c->exited) continue;
        const char* what = a.kind == ChaosAction::kKill    ? "killing"
                           : a.kind == ChaosAction::kStall ? "stalling (SIGSTOP)"
                                                           : "resuming (SIGCONT)";
        std::printf("\nchaos: %s %s after iteration %lld\n", what, a.name.c_str(),
                    static_cast<long long>(reported));
        kill(c->pid, a.kind == ChaosAction::kKill    ? SIGKILL
                     : a.kind == ChaosAction::kStall ? SIGSTOP
                                                     : SIGCONT);
        if (a.kind == ChaosAction::kKill) killed_after[a.name] = reported;
        std::ofstream log(dir + "/chaos.log", std::ios::app);
        log << absl::FormatTime("%Y%m%d %H:%M:%E6S", clock->Now(), absl::LocalTimeZone()) << " "
            << what << " " << a.name << " after iteration " << reported << "\n";
      }
    } else if (chaos && !chaos->stalled().empty()) {
      // No stall outlives the chaos window: the run must be able to end.
      for (Child& c : children) {
        if (c.name == chaos->stalled() && !c.exited) kill(c.pid, SIGCONT);
      }
      chaos->Reset(clock->SteadyNow());
    }
    if (!points.empty() && reported != shown) {
      if (clock->SteadyNow() - last_new_iteration > longest_wait) {
        longest_wait = clock->SteadyNow() - last_new_iteration;
        longest_wait_after = shown;
      }
      last_new_iteration = clock->SteadyNow();
      shown = reported;
      // Training throughput since the first iteration (daemon clocks).
      PrintProgressLine(reported, iterations, points, train_seconds(reported, points.rbegin()->second),
                        rerouted);
    }
    if (g_interrupted.load() && !interrupted_sent) {
      std::printf("\ninterrupted: asking every node to finish its iteration and checkpoint\n");
      for (Child& c : children) {
        if (!c.exited) kill(c.pid, SIGINT);  // stop (SIGTERM would be a drain)
      }
      interrupted_sent = true;
    }
    if (g_signals.load() > 1 && !killed_all) {
      std::printf("\nsecond signal: ending every node at once (no checkpoint)\n");
      for (Child& c : children) {
        if (!c.exited) kill(c.pid, SIGKILL);
      }
      killed_all = true;
    }
    if (snapshots) snapshots->Poll();
    if (generations) generations->Poll();
    clock->SleepFor(absl::Milliseconds(200));
  }
  std::printf("\n");
  if (snapshots) {
    snapshots->Poll();  // the final checkpoints
    std::printf("eval snapshots: %zu steps in %s/evals (skipswarm eval --checkpoint=DIR)\n",
                snapshots->taken().size(), dir.c_str());
  }
  ReadProgress(progress, points, rerouted);
  std::vector<RunEvent> events;
  for (const auto& [name, it] : killed_after) events.push_back({it, name + " killed"});
  if (joined_at_iteration >= 0) events.push_back({joined_at_iteration, "j0 started"});
  events.insert(events.end(), restore_events.begin(), restore_events.end());
  WriteLossSummary(dir, points, events);
  if (killed_all) {
    return absl::AbortedError(
        "a second signal ended every node at once; their checkpoints are the last periodic ones");
  }
  if (!lost.empty()) return absl::FailedPreconditionError(lost);
  const double wall_s =
      points.empty() ? 0 : train_seconds(points.rbegin()->first, points.rbegin()->second);
  int failed = PrintRunSummary(dir, children, points, wall_s);
  if (!swarm.sdp.empty()) {
    // Note [Mixed local swarm]: an SDP node exchanges no pipeline frame.
    const std::map<std::string, NodeFrames> frames = ReadNodeFrames(progress);
    std::string sdp_line, pipeline_line;
    for (const auto& [name, f] : frames) {
      absl::StrAppend(swarm.sdp.count(name) > 0 ? &sdp_line : &pipeline_line, " ", name, " ",
                      f.sent, "/", f.received);
    }
    std::printf("pipeline frames sent/received, SDP nodes:%s\n", sdp_line.c_str());
    if (!pipeline_line.empty()) {
      std::printf("pipeline frames sent/received, pipeline nodes:%s\n", pipeline_line.c_str());
    }
  }
  std::printf("longest wait for the next iteration: %.1f s (wall, after iteration %lld; restores "
              "included)\n",
              absl::ToDoubleSeconds(longest_wait), static_cast<long long>(longest_wait_after));
  if (chaos) {
    // A replacement whose stage lost its last source while it joined
    // cannot enter (its error names why); chaos made that, not a fault.
    int replacements_failed = 0;
    for (const Child& c : children) {
      const bool ok = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
      const bool killed = WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL;
      if (!ok && !killed && absl::StartsWith(c.name, "c")) ++replacements_failed;
    }
    failed -= replacements_failed;
    std::printf("chaos: %d kills, %d stalls, %d replacements started (%d could not join), %d "
                "killed nodes restarted on their own disks, %d stage restores; %d kills held "
                "back (every candidate was its stage's last serving replica); %d kills or stalls "
                "held while the swarm did not advance\n",
                chaos->kills(), chaos->stalls(), chaos->respawns() - chaos->restarts(),
                replacements_failed, chaos->restarts(), restores, chaos->spared(),
                chaos->held());
  }
  if (joined_after != absl::InfiniteDuration()) {
    std::printf("joiner j0: %s\njoiner j0: spawn -> first micro-batch done (wall, incl. process "
                "start and libtorch load) %.3f s\n",
                join_line.c_str(), absl::ToDoubleSeconds(joined_after));
  }
  if (wan_plan && wan_plan->after_run && failed == 0) wan_plan->after_run();
  if (failed > 0) return absl::InternalError(absl::StrCat(failed, " node(s) failed"));
  // Never a silent success: the last iteration must have trained with a
  // finite loss.
  return CheckTrained(points, iterations, g_interrupted.load());
}

}  // namespace

common::cli::Command LocalCommand(LocalSwarmPlanner wan) {
  common::cli::Command c{
      "local", "Train with a real swarm of node processes on this machine",
      "skipswarm local [--data_nodes=2 --replicas=2 --iterations=200] "
      "[--planner=skippipe --path_length=0] [--kill=NAME@ITER] [model flags]\n"
      "       skipswarm local --sdp=forward|backward [--sdp_workers=4 --sdp_keep=0.5] "
      "(one data node per subnetwork, model/sdp_assignment.h) [model flags]",
      {"launcher/local_command.cc", model::kModelFlagsFile, model::kSdpFlagsFile},
      [wan](const std::vector<std::string>&) {
        absl::Status s = Run(wan);
        if (!s.ok()) {
          std::cerr << "skipswarm local: " << s << "\n";
          return 1;
        }
        return 0;
      }};
  c.flag_prefix = "local_";  // Note [Short flag names]: --iterations, --replicas
  c.uses_blas = true;  // Note [BLAS core]: its children inherit the choice.
  return c;
}

}  // namespace skipswarm::launcher

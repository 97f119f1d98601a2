#include "cli/node_command.h"

#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <iostream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cli/gossip_command.h"
#include "cli/manifest_step.h"
#include "common/status_macros.h"
#include "model/build_info.h"
#include "model/device_memory.h"
#include "model/memory_estimate.h"
#include "model/model_flags.h"
#include "model/sdp_flags.h"
#include "node/daemon/reporting/daemon_reporting.h"
#include "node/daemon/stack/swarm_spec.h"
#include "node/daemon/stack/torch_backend.h"
#include "node/daemon/static_swarm/node_daemon.h"
#include "node/transport/malloc_tuning.h"
#include "node/transport/shaping_flags.h"

ABSL_FLAG(std::string, name, "", "This node's name: its entry in --swarm.");
ABSL_FLAG(std::string, swarm, "",
          "Every node of the swarm, comma-separated NAME/STAGES/PIPELINE_ADDR/GROUP_ADDR[/NODE_ID] "
          "entries (STAGES like 0 or 1+2; NODE_ID: the node's id from `skipswarm keygen`, "
          "required with --key_file); the same list on every node. Needs --key_file "
          "(mutual TLS) or --insecure.");
// Shared with the gossip node (defined in gossip_command.cc).
ABSL_DECLARE_FLAG(std::string, node_key_file);
ABSL_DECLARE_FLAG(bool, insecure);
ABSL_DECLARE_FLAG(std::string, join);
ABSL_FLAG(std::string, listen, "",
          "HOST:PORT this node listens on: every gRPC service (pipeline, replica group, gossip, "
          "state transfer, health) on one port; default 127.0.0.1:0 (any free port). With a "
          "static --swarm list: the pipeline address (default: this node's entry).");
ABSL_FLAG(std::string, group_listen, "",
          "Static --swarm lists only: the replica-averaging (StageService) listen address "
          "(default: this node's entry).");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus /metrics on 127.0.0.1 at this port (0: any; -1: off).");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve /metrics on HOST:PORT instead (e.g. 0.0.0.0:9464 for a scraper on another "
          "host; [::]:9464 for IPv6); overrides --metrics_port.");
ABSL_FLAG(int, memory_slots, 4, "Micro-batches admitted between forward and backward.");
ABSL_FLAG(int, node_mbs, 4, "Micro-batches each data node injects per iteration.");
ABSL_FLAG(int64_t, node_iterations, 100, "Iterations to train (also the LR schedule length).");
ABSL_FLAG(int64_t, node_checkpoint_every, 0,
          "Checkpoint every N iterations into --checkpoint_dir (0: only at the end).");
ABSL_FLAG(std::string, swarm_id, "skipswarm", "Swarm id; frames of other swarms are refused.");
ABSL_FLAG(std::string, node_planner, "skippipe",
          "Route planner: skippipe (default; full in-order routes at --path_length=0, "
          "skip routes that may swap stages below it), inorder, pipeline, noskip, random.");
ABSL_FLAG(bool, node_planner_link_costs, true,
          "Scheduler planners: hop costs from the measured links gossip reports (RTT, "
          "throughput); false: one uniform estimate per hop (for comparisons).");
ABSL_FLAG(int, node_path_length, 0,
          "Stages each micro-batch visits, counting stage 0 (skipping planners); 0: all.");
ABSL_FLAG(std::string, node_record_routes, "",
          "Data nodes: append every planned route to this file (model/route_record.h), for "
          "`skipswarm train-ref --routes_file`.");
ABSL_FLAG(std::string, progress_file, "", "Append one JSON line per iteration (data nodes).");
ABSL_FLAG(int, startup_timeout_s, 120, "Seconds to wait for every member to answer.");
// Experiments with WAN emulation (shaping flags: node/transport/shaping_flags.h).
ABSL_FLAG(double, node_timed_forward_s, 0,
          "Experiments: > 0 replaces libtorch with timed compute (forward seconds per MB, "
          "divided by --wan_time_scale; backward 1.5x) and dummy payloads. Static --swarm "
          "lists only (refused with --join / --host_stages).");
ABSL_FLAG(int64_t, node_timed_payload_bytes, 1 << 20,
          "Timed compute: bytes of each activation / gradient frame.");
ABSL_FLAG(std::string, node_routes, "",
          "Replay the routes in this file every iteration instead of planning "
          "(node/daemon/stack/routes_file_planner.h). Static --swarm lists only: the file names "
          "nodes by their --swarm names; a gossip node (--join / --host_stages) refuses it.");

// 6, not RobustOptions' 3: honest replicas of the tiny model's last stage
// (few visits, heavy-tailed gradients) were 3.4-4.7x the median distance
// now and then; a sign-flipped x8 liar was 13-23x (tests/adversarial/
// README.md, "Poisoning replica").
ABSL_FLAG(double, avg_outlier_factor, 6.0,
          "Centered clipping of this node's replica averaging (from 3 replicas): a replica's "
          "gradient farther from the group's coordinate-wise median than this many times the "
          "median distance is pulled in to it (0: off; Note [Robust averaging]). Subnetwork (SDP) "
          "members are judged only among members of the same subnetwork, pipeline hosts among "
          "pipeline hosts (Note [Robust averaging across subnetworks]).");
ABSL_FLAG(int, avg_ban_after, 3,
          "Ban a replica from this node's averaging once its gradient part was left out as "
          "non-finite or pulled in as an outlier in this many rounds in a row, or once its "
          "offences, each decayed by 0.92 a round, add up to this many plus 0.5 (0: never; "
          "Note [Group bans], Note [Offences in a row]).");

ABSL_FLAG(double, avg_newcomer_weight, 0,
          "Open swarms with --probation_iterations: the weight (0 to 1) of a member on "
          "probation in this node's replica averaging; the rest of its visits' share is the "
          "trusted replicas' mean (Note [Newcomer weight]). 0: a newcomer cannot move the "
          "average until it is vouched for.");

ABSL_FLAG(double, verify_rate, 0,
          "Verified compute: the share (0 to 1) of forward frames to a member on probation "
          "(open swarms with --probation_iterations), and a quarter of it of those to a "
          "trusted member (Note [Trusted disputes]), that this node also sends, verify-only, to "
          "a trusted replica of the same stage; the hop after compares the two outputs (Note "
          "[Sending checks]). 0 (default): off, until a real-process swarm has priced it "
          "(tests/adversarial/README.md, \"Verified compute\"; at 0.1 in process: one extra "
          "stage forward per checked micro-batch on the verifier).");
ABSL_FLAG(uint64_t, verify_seed, 0,
          "Seed of --verify_rate's sampling and per-check seeds; 0: drawn at start (logged). "
          "A checked replica that knew it could tell which of its micro-batches are checked.");
ABSL_FLAG(bool, sign_frames, false,
          "Checkable evidence (gossip swarms): every member signs a commitment (SHA-256 of the "
          "input and output, ed25519) on every forward frame it produces past stage 0, checks "
          "the commitments that reach it against the senders' record keys, and refuses frames "
          "without one from any member; records that do not sign are refused (Note [Checkable "
          "evidence]). Measured ~1.5 ms per frame of the default model, ~1.2% of a stage's "
          "forward (tests/adversarial/README.md). Founder: written into the swarm manifest; "
          "joiners take it from there (a joiner's flag must agree). Off by default.");
ABSL_FLAG(double, verify_exclude_at, 3,
          "Strikes (a mismatch adds 1, a match takes 0.25 off) at which this node condemns a "
          "checked replica: leaves it out of its routes and names it in its record's bans "
          "(Note [Verify trust]); <= 0: never.");

namespace skipswarm::cli {
namespace {

using node::NodeDaemon;
using node::NodeDaemonOptions;
using node::TorchNodeBackend;
using node::ShapingFlags;

std::atomic<bool> g_stop{false};  // main-level: set by the signal handler

// The first SIGINT / SIGTERM stops after the current iteration with a
// checkpoint; a second one exits at once (async-signal-safe: _exit).
void OnSignal(int sig) {
  if (g_stop.exchange(true)) _exit(128 + sig);
}

// Note [Daemon CPU]: process-wide settings that cut the CPU a daemon spends
// beside its compute (tools/experiments/cpu_per_token.sh measures it).
//  * glibc hands every allocation above its mmap threshold back to the
//    kernel on free, so each activation, frame chunk and gradient vector
//    page-faulted fresh zeroed pages in again (~12% of a node's CPU);
//    node::TuneMallocForLargeFrames keeps them in the heap.
//  * Debian's Abseil is built without NDEBUG, so every absl::Mutex lock
//    ran deadlock detection (a global graph of lock orders); tests keep it.
absl::Status TuneDaemonProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return node::TuneMallocForLargeFrames(/*trim_threshold=*/size_t{64} << 20);
}

absl::Status Run(const NodeBackendWrapper& wrap) {
  const node::NodeBackend backend = wrap ? wrap(TorchNodeBackend()) : TorchNodeBackend();
  SS_RETURN_IF_ERROR(TuneDaemonProcess());
  NodeDaemonOptions o;
  // No --swarm list: a gossip swarm (--join, or a first node), gossip_command.h.
  const bool gossip = absl::GetFlag(FLAGS_swarm).empty();
  // Note [Stopping while joining] (gossip_daemon_join.cc): from here on a
  // signal is a stop the daemon honours, not the default action.
  if (gossip) InstallGossipSignalHandlers();
  // A joiner's model comes from the swarm manifest (manifest_step.h), which
  // is checked before the flags' own combination is.
  const bool joiner = gossip && !absl::GetFlag(FLAGS_join).empty();
  SS_ASSIGN_OR_RETURN(o.model, model::ReadModelFlags(/*validate_model=*/!joiner));
  o.name = absl::GetFlag(FLAGS_name);
  if (o.name.empty()) return absl::InvalidArgumentError("--name is required");
  o.memory_slots = absl::GetFlag(FLAGS_memory_slots);
  if (o.memory_slots < 1) return absl::InvalidArgumentError("--memory_slots must be >= 1");
  o.mbs_per_iteration = absl::GetFlag(FLAGS_node_mbs);
  if (o.mbs_per_iteration < 1) return absl::InvalidArgumentError("--mbs must be >= 1");
  o.iterations = absl::GetFlag(FLAGS_node_iterations);
  if (o.iterations < 1) return absl::InvalidArgumentError("--iterations must be >= 1");
  o.startup_timeout = absl::Seconds(absl::GetFlag(FLAGS_startup_timeout_s));
  // Read before the manifest step: a founder writes it into the manifest,
  // a joiner's must agree with it (Note [Checkable evidence]).
  o.sign_frames = absl::GetFlag(FLAGS_sign_frames);
  // The founder signs the swarm manifest; a joiner fetches it and takes
  // the model from it, before any state moves.
  SwarmManifestStep manifest;
  if (gossip) {
    SS_ASSIGN_OR_RETURN(manifest, PrepareSwarmManifest(&o));
  }
  {
    // Note [Stage memory estimate] (model/memory_estimate.cc): refuse at start,
    // with the numbers, when the device cannot hold the largest stage.
    model::MemoryEstimateOptions mem;
    mem.samples_per_mb = o.model.samples_per_mb;
    mem.bf16_activations = o.model.runtime.bf16_autocast;
    const model::StageMemoryEstimate e = model::EstimateLargestStage(o.model.model, mem);
    const std::string device = o.model.runtime.device;
    const int64_t free_bytes = model::FreeDeviceMemoryBytes(device);
    SS_RETURN_IF_ERROR(model::CheckStageFits(e, free_bytes, device));
    // Note [Memory slots from the estimate]: as many micro-batches in flight
    // as fit beside one stage, at most --memory_slots.
    const model::MemoryFit fit = model::FitInMemory(e, free_bytes, /*hosted=*/1, o.memory_slots);
    LOG(INFO) << "memory estimate, largest " << model::DescribeStageMemory(e) << "; free on "
              << device << ": "
              << (free_bytes < 0 ? std::string("unknown")
                                 : absl::StrCat(model::FormatBytes(free_bytes), ", room for ",
                                                fit.stages, " stage(s) with one micro-batch each"))
              << "; memory slots " << std::min(fit.slots, o.memory_slots) << " (--memory_slots="
              << o.memory_slots << ")";
    if (fit.slots >= 1 && fit.slots < o.memory_slots) {
      LOG(WARNING) << "--memory_slots=" << o.memory_slots << " does not fit on " << device
                   << ": " << fit.slots << " slot(s) of "
                   << model::FormatBytes(e.activation_bytes_per_mb) << " each beside the stage's "
                   << model::FormatBytes(e.weight_bytes + e.gradient_bytes + e.optimizer_bytes)
                   << "; using " << fit.slots;
      o.memory_slots = fit.slots;
    }
  }
  if (!gossip) {
    SS_ASSIGN_OR_RETURN(o.swarm, node::ParseSwarmSpec(absl::GetFlag(FLAGS_swarm),
                                                o.model.model.num_stages, o.memory_slots));
  }
  o.listen = absl::GetFlag(FLAGS_listen);
  o.group_listen = absl::GetFlag(FLAGS_group_listen);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    SS_RETURN_IF_ERROR(ParseMetricsListen(absl::GetFlag(FLAGS_metrics_listen), &o));
  }
  o.libtorch_version = model::LibtorchVersion();
  o.checkpoint_every = absl::GetFlag(FLAGS_node_checkpoint_every);
  o.swarm_id = absl::GetFlag(FLAGS_swarm_id);
  o.progress_file = absl::GetFlag(FLAGS_progress_file);
  o.record_routes = absl::GetFlag(FLAGS_node_record_routes);
  o.planner = absl::GetFlag(FLAGS_node_planner);
  {
    bool auto_role = false;  // --sdp=auto: RunGossipNode reads it again
    SS_ASSIGN_OR_RETURN(model::SdpOptions sdp, model::ReadSdpFlags(&auto_role));
    if (auto_role && !joiner) {
      return absl::InvalidArgumentError(
          "--sdp=auto chooses a joiner's role in a running gossip swarm: it needs --join and "
          "no --swarm list");
    }
    o.sdp = sdp.mode;
    // A subnetwork's micro-batch holds a memory slot per stage it visits,
    // all on this node (backward masking: every stage).
    if (o.sdp != model::SdpMode::kOff && o.memory_slots < o.model.model.num_stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sdp=", model::SdpModeName(o.sdp), " runs each micro-batch's whole route here: "
          "pass --memory_slots >= ", o.model.model.num_stages, " (one per stage)"));
    }
  }
  o.path_length = absl::GetFlag(FLAGS_node_path_length);
  o.outlier_factor = absl::GetFlag(FLAGS_avg_outlier_factor);
  o.ban_after = absl::GetFlag(FLAGS_avg_ban_after);
  if (!(o.outlier_factor == 0 || o.outlier_factor >= 1) || o.ban_after < 0) {
    return absl::InvalidArgumentError(
        "--avg_outlier_factor must be 0 (off) or >= 1, --avg_ban_after >= 0");
  }
  o.newcomer_weight = absl::GetFlag(FLAGS_avg_newcomer_weight);
  if (!(o.newcomer_weight >= 0 && o.newcomer_weight <= 1)) {
    return absl::InvalidArgumentError("--avg_newcomer_weight must be between 0 and 1");
  }
  o.verify_rate = absl::GetFlag(FLAGS_verify_rate);
  if (!(o.verify_rate >= 0 && o.verify_rate <= 1)) {
    return absl::InvalidArgumentError("--verify_rate must be between 0 and 1");
  }
  o.verify_seed = absl::GetFlag(FLAGS_verify_seed);
  if (o.verify_seed == 0) o.verify_seed = absl::Uniform<uint64_t>(absl::BitGen(), 1, ~0ull);
  if (o.verify_rate > 0) {
    LOG(INFO) << "verify_rate " << o.verify_rate << ", verify_seed " << o.verify_seed;
  }
  o.verify_exclude_at = absl::GetFlag(FLAGS_verify_exclude_at);
  o.planner_link_costs = absl::GetFlag(FLAGS_node_planner_link_costs);
  // Bandwidth caps apply in both modes (they were silently ignored with --join).
  SS_ASSIGN_OR_RETURN(ShapingFlags shaping, node::ReadShapingFlags());
  o.wan.wan_table = shaping.wan_table;
  o.wan.time_scale = shaping.time_scale;
  o.wan.max_upload_bytes_per_second = shaping.max_upload_bytes_per_second;
  o.wan.max_sync_upload_bytes_per_second = shaping.max_sync_upload_bytes_per_second;
  o.wan.max_download_bytes_per_second = shaping.max_download_bytes_per_second;
  // Read before choosing the mode: a gossip node refuses the static-list-only
  // ones (CheckGossipModeOptions) instead of ignoring them.
  o.wan.timed_forward_s = absl::GetFlag(FLAGS_node_timed_forward_s);
  o.wan.timed_payload_bytes =
      static_cast<uint64_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_node_timed_payload_bytes)));
  o.wan.routes_file = absl::GetFlag(FLAGS_node_routes);
  if (gossip) return RunGossipNode(o, &manifest, backend);
  o.key_file = absl::GetFlag(FLAGS_node_key_file);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  SS_ASSIGN_OR_RETURN(auto daemon, NodeDaemon::Create(o, backend));
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  return daemon->Run(&g_stop);
}

}  // namespace

common::cli::Command NodeCommand(NodeBackendWrapper wrap) {
  common::cli::Command c{"node", "Run one swarm daemon (hosts stages, trains with its peers)",
          "skipswarm node --name=N --host_stages=S [--join=HOST:PORT,...] [--insecure|--key_file=F] "
          "[model flags]\n       skipswarm node drain --control=127.0.0.1:PORT [--force]\n       "
          "skipswarm node pause|resume --control=127.0.0.1:PORT [--force]\n       "
          "skipswarm node --config=FILE   (or --name=N --swarm=... --key_file=F|--insecure "
          "and model flags) [--max_upload_mbps=X --max_download_mbps=Y]",
          {"cli/node_command.cc", kGossipFlagsFile, kManifestFlagsFile, model::kModelFlagsFile,
           node::kShapingFlagsFile, model::kSdpFlagsFile},
          [wrap](const std::vector<std::string>& args) {
            if (!args.empty() && args[0] == "drain") return RunDrainCommand();
            if (!args.empty() && (args[0] == "pause" || args[0] == "resume")) {
              return RunPauseCommand(args[0] == "resume");
            }
            absl::Status s = Run(wrap);
            if (!s.ok()) {
              std::cerr << "skipswarm node: " << s << "\n";
              return 1;
            }
            return 0;
          }};
  c.flag_prefix = "node_";  // Note [Short flag names]: --iterations, --key_file
  c.help_groups = {
      {"network",
       {"join", "write_swarm_file", "listen", "advertise", "group_listen", "control_port", "quiet_hours", "pause_on_gpu_contention", "gpu_contention_pause_s",
        "gpu_contention_resume_s", "metrics_port", "metrics_listen", "swarm", "swarm_name", "swarm_secret",
        "swarm_secret_file", "revocations_file",
        "node_key_file", "create_key", "insecure", "max_upload_mbps", "max_download_mbps",
        "max_sync_upload_mbps"}},
      {"model", {"sdp", "sdp_keep"}, {model::kModelFlagsFile}},
      // Measurement and research switches; `--helpfull` lists them.
      {"experiment",
       {"node_planner", "node_planner_link_costs", "node_path_length", "node_record_routes",
        "node_routes", "node_timed_forward_s", "node_timed_payload_bytes", "wan_table",
        "wan_time_scale", "fixed_compute_speed", "join_report", "entry_lead", "rebalance_min_gain",
        "progress_file"},
       {},
       /*hidden=*/true},
      // Earlier per-service addresses (Note [One port]); they still work.
      {"deprecated", {"gossip_listen", "state_listen", "advertise_host"}, {}, /*hidden=*/true},
  };
  c.uses_blas = true;
  return c;
}

}  // namespace skipswarm::cli

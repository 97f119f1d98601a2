#include "cli/gossip_command.h"

#include <glog/logging.h>

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/averaging_options.h"
#include "model/sdp_flags.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/gossip/nvidia_smi.h"

ABSL_FLAG(std::string, join, "",
          "Gossip swarm: bootstrap peers host:port[,host:port...] (IPv4 or [IPv6]); empty "
          "(and no --swarm): start a new swarm.");
ABSL_FLAG(std::string, host_stages, "",
          "Stages this node hosts, like 0 or 1+2. Founders need it; a joiner without it asks "
          "the scheduler's allocation.");
ABSL_FLAG(int, expect_members, 0,
          "Founders: start training once this many members (this one included) are live "
          "and every stage has a replica. 0 with --join: join a swarm that is training.");
ABSL_FLAG(std::string, advertise, "",
          "HOST:PORT peers dial to reach this node (its record's address; every service is on "
          "it), port 0 meaning the bound port. 'auto' (or auto:PORT, for a router that forwards "
          "another port): the public host that 2 or more peers see this node's connections "
          "come from, with the listen port, if they can dial it back there (behind a "
          "port-forwarding NAT). Default: --listen, with 0.0.0.0 / [::] replaced by this "
          "host's address towards the first --join peer; a --join node listening on 0.0.0.0 / "
          "[::] uses auto (docs/OPERATING.md, NAT).");
// Deprecated: one port per daemon (--listen / --advertise).
ABSL_FLAG(std::string, gossip_listen, "", "Deprecated: use --listen (every service, one port).");
ABSL_FLAG(std::string, state_listen, "", "Deprecated and ignored: state transfer is on --listen.");
ABSL_FLAG(std::string, advertise_host, "",
          "Deprecated: use --advertise=HOST:PORT (HOST:0 means the bound port).");
ABSL_FLAG(std::string, node_key_file, "",
          "Ed25519 key file (must exist unless --create_key); the node id is its public key's "
          "hash.");
ABSL_FLAG(bool, create_key, false,
          "Create --key_file (0600) if it does not exist: a new node identity.");
ABSL_FLAG(bool, insecure, false,
          "Plain-text gossip without a key file (local test swarms only).");
ABSL_FLAG(std::string, swarm_name, "skipswarm", "Swarm name (part of the swarm id).");
ABSL_FLAG(std::string, swarm_secret, "",
          "Private swarm secret: nodes without it cannot join (never sent). On the command "
          "line it is visible to every local user: prefer --swarm_secret_file or "
          "$SKIPSWARM_SWARM_SECRET (this flag warns).");
ABSL_FLAG(std::string, revocations_file, "",
          "The swarm's revocation list (written by `skipswarm revoke`): loaded at start and "
          "re-read when it changes; the node spreads it and every member evicts and refuses "
          "the nodes and invites it names. A missing file is an empty list.");
ABSL_FLAG(std::string, swarm_secret_file, "",
          "File holding the private swarm secret (surrounding whitespace ignored; keep it "
          "chmod 600). Or set $SKIPSWARM_SWARM_SECRET.");
ABSL_FLAG(int, checkpoint_copies, 2,
          "Note [Checkpoint copies]: at every --checkpoint_every boundary each stage's "
          "checkpoint is also pulled by this many nodes that do not host it (kept in "
          "CHECKPOINT_DIR/NAME-copies/ and served to restorers); 0: none.");
ABSL_FLAG(int, keep_copies, 3, "Checkpoint copies kept per stage by a holder (>= 1).");
ABSL_FLAG(int, entry_lead, 1,
          "A joiner enters at least this many (>= 1) iterations after its source replica's "
          "current one; more when iterations are shorter than ~0.5 s.");
ABSL_FLAG(bool, force, false,
          "Leave (SIGTERM, drain) even as the last live replica of a stage.");
ABSL_FLAG(int, control_port, 0,
          "NodeControl (drain, pause, resume) on 127.0.0.1:PORT (0: any free port, printed; -1: off).");
ABSL_FLAG(std::string, control, "",
          "`skipswarm node drain|pause|resume`: the node's control address.");
ABSL_FLAG(std::string, quiet_hours, "",
          "HH:MM-HH:MM in local time (e.g. 22:00-07:00): the node pauses every day in this "
          "window (stays a member, takes no new micro-batches) and resumes after it; "
          "`skipswarm node resume` lifts one night. Empty: never.");
ABSL_FLAG(bool, pause_on_gpu_contention, false,
          "Note [GPU contention]: pause (as `skipswarm node pause`) while another process holds "
          "memory on this node's GPU for --gpu_contention_pause_s, resume once it has been gone "
          "for --gpu_contention_resume_s. Watches with nvidia-smi; needs --device=cuda[:N] "
          "(with a CPU device it logs why and stays off).");
ABSL_FLAG(double, gpu_contention_pause_s, 10,
          "--pause_on_gpu_contention: seconds another process must hold the GPU before the node "
          "pauses.");
ABSL_FLAG(double, gpu_contention_resume_s, 60,
          "--pause_on_gpu_contention: seconds the GPU must be free of other processes before the "
          "node resumes.");
ABSL_FLAG(int, rebalance_every, 0,
          "Every N iterations a one-stage relay checks the stage balance rule and moves to the "
          "bottleneck stage when the swarm's throughput rises by --rebalance_min_gain (0: off).");
ABSL_FLAG(int, relay_slots, 16,
          "Outbound-only members (behind NAT) this node relays connections for, at most "
          "(0: none).");
ABSL_FLAG(int, relays, 2,
          "Behind NAT: relays this node keeps attached (reachable members that carry "
          "connections to it).");
ABSL_FLAG(double, rebalance_min_gain, 0.2,
          "Relative bottleneck-throughput gain a stage move must bring (the hysteresis).");
ABSL_FLAG(double, fixed_compute_speed, 0,
          "> 0: publish this many seconds per layer per sample as this node's speed instead of "
          "the measured one (emulating heterogeneous nodes).");
ABSL_FLAG(double, alone_timeout_s, 120,
          "While training, stop once no other member has been live in this node's view for "
          "this long (Note [Alone after the swarm]): exit 0 without a checkpoint when another "
          "data node left after the last iteration, else a checkpoint and a non-zero exit "
          "(0: never).");
ABSL_FLAG(std::string, join_report, "",
          "A joiner appends its time-to-first-useful-work breakdown (JSON line) here.");

namespace skipswarm::cli {
namespace {

using node::DaemonSignals;
using node::GossipDaemon;
using node::GossipDaemonOptions;
using node::SwarmMembershipOptions;

DaemonSignals* g_signals = nullptr;  // main-level: set by the signal handlers

std::atomic<int> g_signal_count{0};  // main-level: SIGINT and SIGTERM together

// Note [Stopping] (gossip_daemon.cc): the first signal stops with a
// checkpoint; a second one exits at once (async-signal-safe: _exit).
void OnSigint(int sig) {
  if (g_signal_count.fetch_add(1) > 0) _exit(128 + sig);
  if (g_signals) g_signals->stop.store(true);
}
void OnSigterm(int sig) {
  if (g_signal_count.fetch_add(1) > 0) _exit(128 + sig);
  if (g_signals) g_signals->drain.store(true);
}
// Note [Paused members]: a volunteer's pause and resume; never a stop.
void OnSigusr1(int) {
  if (g_signals) g_signals->pause.store(true);
}
void OnSigusr2(int) {
  if (g_signals) g_signals->resume.store(true);
}

// Note [GPU contention]: --pause_on_gpu_contention's lister and timings in
// `o`; nothing on a CPU device (logged). Reads CUDA_VISIBLE_DEVICES: main's.
absl::Status GpuContentionOptionsFromFlags(const std::string& device, GossipDaemonOptions* o) {
  const double pause_s = absl::GetFlag(FLAGS_gpu_contention_pause_s);
  const double resume_s = absl::GetFlag(FLAGS_gpu_contention_resume_s);
  for (const auto& [name, v] : {std::pair<const char*, double>{"pause_s", pause_s},
                                {"resume_s", resume_s}}) {
    if (!(v >= 0 && v <= 86400)) {
      return absl::InvalidArgumentError(absl::StrCat("--gpu_contention_", name, "=", v,
                                                     ": want seconds in [0, 86400]"));
    }
  }
  if (!absl::GetFlag(FLAGS_pause_on_gpu_contention)) return absl::OkStatus();
  absl::StatusOr<std::string> gpu =
      node::NvidiaSmiGpuId(device, std::getenv("CUDA_VISIBLE_DEVICES"));
  if (!gpu.ok()) {
    LOG(WARNING) << "--pause_on_gpu_contention is off: " << gpu.status().message()
                 << "; there is no GPU of ours to watch";
    return absl::OkStatus();
  }
  o->gpu_lister = std::make_shared<node::NvidiaSmiLister>(*gpu, absl::Seconds(5));
  o->gpu_contention.pause_after = absl::Seconds(pause_s);
  o->gpu_contention.resume_after = absl::Seconds(resume_s);
  o->gpu_contention.poll_every = absl::Seconds(2);
  o->gpu_contention.own_pids = {static_cast<int64_t>(getpid())};
  return absl::OkStatus();
}

// How long ago this process was started (exec), from /proc: main's one
// look at it, for a joiner's time-to-first-useful-work (the part before
// main: loading libtorch and the other shared libraries). 0 if unknown.
absl::Duration ProcessAge() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Field 22 (starttime, clock ticks since boot) follows the ')' that ends
  // the command name (which may contain spaces).
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return absl::ZeroDuration();
  std::vector<std::string> fields = absl::StrSplit(text.substr(close + 2), ' ');
  double start_ticks = 0, uptime_s = 0;
  if (fields.size() < 20 || !absl::SimpleAtod(fields[19], &start_ticks)) {
    return absl::ZeroDuration();
  }
  std::ifstream uptime("/proc/uptime");
  if (!(uptime >> uptime_s)) return absl::ZeroDuration();
  const double age = uptime_s - start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  return age > 0 ? absl::Seconds(age) : absl::ZeroDuration();
}

void Deprecated(const std::string& message) {
  LOG(WARNING) << "deprecated: " << message;
  std::cerr << "skipswarm node: deprecated: " << message << "\n";
}

// Note [One port] (gossip_daemon.cc): the per-service listen flags of
// earlier versions still start a node, with a message saying what to use.
void ApplyDeprecatedAddressFlags(GossipDaemonOptions* o) {
  const std::string gossip_listen = absl::GetFlag(FLAGS_gossip_listen);
  if (!gossip_listen.empty()) {
    if (o->base.listen.empty()) {
      o->base.listen = gossip_listen;
      Deprecated("--gossip_listen: every service now listens on one port; use --listen=" +
                 gossip_listen);
    } else {
      Deprecated("--gossip_listen ignored: --listen is the one port of every service");
    }
  }
  if (!absl::GetFlag(FLAGS_state_listen).empty()) {
    Deprecated("--state_listen ignored: state transfer is served on --listen");
  }
  if (!o->base.group_listen.empty()) {
    Deprecated("--group_listen ignored in a gossip swarm: replica averaging is served on --listen");
  }
  const std::string host = absl::GetFlag(FLAGS_advertise_host);
  if (!host.empty()) {
    if (o->advertise.empty()) {
      o->advertise = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":0";
      Deprecated("--advertise_host: use --advertise=" + o->advertise +
                 " (port 0: the port --listen bound)");
    } else {
      Deprecated("--advertise_host ignored: --advertise is given");
    }
  }
}

absl::StatusOr<std::vector<int>> ParseStages(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, '+', absl::SkipEmpty())) {
    int s;
    if (!absl::SimpleAtoi(part, &s)) {
      return absl::InvalidArgumentError(absl::StrCat("--host_stages: '", part, "' is not a stage"));
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

const char kGossipFlagsFile[] = "cli/gossip_command.cc";

void InstallGossipSignalHandlers() {
  static DaemonSignals signals;
  g_signals = &signals;
  std::signal(SIGINT, OnSigint);
  std::signal(SIGTERM, OnSigterm);
  std::signal(SIGUSR1, OnSigusr1);
  std::signal(SIGUSR2, OnSigusr2);
}

absl::Status RunGossipNode(const node::NodeDaemonOptions& base, SwarmManifestStep* manifest,
                           const node::NodeBackend& backend) {
  GossipDaemonOptions o;
  o.base = base;
  SS_ASSIGN_OR_RETURN(o.stages, ParseStages(absl::GetFlag(FLAGS_host_stages)));
  {
    SS_ASSIGN_OR_RETURN(const model::SdpOptions sdp, model::ReadSdpFlags(&o.choose_role));
    o.sdp_keep = sdp.keep;
    if (o.choose_role && !o.stages.empty()) {
      return absl::InvalidArgumentError(
          "--sdp=auto chooses this node's stages: pass no --host_stages with it");
    }
  }
  o.expect_members = absl::GetFlag(FLAGS_expect_members);
  o.advertise = absl::GetFlag(FLAGS_advertise);
  ApplyDeprecatedAddressFlags(&o);
  o.entry_lead = absl::GetFlag(FLAGS_entry_lead);
  o.force_leave = absl::GetFlag(FLAGS_force);
  o.checkpoint_copies = absl::GetFlag(FLAGS_checkpoint_copies);
  o.keep_copies = absl::GetFlag(FLAGS_keep_copies);
  if (o.checkpoint_copies < 0 || o.keep_copies < 1) {
    return absl::InvalidArgumentError("--checkpoint_copies must be >= 0, --keep_copies >= 1");
  }
  o.control_port = absl::GetFlag(FLAGS_control_port);
  o.join_report_file = absl::GetFlag(FLAGS_join_report);
  o.process_age_at_start = ProcessAge();
  o.rebalance_every = absl::GetFlag(FLAGS_rebalance_every);
  const double alone_s = absl::GetFlag(FLAGS_alone_timeout_s);
  if (!(alone_s >= 0) || alone_s > 1e7) {
    return absl::InvalidArgumentError("--alone_timeout_s must be in [0, 1e7] seconds");
  }
  o.alone_timeout = absl::Seconds(alone_s);
  o.rebalance_min_gain = absl::GetFlag(FLAGS_rebalance_min_gain);
  o.fixed_compute_speed = absl::GetFlag(FLAGS_fixed_compute_speed);
  o.relay_slots = absl::GetFlag(FLAGS_relay_slots);
  o.relays = absl::GetFlag(FLAGS_relays);
  o.quiet_hours = absl::GetFlag(FLAGS_quiet_hours);
  o.time_zone = absl::LocalTimeZone();  // quiet hours are the volunteer's local time
  SS_RETURN_IF_ERROR(GpuContentionOptionsFromFlags(base.model.runtime.device, &o));
  SwarmMembershipOptions& g = o.gossip;
  g.key_file = absl::GetFlag(FLAGS_node_key_file);
  g.create_key = absl::GetFlag(FLAGS_create_key);
  g.insecure = absl::GetFlag(FLAGS_insecure);
  g.swarm_name = absl::GetFlag(FLAGS_swarm_name);
  g.swarm_secret = manifest->swarm_secret;
  g.revocations_file = absl::GetFlag(FLAGS_revocations_file);
  g.join = absl::StrSplit(absl::GetFlag(FLAGS_join), ',', absl::SkipEmpty());
  g.join_timeout = base.startup_timeout;
  g.seed = base.model.seed;
  g.model_id = base.model.model.ConfigHash();
  g.averaging_id = model::AveragingIdentity(base.model.averaging);
  g.num_stages = static_cast<uint32_t>(base.model.model.num_stages);
  g.extra_services = {manifest->service.get()};
  g.admission = manifest->admission;
  g.invite = manifest->invite;
  g.join_work_first = manifest->join_work;
  o.manifest_quota = manifest->quota.get();
  if (!manifest->bootstrap.empty()) g.join = manifest->bootstrap;  // swarm files expanded
  o.manifest_fetch_time = manifest->fetch_time;
  LOG(INFO) << "seed " << base.model.seed;
  // Note [Stopping while joining] (gossip_daemon_join.cc): the handlers are
  // in before Create, whose bootstrap, model build and stage choice take
  // seconds; a stop asked meanwhile ends them, with no checkpoint.
  InstallGossipSignalHandlers();
  DaemonSignals& signals = *g_signals;
  o.signals = &signals;
  absl::StatusOr<std::unique_ptr<GossipDaemon>> daemon = GossipDaemon::Create(o, backend);
  if (absl::IsCancelled(daemon.status())) {
    std::printf("%s: %s; no checkpoint written\n", base.name.c_str(),
                std::string(daemon.status().message()).c_str());
    return absl::OkStatus();
  }
  if (!daemon.ok()) return daemon.status();
  SS_RETURN_IF_ERROR(MaybeWriteSwarmFile(*manifest, (*daemon)->gossip_address()));
  return (*daemon)->Run(&signals);
}

int RunDrainCommand() {
  const std::string control = absl::GetFlag(FLAGS_control);
  if (control.empty()) {
    std::cerr << "skipswarm node drain: --control=HOST:PORT is required (the node prints it "
                 "at start: 'control 127.0.0.1:PORT')\n";
    return 2;
  }
  absl::StatusOr<std::string> answer = node::SendDrain(control, absl::GetFlag(FLAGS_force));
  if (!answer.ok()) {
    std::cerr << "skipswarm node drain: " << answer.status() << "\n";
    return 1;
  }
  std::cout << *answer << "\n";
  return 0;
}

int RunPauseCommand(bool resume) {
  const char* const verb = resume ? "resume" : "pause";
  const std::string control = absl::GetFlag(FLAGS_control);
  if (control.empty()) {
    std::cerr << "skipswarm node " << verb
              << ": --control=HOST:PORT is required (the node prints it at start: 'control "
                 "127.0.0.1:PORT')\n";
    return 2;
  }
  absl::StatusOr<std::string> answer =
      node::SendPause(control, resume, absl::GetFlag(FLAGS_force));
  if (!answer.ok()) {
    std::cerr << "skipswarm node " << verb << ": " << answer.status() << "\n";
    return 1;
  }
  std::cout << *answer << "\n";
  return 0;
}

}  // namespace skipswarm::cli

#include "node/daemon/reporting/metrics.h"

#include <dirent.h>
#include "third_party/cpp_httplib.h"
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "node/transport/relay/relay_service.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace skipswarm::node {

// Names follow Prometheus' conventions: base units (seconds, bytes), counters
// end in `_total`, and a variant of a quantity is a label (reason=, peer=,
// stage=), never a second name.
const std::vector<MetricFamily>& MetricCatalog() {
  using T = MetricType;
  static const std::vector<MetricFamily> kCatalog = {
      {"skipswarm_build_info", T::kGauge,
       "Always 1; the labels name the build (version, git_commit, libtorch_version)."},
      {"skipswarm_iteration", T::kGauge, "The last training iteration this node finished."},
      {"skipswarm_loss", T::kGauge,
       "Mean training loss of this data node's micro-batches in the last iteration."},
      {"skipswarm_tokens_trained_total", T::kCounter,
       "Tokens of the micro-batches this data node completed (rate() gives throughput)."},
      {"skipswarm_micro_batches_completed_total", T::kCounter,
       "Micro-batches this data node injected that finished forward and backward."},
      {"skipswarm_micro_batch_routes_total", T::kCounter,
       "Completed micro-batches this data node originated, by the shape of the route they "
       "took (in_order, skip: fewer stages than the model's, swap: stages out of order, "
       "skip_swap)."},
      {"skipswarm_micro_batches_dropped_total", T::kCounter,
       "Micro-batches this data node gave up, by reason."},
      {"skipswarm_relay_exclusions_total", T::kCounter,
       "Times this data node left a relay out of its plans for a back-off after it lost "
       "micro-batches silently (Note [Silent relay exclusion])."},
      {"skipswarm_stopping_claims_unconfirmed_total", T::kCounter,
       "Micro-batches this data node dropped because an abort notice claimed a relay was "
       "stopping and that relay's own record never confirmed it (reason "
       "stopping_unconfirmed; Note [Confirmed stopping]): a rising count is a relay passing "
       "on false stopping claims."},
      {"skipswarm_micro_batches_rerouted_total", T::kCounter,
       "Hops this node's stage server re-routed to another node, by reason."},
      {"skipswarm_micro_batch_visits_dropped_total", T::kCounter,
       "Micro-batch visits this node's stage server gave up, by reason."},
      {"skipswarm_memory_slots_in_use", T::kGauge,
       "Activation memory slots held by micro-batches on this node."},
      {"skipswarm_bytes_sent_total", T::kCounter,
       "Payload bytes this node's stage server sent to peers."},
      {"skipswarm_frames_refused_total", T::kCounter,
       "Frames this node's stage server refused (memory slots full, invalid, stale); those "
       "its transport refused first are skipswarm_transport_frames_refused_total."},
      {"skipswarm_verify_checks_sent_total", T::kCounter,
       "Verified compute (--verify_rate): forward frames this node also sent, verify-only, to "
       "a second replica of the next hop's stage (Note [Sending checks])."},
      {"skipswarm_verify_checks_answered_total", T::kCounter,
       "Verify-only forwards this node ran and answered with a sketch."},
      {"skipswarm_verify_checks_judged_total", T::kCounter,
       "Outputs of members on probation this node compared with a second replica's sketch."},
      {"skipswarm_verify_mismatches_total", T::kCounter,
       "Of those, the outputs that did not match (Note [Verify trust])."},
      {"skipswarm_commitments_signed_total", T::kCounter,
       "Checkable evidence (--sign_frames): output commitments this node signed on the "
       "forward frames it produced (Note [Checkable evidence])."},
      {"skipswarm_commitments_resigned_total", T::kCounter,
       "Of this node's commitments, those re-signed because its own route repair changed the "
       "hop it sends to (Note [Signed route prefix])."},
      {"skipswarm_commitments_checked_total", T::kCounter,
       "Commitments on arriving forward frames whose signature and payload hash verified."},
      {"skipswarm_commitments_refused_total", T::kCounter,
       "Forward frames refused for a commitment missing (from a signing member), not "
       "matching the frame, or not verifying."},
      {"skipswarm_evidence_served_total", T::kCounter,
       "Evidence requests this node answered with pieces its output checks kept (Note "
       "[Evidence bans])."},
      {"skipswarm_evidence_pieces_served_total", T::kCounter,
       "Pieces of evidence this node served."},
      {"skipswarm_evidence_requests_refused_total", T::kCounter,
       "Evidence requests this node refused, by reason (quota, unauthenticated, bad_request, "
       "not_found)."},
      {"skipswarm_evidence_fetches_total", T::kCounter,
       "Evidence fetches this node made for bans in its view the verify quorum did not adopt."},
      {"skipswarm_evidence_fetch_failures_total", T::kCounter,
       "Of those, the fetches that failed (nothing kept, the accuser's quota, the network)."},
      {"skipswarm_evidence_pieces_checked_total", T::kCounter,
       "Fetched pieces of evidence this node checked, by verdict (false_input, convicts, "
       "match, inputs_differ, invalid, trusted_accused, ...); only false_input and convicts "
       "ban."},
      {"skipswarm_evidence_bans_adopted_total", T::kCounter,
       "Members this node banned from its routes and averaging on evidence it checked."},
      {"skipswarm_verify_excluded", T::kGauge,
       "Members this node's checks condemned: left out of its routes and named as banned in "
       "its record (Note [Verify trust])."},
      {"skipswarm_peer_bytes_sent_total", T::kCounter, "Payload bytes sent, by peer."},
      {"skipswarm_peer_bytes_received_total", T::kCounter, "Payload bytes received, by peer."},
      {"skipswarm_peer_frames_sent_total", T::kCounter, "Frames sent, by peer."},
      {"skipswarm_peer_frames_received_total", T::kCounter, "Frames received, by peer."},
      {"skipswarm_hop_latency_seconds", T::kHistogram,
       "Time from sending a frame to the next hop's admission ack."},
      {"skipswarm_first_reroute_seconds", T::kGauge,
       "Steady-clock time of this node's first re-route (absent if none)."},
      {"skipswarm_stage_visits", T::kGauge,
       "Micro-batch visits this node's replica of the stage served in the last iteration."},
      {"skipswarm_stage_replicas", T::kGauge,
       "Replicas of the stage that averaged gradients in the last iteration."},
      {"skipswarm_stage_grad_norm", T::kGauge,
       "L2 norm of the stage's averaged gradient in the last iteration."},
      {"skipswarm_gradient_parts_refused_total", T::kCounter,
       "Replicas' gradient parts this node left out (non_finite) or scaled down (clipped) "
       "while averaging, by stage, sender and reason."},
      {"skipswarm_stage_digests_agree", T::kGauge,
       "1 if every replica of the stage had the same parameters after the last step."},
      {"skipswarm_stage_averaged_bytes_total", T::kCounter,
       "Payload bytes this replica pushed to average the stage (reduce-scatter parts and "
       "all-gather shards, encoded by --avg_codec; 0 on the inner steps of --outer_every)."},
      {"skipswarm_stage_sync_wait_seconds_total", T::kCounter,
       "Seconds this replica's iterations waited for the stage's averaging: each reduce "
       "waited for, or with --outer_overlap the wait of a sync point for the round in "
       "flight (Note [Sync wait])."},
      {"skipswarm_stage_outer_steps_total", T::kCounter,
       "Outer (DiLoCo) steps this replica of the stage applied (--outer_every > 1)."},
      {"skipswarm_outer_sync_late_total", T::kCounter,
       "Outer syncs this replica of the stage missed: its pseudo-gradient was late, the "
       "round closed at its deadline and it applied the others' average (Note [Late "
       "members], --outer_deadline_factor)."},
      {"skipswarm_resync_source_lied_total", T::kCounter,
       "Re-syncs of the stage whose source served a state it did not hold (its digest at the "
       "next comparison differed from the state imported); the source is trusted no more as "
       "a re-sync reference (Note [Checked re-sync] in node/train/resync_source.h)."},
      {"skipswarm_outer_sync_left_out_total", T::kCounter,
       "Late replicas this node's outer syncs of the stage closed out at the deadline."},
      {"skipswarm_live_members", T::kGauge, "Members this node's gossip view holds alive."},
      {"skipswarm_memory_ceiling_bytes", T::kGauge,
       "The stated ceiling of this node's resident memory whatever its peers send (Note "
       "[Memory ceiling]): compare with process_resident_memory_bytes."},
      {"skipswarm_peer_quota_refusals_total", T::kCounter,
       "Requests this node refused because their sender was over its per-peer quota "
       "(Note [Peer quotas]), by service, reason (messages, bytes, streams, stream_opens, "
       "peers, not_admitted: a stranger where the swarm admits only invited or listed "
       "nodes; revoked; strangers: over the budget all strangers share) and peer_class "
       "(member, newcomer, stranger, revoked)."},
      {"skipswarm_transport_frames_refused_total", T::kCounter,
       "Pipeline frames this node's transport received and refused before its stage server "
       "saw them (acked with an error; Note [Frame validation]), by reason: version "
       "(another protocol version), swarm (another swarm's), malformed (a header or chunk "
       "that fails a check), checksum (payload CRC-32C), duplicate (seen before), quota (its "
       "sender over its per-peer quota), other."},
      {"skipswarm_peer_quota_held_refusals_total", T::kCounter,
       "Quota refusals this node answered only after a hold because their sender asked again "
       "within a second of a refusal (Note [Refusal hold]), by service."},
      {"skipswarm_peer_quota_paced_total", T::kCounter,
       "Times this node paused copying a peer's bytes because it was over its per-peer byte "
       "budget (Note [Paced bytes]: the relay), by service."},
      {"skipswarm_members_on_probation", T::kGauge,
       "Live members hosting pipeline stages that this node does not trust yet (Note "
       "[Newcomer probation]): they host a stage for routing only beside a trusted replica; "
       "absent without --probation_iterations."},
      {"skipswarm_vouches", T::kGauge,
       "Replicas this node's record vouches for: their digests matched ours for the "
       "probation length (Note [Newcomer probation])."},
      {"skipswarm_admission_refusals_total", T::kCounter,
       "Gossip records and requests this node refused because the swarm's admission policy "
       "does not admit their node: no, expired, forged or another node's invite, not on the "
       "allow-list (Note [Admission]), no valid join work (Note [Join work])."},
      {"skipswarm_reachable", T::kGauge,
       "1 when peers could dial this node's advertised address back at join, 0 when none "
       "could (behind NAT); absent until a check had an answer."},
      {"skipswarm_advertise_auto_agreeing_peers", T::kGauge,
       "--advertise=auto: peers that saw this node's connections come from the most common "
       "host (label observers: peers that answered); 2 agreeing, more than half, adopt it."},
      {"skipswarm_relays", T::kGauge,
       "Behind NAT: relays this node is attached to (reachable members that carry "
       "connections to it); absent on a reachable node."},
      {"skipswarm_relay_recovery_seconds", T::kGauge,
       "Behind NAT: how long this node last had fewer relays than wanted after losing one."},
      {"skipswarm_relay_attached_nodes", T::kGauge,
       "Outbound-only members attached to this node's relay service now."},
      {"skipswarm_relayed_bytes_total", T::kCounter,
       "Bytes this node's relay service copied between circuits' two streams."},
      {"skipswarm_relay_refused_total", T::kCounter,
       "Circuits and openings this node's relay service refused, by reason: over_budget "
       "(its sender's pause would pass max_pace, Note [Paced bytes]), oversized (an opening "
       "or message over the relay's size limits, Note [Relay memory])."},
      {"skipswarm_membership_changes_total", T::kCounter,
       "Changes in this node's gossip view (joins, deaths, leaves, record updates)."},
      {"skipswarm_seconds_per_layer_sample", T::kGauge,
       "This node's measured compute time per transformer layer and sample."},
      {"skipswarm_stage_moves_total", T::kCounter,
       "Times this node moved to another stage (rebalancing)."},
      {"skipswarm_reentries_total", T::kCounter,
       "Times this node found itself behind its stage's replicas and re-entered with a live "
       "replica's state (a stall past the failure detector)."},
      {"skipswarm_restarts_behind_total", T::kCounter,
       "Times this node started from its own checkpoint behind the swarm's training and "
       "entered as a joiner with a live replica's state (Note [Restart behind the swarm])."},
      {"skipswarm_sole_replica_skips_total", T::kCounter,
       "Times this node found its whole stage behind the data nodes (no live replica of it "
       "ahead) and moved ahead with its own state (Note [Sole replica behind])."},
      {"skipswarm_sole_replica_skipped_iterations_total", T::kCounter,
       "Iterations this node's stage passed without an update when it moved ahead."},
      {"skipswarm_stage_restores_total", T::kCounter,
       "Times this joiner restored a stage without a live replica from a peer's checkpoint "
       "copy."},
      {"skipswarm_stage_restore_lost_iterations_total", T::kCounter,
       "Iterations of updates the stages this joiner restored from peers' copies lost (between "
       "the copy and the entry; Note [Restored step])."},
      {"skipswarm_training_paused", T::kGauge,
       "1 while this data node's training is paused (no plan possible, e.g. a stage without a "
       "live replica); 0 otherwise."},
      {"skipswarm_training_pauses_total", T::kCounter,
       "Times this data node's training paused."},
      {"skipswarm_training_paused_seconds_total", T::kCounter,
       "Seconds this data node's training was paused, counted when each pause ends."},
      {"skipswarm_volunteer_paused", T::kGauge,
       "1 while this node is paused by its volunteer (skipswarm node pause, SIGUSR1, quiet "
       "hours): a member that takes no new micro-batches; 0 otherwise."},
      {"skipswarm_volunteer_pauses_total", T::kCounter,
       "Times this node was paused by its volunteer."},
      {"skipswarm_gpu_contention", T::kGauge,
       "--pause_on_gpu_contention: 1 while another process has held memory on this node's GPU "
       "long enough to pause it (Note [GPU contention]); 0 otherwise; absent when off."},
      {"skipswarm_gpu_foreign_memory_bytes", T::kGauge,
       "--pause_on_gpu_contention: GPU memory other processes held on this node's GPU at the "
       "last successful check."},
      {"skipswarm_gpu_contention_check_failures_total", T::kCounter,
       "--pause_on_gpu_contention: checks of the GPU's processes that failed (nvidia-smi "
       "missing, failing or timing out; a process list from another PID namespace)."},
      {"skipswarm_serving", T::kGauge,
       "1 while the node's gRPC health is SERVING; 0 while a health cause holds."},
      {"skipswarm_health_cause", T::kGauge,
       "1 while the cause (paused, diverged, isolated) keeps the node NOT_SERVING; see the "
       "log."},
  };
  return kCatalog;
}

void Metrics::Set(const std::string& name, double value, const std::string& labels) {
  absl::MutexLock lock(&mu_);
  values_[name][labels] = value;
}

void Metrics::Add(const std::string& name, double delta, const std::string& labels) {
  absl::MutexLock lock(&mu_);
  values_[name][labels] += delta;
}

void Metrics::SetHistogram(const std::string& name, const HistogramValue& value,
                           const std::string& labels) {
  absl::MutexLock lock(&mu_);
  histograms_[name][labels] = value;
}

namespace {

std::string Number(double v) { return absl::StrFormat("%.10g", v); }

std::string Labels(const std::string& labels, const std::string& more = "") {
  if (labels.empty() && more.empty()) return "";
  return absl::StrCat("{", labels, !labels.empty() && !more.empty() ? "," : "", more, "}");
}

}  // namespace

namespace {

const MetricFamily* FindFamily(const std::string& name) {
  for (const MetricFamily& f : MetricCatalog()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

void AppendHeader(const std::string& name, MetricType fallback, std::string* out) {
  const MetricFamily* f = FindFamily(name);
  const MetricType type = f ? f->type : fallback;
  absl::StrAppend(out, "# HELP ", name, " ",
                  f ? f->help : "Not in skipswarm's metric catalog (metrics.cc).", "\n",
                  "# TYPE ", name, " ",
                  type == MetricType::kCounter     ? "counter"
                  : type == MetricType::kHistogram ? "histogram"
                                                   : "gauge",
                  "\n");
}

}  // namespace

std::string Metrics::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, series] : values_) {
    AppendHeader(name, absl::EndsWith(name, "_total") ? MetricType::kCounter : MetricType::kGauge,
                 &out);
    for (const auto& [labels, value] : series) {
      absl::StrAppend(&out, name, Labels(labels), " ", Number(value), "\n");
    }
  }
  for (const auto& [name, series] : histograms_) {
    AppendHeader(name, MetricType::kHistogram, &out);
    for (const auto& [labels, h] : series) {
      for (size_t i = 0; i < h.bounds.size() && i < h.cumulative.size(); ++i) {
        absl::StrAppend(&out, name, "_bucket",
                        Labels(labels, absl::StrCat("le=\"", Number(h.bounds[i]), "\"")), " ",
                        h.cumulative[i], "\n");
      }
      absl::StrAppend(&out, name, "_bucket", Labels(labels, "le=\"+Inf\""), " ", h.count, "\n");
      absl::StrAppend(&out, name, "_sum", Labels(labels), " ", Number(h.sum), "\n");
      absl::StrAppend(&out, name, "_count", Labels(labels), " ", h.count, "\n");
    }
  }
  return out;
}

std::string RenderProcessMetrics() {
  std::string out;
  const auto family = [&out](const char* name, const char* type, const char* help,
                             double value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name,
                    " ", Number(value), "\n");
  };
  // /proc/self/stat: fields after the command name (which may hold spaces
  // and parentheses, hence the last ')'); proc(5) numbers them from 1, so
  // utime (14) is rest[11].
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  if (close != std::string::npos && ticks > 0 && page > 0) {
    std::vector<std::string> rest =
        absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
    double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
    if (rest.size() > 22 && absl::SimpleAtod(rest[11], &utime) &&
        absl::SimpleAtod(rest[12], &stime) && absl::SimpleAtod(rest[19], &start) &&
        absl::SimpleAtod(rest[20], &vsize) && absl::SimpleAtod(rest[21], &rss)) {
      family("process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.",
             (utime + stime) / ticks);
      family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
             rss * page);
      family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize);
      // Start time: boot time (/proc/stat btime) + ticks since boot.
      std::ifstream proc_stat("/proc/stat");
      std::string line;
      while (std::getline(proc_stat, line)) {
        double btime = 0;
        absl::string_view rest_of_line = line;
        if (absl::ConsumePrefix(&rest_of_line, "btime ") &&
            absl::SimpleAtod(rest_of_line, &btime)) {
          family("process_start_time_seconds", "gauge",
                 "Start time of the process since the Unix epoch in seconds.",
                 btime + start / ticks);
          break;
        }
      }
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    int fds = 0;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++fds;
    }
    closedir(dir);
    family("process_open_fds", "gauge", "Number of open file descriptors.", fds - 1);  // our own
  }
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    family("process_max_fds", "gauge", "Maximum number of open file descriptors.",
           static_cast<double>(limit.rlim_cur));
  }
  return out;
}

void ExportServerStats(const StageServerStats& s, Metrics* m) {
  for (const auto& [peer, t] : s.traffic) {
    const std::string label = absl::StrCat("peer=\"", peer.ShortString(), "\"");
    m->Set("skipswarm_peer_bytes_sent_total", static_cast<double>(t.bytes_sent), label);
    m->Set("skipswarm_peer_bytes_received_total", static_cast<double>(t.bytes_received), label);
    m->Set("skipswarm_peer_frames_sent_total", static_cast<double>(t.frames_sent), label);
    m->Set("skipswarm_peer_frames_received_total", static_cast<double>(t.frames_received),
           label);
  }
  m->SetHistogram("skipswarm_hop_latency_seconds",
                  {s.hop_latency.bounds_s, s.hop_latency.cumulative, s.hop_latency.count,
                   s.hop_latency.sum_s});
  for (const auto& [reason, n] : s.rerouted_by_reason) {
    m->Set("skipswarm_micro_batches_rerouted_total", static_cast<double>(n),
           absl::StrCat("reason=\"", reason, "\""));
  }
  for (const auto& [reason, n] : s.dropped_by_reason) {
    m->Set("skipswarm_micro_batch_visits_dropped_total", static_cast<double>(n),
           absl::StrCat("reason=\"", reason, "\""));
  }
  if (s.first_reroute_at != absl::InfiniteDuration()) {
    m->Set("skipswarm_first_reroute_seconds", absl::ToDoubleSeconds(s.first_reroute_at));
  }
}

void ExportFramesRefused(const FrameRefusalCounts& refused, Metrics* m) {
  for (size_t i = 0; i < refused.size(); ++i) {
    m->Set("skipswarm_transport_frames_refused_total", static_cast<double>(refused[i]),
           absl::StrCat("reason=\"", FrameRefusalName(static_cast<FrameRefusal>(i)), "\""));
  }
}

void ExportRelayStats(const RelayServiceStats& stats, Metrics* m) {
  m->Set("skipswarm_relay_attached_nodes", stats.attached);
  m->Set("skipswarm_relayed_bytes_total", static_cast<double>(stats.bytes_relayed));
  m->Set("skipswarm_relay_refused_total", static_cast<double>(stats.over_budget),
         "reason=\"over_budget\"");
  m->Set("skipswarm_relay_refused_total", static_cast<double>(stats.oversized),
         "reason=\"oversized\"");
}

void ExportDrops(const IterationReport& r, Metrics* m) {
  for (const auto& [reason, n] : r.dropped_by_reason) {
    m->Add("skipswarm_micro_batches_dropped_total", n,
           absl::StrCat("reason=\"", reason, "\""));
  }
  if (r.relays_excluded > 0) m->Add("skipswarm_relay_exclusions_total", r.relays_excluded);
  if (r.stopping_claims_unconfirmed > 0) {
    m->Add("skipswarm_stopping_claims_unconfirmed_total", r.stopping_claims_unconfirmed);
  }
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const Metrics* metrics,
                                                                   const std::string& host,
                                                                   int port,
                                                                   std::vector<HttpPage> pages) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Render() + RenderProcessMetrics(), "text/plain; version=0.0.4");
  });
  for (HttpPage& page : pages) {
    const std::string path = page.path;  // read before `page` moves into the handler
    s->server_->Get(path, [page = std::move(page)](const httplib::Request&,
                                                    httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(page.render(), page.content_type.c_str());
    });
  }
  // httplib's default socket options add SO_REUSEPORT, with which a second
  // daemon bound the same port and scrapes alternated between the two.
  s->server_->set_socket_options([](auto sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (port == 0) {
    s->port_ = s->server_->bind_to_any_port(host);
  } else {
    s->port_ = s->server_->bind_to_port(host, port) ? port : -1;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve /metrics on ", host, ":", port,
                                               " (port in use?); see --metrics_port"));
  }
  httplib::Server* raw = s->server_.get();
  std::atomic<bool>* returned = &s->listen_returned_;
  s->thread_ = std::thread([raw, returned] {
    raw->listen_after_bind();
    returned->store(true);
  });
  return s;
}

// httplib's stop() does nothing until the listen loop has begun
// (is_running()), so a server destroyed right after Start (a daemon whose
// start-up fails a step later) stayed listening and the join never
// returned. Wait for the loop to begin, or to have ended on its own; it
// begins as soon as the thread runs, so the wait is a few microseconds.
MetricsServer::~MetricsServer() {
  if (!thread_.joinable()) return;
  while (!server_->is_running() && !listen_returned_.load()) std::this_thread::yield();
  server_->stop();
  thread_.join();
}

}  // namespace skipswarm::node

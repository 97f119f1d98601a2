#include "node/daemon/reporting/iteration_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace skipswarm::node {

std::string ReportIteration(const std::string& node_name, const NodeIterationReport& r,
                            double elapsed_s, const std::string& progress_file,
                            Metrics* metrics) {
  metrics->Set("skipswarm_iteration", static_cast<double>(r.iteration));
  metrics->Set("skipswarm_memory_slots_in_use", r.server.slots_in_use);
  metrics->Set("skipswarm_bytes_sent_total", static_cast<double>(r.server.bytes_sent));
  metrics->Set("skipswarm_frames_refused_total", static_cast<double>(r.server.frames_refused));
  // Verified compute (Note [Sending checks], Note [Verify trust]).
  int64_t judged = 0, mismatches = 0;
  for (const auto& [id, c] : r.server.checks.by_member) {
    judged += c.checks;
    mismatches += c.mismatches;
  }
  metrics->Set("skipswarm_verify_checks_sent_total", static_cast<double>(r.server.verify_sent));
  metrics->Set("skipswarm_verify_checks_answered_total",
               static_cast<double>(r.server.verify_answered));
  metrics->Set("skipswarm_verify_checks_judged_total", static_cast<double>(judged));
  metrics->Set("skipswarm_verify_mismatches_total", static_cast<double>(mismatches));
  // Note [Checkable evidence] (--sign_frames).
  metrics->Set("skipswarm_commitments_signed_total",
               static_cast<double>(r.server.commitments_signed));
  metrics->Set("skipswarm_commitments_resigned_total",
               static_cast<double>(r.server.commitments_resigned));
  metrics->Set("skipswarm_commitments_checked_total",
               static_cast<double>(r.server.commitments_checked));
  metrics->Set("skipswarm_commitments_refused_total",
               static_cast<double>(r.server.commitments_refused));
  // Re-routes and dropped visits by reason (labels; their sums are the
  // server's totals), per-peer bytes, hop latency.
  ExportServerStats(r.server, metrics);
  if (r.data) ExportDrops(*r.data, metrics);  // dropped micro-batches by reason

  std::string line = absl::StrFormat("[%s] it %d", node_name, r.iteration);
  int64_t avg_bytes = 0;  // over the hosted stages (Note [Outer steps])
  double sync_wait_s = 0;  // over the hosted stages (Note [Sync wait])
  for (const auto& [s, step] : r.stages) {
    const std::string label = absl::StrCat("stage=\"", s, "\"");
    metrics->Set("skipswarm_stage_visits", static_cast<double>(step.visits_here), label);
    metrics->Set("skipswarm_stage_replicas", step.replicas, label);
    metrics->Set("skipswarm_stage_grad_norm", step.update.grad_norm, label);
    metrics->Set("skipswarm_stage_digests_agree", step.digests_agree ? 1 : 0, label);
    metrics->Add("skipswarm_stage_averaged_bytes_total", static_cast<double>(step.avg_bytes),
                 label);
    if (step.outer_step) metrics->Add("skipswarm_stage_outer_steps_total", 1, label);
    // Note [Late members]: counted once the stage has had a sync.
    if (step.sync_late) metrics->Add("skipswarm_outer_sync_late_total", 1, label);
    if (step.resync_source_lied) {  // Note [Checked re-sync] in node/train/resync_source.h
      metrics->Add("skipswarm_resync_source_lied_total", 1,
                   absl::StrCat(label, ",from=\"", step.resync_source_lied->ShortString(), "\""));
    }
    if (step.sync_left_out > 0) {
      metrics->Add("skipswarm_outer_sync_left_out_total", step.sync_left_out, label);
    }
    avg_bytes += step.avg_bytes;
    const double wait_s = absl::ToDoubleSeconds(step.sync_wait);
    sync_wait_s += wait_s;
    metrics->Add("skipswarm_stage_sync_wait_seconds_total", wait_s, label);
    for (const PartVerdict& v : step.refused_parts) {
      metrics->Add("skipswarm_gradient_parts_refused_total", 1,
                   absl::StrCat(label, ",from=\"", v.from.ShortString(), "\",reason=\"",
                                PartVerdictName(v.kind), "\""));
    }
    // A group of one takes no digest (Note [Group of one] in
    // node/train/node_trainer.cc): "-".
    absl::StrAppend(&line, absl::StrFormat(" | s%d visits %d/%d x%d norm %.3f digest %s%s", s,
                                           step.visits_here, step.visits_total, step.replicas,
                                           step.update.grad_norm,
                                           step.digest_after == 0
                                               ? std::string("-")
                                               : absl::StrFormat("%016x", step.digest_after),
                                           step.digests_agree ? "" : " DIGEST MISMATCH"));
  }
  // Pipeline frames this node exchanged with other nodes since it started
  // (its own local hops are not counted): 0 and 0 on an SDP node.
  int64_t frames_sent = 0, frames_received = 0;
  for (const auto& [peer, t] : r.server.traffic) {
    frames_sent += t.frames_sent;
    frames_received += t.frames_received;
  }
  if (r.data) {
    const IterationReport& d = *r.data;
    const double iteration_s = absl::ToDoubleSeconds(d.elapsed);
    const double tps = d.tokens / std::max(1e-9, iteration_s);
    metrics->Set("skipswarm_loss", d.loss);
    metrics->Add("skipswarm_tokens_trained_total", static_cast<double>(d.tokens));
    metrics->Add("skipswarm_micro_batches_completed_total", d.completed);
    // Note [Route shapes]: rate(...{shape=~"skip|skip_swap"}) / rate(sum) is
    // the skip rate.
    for (const auto& [shape, n] : d.completed_by_route) {
      metrics->Add("skipswarm_micro_batch_routes_total", n, absl::StrCat("shape=\"", shape, "\""));
    }
    absl::StrAppend(&line, absl::StrFormat(" | loss %.4f mbs %d dropped %d %.0f tok/s", d.loss,
                                           d.completed, d.dropped, tps));
    if (!progress_file.empty()) {
      // nlohmann::json escapes the node name (a comma or a quote in it broke
      // the launcher's reading of the hand-made line).
      nlohmann::json j = {{"node", node_name},
                          {"iteration", r.iteration},
                          {"loss", std::isfinite(d.loss) ? d.loss : -1.0},
                          {"completed", d.completed},
                          {"dropped", d.dropped},
                          {"rerouted", r.server.rerouted},
                          {"rerouted_here", r.rerouted_here},
                          {"tokens", d.tokens},
                          {"iteration_s", iteration_s},
                          {"elapsed_s", elapsed_s},
                          {"avg_bytes", avg_bytes},
                          {"sync_wait_s", sync_wait_s},
                          {"frames_sent", frames_sent},
                          {"frames_received", frames_received}};
      std::ofstream(progress_file, std::ios::app) << j.dump() << "\n";
    }
  } else if (!progress_file.empty()) {
    // A relay: only what it did itself (no loss, tokens or timings).
    nlohmann::json j = {
        {"node", node_name},       {"iteration", r.iteration},
        {"rerouted_here", r.rerouted_here}, {"avg_bytes", avg_bytes},
        {"sync_wait_s", sync_wait_s},       {"frames_sent", frames_sent},
        {"frames_received", frames_received}};
    std::ofstream(progress_file, std::ios::app) << j.dump() << "\n";
  }
  // Every node's own re-routes, as a data node or as a relay.
  absl::StrAppend(&line, absl::StrFormat(" | rerouted %d (total %d)", r.rerouted_here,
                                         r.server.rerouted));
  if (!r.status.ok()) absl::StrAppend(&line, " | error: ", r.status.ToString());
  return line;
}

}  // namespace skipswarm::node

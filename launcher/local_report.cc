#include "launcher/local_report.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace skipswarm::launcher {

std::string FormatEta(double s) {
  const int64_t t = static_cast<int64_t>(std::max(0.0, std::round(s)));
  return t >= 60 ? absl::StrFormat("%dm%02ds", t / 60, t % 60) : absl::StrFormat("%ds", t);
}

std::string FormatLoss(const ProgressPoint& p) {
  if (p.n > 0) return absl::StrFormat("%.4f", p.loss_sum / p.n);
  // Note [No loss is not a loss]: a data node reports a loss < 0 both when
  // none of its micro-batches finished (a kill or a stall dropped every
  // route) and when their loss was not finite; finished micro-batches
  // without a finite loss are the second case. Printing either as "nan"
  // made a chaos run's dropped iteration look like diverged training.
  return p.completed > 0 ? "non-finite" : "--";
}

std::string FormatProgressLine(int64_t reported, int64_t iterations,
                               const std::map<int64_t, ProgressPoint>& points, double secs,
                               int64_t rerouted) {
  const ProgressPoint& p = points.rbegin()->second;
  int dropped = 0;
  for (const auto& [it, q] : points) dropped += q.dropped;
  double tokens = 0;
  for (const auto& [it, q] : points) tokens += q.tokens;
  const int width = 24;
  const int filled = static_cast<int>(width * (reported + 1) / iterations);
  // Rate and ETA from the daemons' clock since the first iteration.
  const double it_per_s = (reported + 1) / std::max(1e-9, secs);
  const double eta_s = (iterations - reported - 1) / std::max(1e-9, it_per_s);
  return absl::StrFormat("[%s%s] it %d/%d %.2f it/s ETA %s loss %s %.0f tok/s re-routed %d "
                         "dropped %d",
                         std::string(filled, '#'), std::string(width - filled, '.'),
                         reported + 1, iterations, it_per_s,
                         secs > 0 ? FormatEta(eta_s) : std::string("--"), FormatLoss(p),
                         tokens / std::max(1e-9, secs), rerouted, dropped);
}

void PrintProgressLine(int64_t reported, int64_t iterations,
                       const std::map<int64_t, ProgressPoint>& points, double secs,
                       int64_t rerouted) {
  std::printf("\r%s   ", FormatProgressLine(reported, iterations, points, secs, rerouted).c_str());
  std::fflush(stdout);
}

int PrintRunSummary(const std::string& dir, const std::vector<LocalChild>& children,
                    const std::map<int64_t, ProgressPoint>& points, double wall_s) {
  int failed = 0;
  for (const LocalChild& c : children) {
    const bool killed = WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL;
    if (!killed && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
      ++failed;
      // Note [How a node ended] (local_processes.h).
      std::printf("failed: %s", DescribeNodeEnd(dir, c).c_str());
    }
  }
  // Throughput on a shared machine depends on the CPU share; tokens per CPU
  // second compares with `train-ref` fairly (process start and set-up included).
  double cpu_s = 0, tokens = 0;
  for (const LocalChild& c : children) cpu_s += c.cpu_s;
  for (const auto& [it, p] : points) tokens += p.tokens;
  std::printf("throughput: %.0f tokens in %.1f s (%.0f tok/s); nodes used %.1f CPU-s (%.0f tokens "
              "per CPU-s)\n",
              tokens, wall_s, tokens / std::max(1e-9, wall_s), cpu_s,
              tokens / std::max(1e-9, cpu_s));
  // Peak memory per node process (wait4's ru_maxrss: libtorch's ~165 MB
  // load included), the figure SDP is about.
  std::printf("peak RSS per node (MiB):");
  for (const LocalChild& c : children) {
    std::printf(" %s %.0f", c.name.c_str(), static_cast<double>(c.max_rss_kib) / 1024.0);
  }
  std::printf("\n");
  {
    // Note [Outer steps]: what the replicas sent to stage averages.
    double avg_bytes = 0;
    for (const auto& [it, p] : points) avg_bytes += p.avg_bytes;
    std::printf("averaging: %.0f bytes sent to stage averages (%.1f bytes per token)\n",
                avg_bytes, avg_bytes / std::max(1.0, tokens));
  }
  std::printf("outputs: %s/loss.svg (plot: loss, kills, re-routes), %s/loss.csv, logs in "
              "%s/logs/, checkpoints in %s/checkpoints/\n",
              dir.c_str(), dir.c_str(), dir.c_str(), dir.c_str());
  return failed;
}

absl::Status CheckTrained(const std::map<int64_t, ProgressPoint>& points, int64_t iterations,
                          bool interrupted) {
  // A data node's NaN is left out of its point (n == 0).
  if (points.empty()) return absl::DataLossError("no iteration trained");
  auto newest = points.rbegin();
  // A stop drops the micro-batches in flight: with SIGTERM, the last
  // iteration often has none finished, which is no loss of training.
  if (interrupted && newest->second.n == 0 && newest->second.completed == 0 &&
      std::next(newest) != points.rend()) {
    ++newest;
  }
  const auto& [last_it, last] = *newest;
  if (last.n == 0) {
    return absl::DataLossError(absl::StrCat(
        "iteration ", last_it, " ended without a finite loss (",
        last.completed > 0 ? "its micro-batches finished with a non-finite loss"
                           : "none of its micro-batches finished",
        "); the run did not train"));
  }
  if (last_it + 1 < iterations && !interrupted) {
    return absl::DataLossError(absl::StrCat("only ", last_it + 1, " of ", iterations,
                                            " iterations trained"));
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::launcher

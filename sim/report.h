// Writing a simulation report: JSON for machines (byte-identical for the
// same scenario and seed) and an SVG plot of iteration time over simulated
// time, with failures (red) and joins (green) marked, for people.
//
//   std::string json = ReportJson(report);
//   std::string svg = ReportSvg(report);
//
// JSON layout (numbers rounded to microseconds):
//   {"scenario", "seed", "planner", "detection" ("swim" | "model"),
//    "wait_for_replacement", "replacement_s",
//    "summary": {"iterations", "total_s", "mean_iteration_s",
//                "mbs", "mbs_completed", "mbs_dropped", "mbs_rerouted",
//                "throughput_mb_per_s", "failures", "max_detect_s",
//                "max_reroute_s", "max_resume_s", "max_gossip_detect_s",
//                "gossip_false_dead", "stalled_s",
//                "link_failures", "stopped_early"},
//    "iterations": [{"index", "start_s", "time_s", "planned_s", "members",
//                    "mbs", "completed", "dropped", "rerouted",
//                    "replanned", "deadlocked"}],
//    "failures": [{"node", "stage", "region", "cause", "at_s",
//                  "gossip_detect_s", "first_gossip_detect_s", "first_reroute_s",
//                  "mbs_rerouted", "mbs_dropped",
//                  "detect_s": [...], "reroute_s": [...],
//                  "resume_s": [...]}],
//    "churn": [{"at_s", "kind", "what"}],
//    "stage_visits": [...],
//    "nodes": [{"name", "stage", "region", "busy_s", "utilisation"}]}
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SIM_REPORT_H_
#define SKIPSWARM_SIM_REPORT_H_

#include <string>

#include "sim/driver.h"

namespace skipswarm::sim {

struct ReportSummary {
  double mean_iteration_s = 0;
  int mbs = 0;
  int completed = 0;
  int dropped = 0;
  int rerouted = 0;
  double throughput_mb_per_s = 0;  // completed MBs / total simulated time
  double max_detect_s = 0;
  double max_reroute_s = 0;
  double max_resume_s = 0;
  double max_gossip_detect_s = 0;
};
ReportSummary Summarise(const SimReport& report);

std::string ReportJson(const SimReport& report);
std::string ReportSvg(const SimReport& report);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_REPORT_H_

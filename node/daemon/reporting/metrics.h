// Prometheus text metrics for the daemon (docs/ARCHITECTURE.md
// "Observability"): a tiny registry of gauges and counters rendered in the
// text exposition format, and an HTTP server (cpp-httplib) for /metrics.
//
//   Metrics m;
//   m.Set("skipswarm_iteration", 12);
//   m.Set("skipswarm_bytes_sent_total", 1e6, "peer=\"ab12cd34\"");
//   ExportServerStats(server.stats(), &m);   // per-peer bytes, hop latency, ...
//   SS_ASSIGN_OR_RETURN(auto server, MetricsServer::Start(&m, "127.0.0.1", 0));
//
// Every family the daemons export is listed, with its type and help text,
// in MetricCatalog() (metrics.cc): Render() writes "# HELP" and "# TYPE"
// from it, so the output passes `promtool check metrics` (base units,
// counters end in `_total`, a variant is a label, not a name). A name missing
// from the catalog still renders (counter if it ends in `_total`, else
// gauge) with a HELP line saying so; metrics_test keeps the catalog whole.
// The server adds process metrics (process_resident_memory_bytes, ...) read
// from /proc/self at each scrape.
//
// Thread rule: thread-safe; the server serves on its own thread.
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_METRICS_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_METRICS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "node/stage/stage_server.h"
#include "node/transport/frame_validator.h"
#include "node/train/data_node_driver.h"

namespace httplib {
class Server;
}

namespace skipswarm::node {

// A histogram's state: cumulative[i] observations <= bounds[i].
struct HistogramValue {
  std::vector<double> bounds;
  std::vector<int64_t> cumulative;
  int64_t count = 0;
  double sum = 0;
};

enum class MetricType { kGauge, kCounter, kHistogram };

struct MetricFamily {
  const char* name;
  MetricType type;
  const char* help;
};

// Every family the daemons export (see the file comment).
const std::vector<MetricFamily>& MetricCatalog();

class Metrics {
 public:
  // Sets metric `name{labels}` to `value` (labels: `k="v",...`, may be empty).
  void Set(const std::string& name, double value, const std::string& labels = "");
  void Add(const std::string& name, double delta, const std::string& labels = "");
  // Replaces histogram `name{labels}` (bounds.size() == cumulative.size()).
  void SetHistogram(const std::string& name, const HistogramValue& value,
                    const std::string& labels = "");
  // Text exposition format: "# HELP" and "# TYPE" lines, then the samples,
  // per family.
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, double>> values_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, HistogramValue>> histograms_ ABSL_GUARDED_BY(mu_);
};

// The stage server's counters as of `stats` (they are cumulative, so Set):
//   skipswarm_peer_{bytes,frames}_{sent,received}_total{peer="ab12cd34"}
//   skipswarm_hop_latency_seconds (histogram: send -> the peer's admission ack)
//   skipswarm_micro_batches_rerouted_total{reason="deadline"}
//   skipswarm_micro_batch_visits_dropped_total{reason="next_hop_died"}
//   skipswarm_first_reroute_seconds (clock time of the first re-route; absent if none)
void ExportServerStats(const StageServerStats& stats, Metrics* metrics);

// A data node's dropped micro-batches of one iteration, by reason, added to
// skipswarm_micro_batches_dropped_total{reason="mb_deadline"}, and the
// relays it excluded, to skipswarm_relay_exclusions_total, and its stopping
// claims the view never confirmed, to
// skipswarm_stopping_claims_unconfirmed_total.
void ExportDrops(const IterationReport& report, Metrics* metrics);

// The pipeline frames this node's transport received and refused, by
// reason (Note [Frame validation] in node/transport/frame_validator.h;
// every reason of the fixed set, zero included), as
// skipswarm_transport_frames_refused_total{reason}.
void ExportFramesRefused(const FrameRefusalCounts& refused, Metrics* metrics);

struct RelayServiceStats;  // node/transport/relay/relay_service.h (gRPC kept out of here)

// This node's relay service (node/transport/relay/relay_service.h): nodes
// attached, bytes copied, and what it refused by reason (over_budget,
// oversized; both, zero included).
void ExportRelayStats(const RelayServiceStats& stats, Metrics* metrics);

// The standard process metrics of this process, in the text format, read
// from /proc/self: process_resident_memory_bytes, process_virtual_memory_bytes,
// process_cpu_seconds_total, process_start_time_seconds, process_open_fds,
// process_max_fds. Families whose file cannot be read are left out.
std::string RenderProcessMetrics();

// One more page the metrics server serves (the status page, status_page.h):
// GET `path` answers `render()` with `content_type`. `render` runs on the
// server's thread, once per request.
struct HttpPage {
  std::string path;
  std::string content_type;
  std::function<std::string()> render;
};

class MetricsServer {
 public:
  // Serves GET /metrics (`metrics` and RenderProcessMetrics()) and `pages`
  // on host:port (0 = any free port). Whatever `pages` borrow must outlive
  // the server.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const Metrics* metrics,
                                                             const std::string& host, int port,
                                                             std::vector<HttpPage> pages = {});
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};  // set by thread_ when its loop ends
  int port_ = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_METRICS_H_

// Prometheus text metrics for the daemon (DESIGN.md, issue 5 "Config and
// observability"): a tiny registry of gauges and counters rendered in the
// text exposition format, and an HTTP server (cpp-httplib) for /metrics.
//
//   Metrics m;
//   m.Set("skipswarm_iteration", 12);
//   m.Set("skipswarm_bytes_sent_total", 1e6, "peer=\"ab12cd34\"");
//   SS_ASSIGN_OR_RETURN(auto server, MetricsServer::Start(&m, "127.0.0.1", 0));
//
// Thread rule: thread-safe; the server serves on its own thread.
#ifndef SKIPSWARM_NODE_DAEMON_METRICS_H_
#define SKIPSWARM_NODE_DAEMON_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
class Server;
}

namespace skipswarm::node {

class Metrics {
 public:
  // Sets metric `name{labels}` to `value` (labels: `k="v",...`, may be empty).
  void Set(const std::string& name, double value, const std::string& labels = "");
  void Add(const std::string& name, double delta, const std::string& labels = "");
  // Text exposition format, one "# TYPE name gauge" per name.
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, double>> values_ ABSL_GUARDED_BY(mu_);
};

class MetricsServer {
 public:
  // Serves GET /metrics on host:port (0 = any free port).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const Metrics* metrics,
                                                             const std::string& host, int port);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_METRICS_H_

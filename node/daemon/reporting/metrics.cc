#include "node/daemon/reporting/metrics.h"

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace skipswarm::node {

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

std::string Metrics::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, series] : values_) {
    const bool counter = absl::EndsWith(name, "_total");
    absl::StrAppend(&out, "# TYPE ", name, counter ? " counter\n" : " gauge\n");
    for (const auto& [labels, value] : series) {
      absl::StrAppend(&out, name, Labels(labels), " ", Number(value), "\n");
    }
  }
  for (const auto& [name, series] : histograms_) {
    absl::StrAppend(&out, "# TYPE ", name, " histogram\n");
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
    m->Set("skipswarm_micro_batches_rerouted_by_reason_total", static_cast<double>(n),
           absl::StrCat("reason=\"", reason, "\""));
  }
  for (const auto& [reason, n] : s.dropped_by_reason) {
    m->Set("skipswarm_micro_batch_visits_dropped_by_reason_total", static_cast<double>(n),
           absl::StrCat("reason=\"", reason, "\""));
  }
  if (s.first_reroute_at != absl::InfiniteDuration()) {
    m->Set("skipswarm_first_reroute_seconds", absl::ToDoubleSeconds(s.first_reroute_at));
  }
}

void ExportDrops(const IterationReport& r, Metrics* m) {
  for (const auto& [reason, n] : r.dropped_by_reason) {
    m->Add("skipswarm_micro_batches_dropped_by_reason_total", n,
           absl::StrCat("reason=\"", reason, "\""));
  }
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const Metrics* metrics,
                                                                   const std::string& host,
                                                                   int port) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Render(), "text/plain; version=0.0.4");
  });
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

#include "node/daemon/metrics.h"

#include <httplib.h>

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

std::string Metrics::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, series] : values_) {
    absl::StrAppend(&out, "# TYPE ", name, " gauge\n");
    for (const auto& [labels, value] : series) {
      absl::StrAppend(&out, name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ",
                      absl::StrFormat("%.10g", value), "\n");
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const Metrics* metrics,
                                                                   const std::string& host,
                                                                   int port) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Render(), "text/plain; version=0.0.4");
  });
  if (port == 0) {
    s->port_ = s->server_->bind_to_any_port(host);
  } else {
    s->port_ = s->server_->bind_to_port(host, port) ? port : -1;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve /metrics on ", host, ":", port));
  }
  httplib::Server* raw = s->server_.get();
  s->thread_ = std::thread([raw] { raw->listen_after_bind(); });
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace skipswarm::node

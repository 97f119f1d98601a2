#include "node/daemon/gossip/advertise_auto.h"

#include <grpcpp/grpcpp.h>

#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/caller_key.h"
#include "common/real_clock.h"
#include "node/daemon/gossip/advertise_address.h"

namespace skipswarm::node {
namespace {

// The host of an observed "host:port" ("[v6]:port"); "" when it does not
// parse. Decoded again: an older peer answered gRPC's escaped form
// ("%5B::1%5D:5000").
std::string HostOf(const std::string& observed) {
  absl::StatusOr<HostPort> hp = ParseHostPort(common::PercentDecoded(observed), "observed");
  return hp.ok() ? hp->host : "";
}

std::string Peers(int n) { return absl::StrCat(n, n == 1 ? " peer" : " peers"); }

}  // namespace

std::optional<int> ParseAutoAdvertise(absl::string_view advertise) {
  if (advertise == "auto") return 0;
  if (!absl::ConsumePrefix(&advertise, "auto:")) return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(advertise, &port) || port < 0 || port > 65535) return std::nullopt;
  return port;
}

std::vector<Observation> ObserveSelf(const std::vector<std::string>& peers,
                                     const ReachabilityOptions& options, absl::Duration timeout) {
  std::vector<Observation> seen(peers.size());
  std::vector<std::thread> askers;
  for (size_t i = 0; i < peers.size(); ++i) {
    askers.emplace_back([&, i] {
      Observation& o = seen[i];  // this thread's own slot
      o.peer = peers[i];
      grpc::ChannelArguments args;
      options.credentials->ConfigureChannel(args);
      auto stub = proto::Reachability::NewStub(
          grpc::CreateCustomChannel(peers[i], options.credentials->ForChannel(), args));
      grpc::ClientContext context;
      context.set_deadline(common::SystemDeadlineAfter(timeout));
      proto::ObserveRequest request;
      proto::ObserveResponse response;
      // A peer without Observe (an older build) answers UNIMPLEMENTED: no
      // observation, like a peer that did not answer.
      if (stub->Observe(&context, request, &response).ok()) {
        o.observed = response.observed_address();
      }
    });
  }
  for (std::thread& t : askers) t.join();
  return seen;
}

ObservedHost AgreeOnHost(const std::vector<Observation>& seen) {
  ObservedHost out;
  std::vector<int> counts;
  for (const Observation& o : seen) {
    const std::string host = HostOf(o.observed);
    if (host.empty()) continue;
    ++out.observers;
    size_t i = 0;
    while (i < out.hosts.size() && out.hosts[i] != host) ++i;
    if (i == out.hosts.size()) {
      out.hosts.push_back(host);
      counts.push_back(0);
    }
    ++counts[i];
  }
  size_t best = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > counts[best]) best = i;
  }
  if (counts.empty()) return out;
  out.agreeing = counts[best];
  if (out.agreeing >= kMinAgreeing && 2 * out.agreeing > out.observers) {
    out.host = out.hosts[best];
  }
  return out;
}

AutoAdvertiseResult SettleAutoAdvertise(const std::vector<Observation>& seen,
                                        const std::string& local, int port,
                                        const DialBackCheck& check) {
  AutoAdvertiseResult r;
  r.observed = AgreeOnHost(seen);
  const ObservedHost& o = r.observed;
  const std::string agree = absl::StrCat(o.agreeing, " of ", o.observers, " agree");
  if (o.host.empty()) {
    r.address = local;
    r.report = check(local);
    if (o.observers < kMinAgreeing) {
      r.line = absl::StrCat("advertise=auto: ", Peers(o.observers), " of ", seen.size(),
                            " asked could say where they see us (", kMinAgreeing,
                            " must agree); advertising the local address ", local);
    } else {
      r.line = absl::StrCat("advertise=auto: peers disagree on where they see us (",
                            absl::StrJoin(o.hosts, ", "), "; ", agree,
                            ", more than half needed); advertising the local address ", local);
    }
    return r;
  }
  const std::string observed = FormatHostPort(HostPort{o.host, port});
  const std::string seen_as =
      absl::StrCat("advertise=auto: peers see us as ", o.host, " (", agree, ")");
  if (observed == local) {
    r.address = local;
    r.report = check(local);
    r.line = absl::StrCat(seen_as, "; advertising ", local, " (the local address)");
    return r;
  }
  // Both candidates at once: the check's time is one dial-back's, not two.
  ReachabilityReport at_observed;
  std::thread t([&] { at_observed = check(observed); });
  ReachabilityReport at_local = check(local);
  t.join();
  using V = ReachabilityReport::Verdict;
  if (at_observed.verdict != V::kReachable && at_local.verdict == V::kReachable) {
    r.address = local;
    r.report = std::move(at_local);
    r.line = absl::StrCat(seen_as, ", but only the local address ", local,
                          " was dialed back; advertising it");
    return r;
  }
  r.address = observed;
  r.report = std::move(at_observed);
  r.line = absl::StrCat(seen_as, "; advertising ", observed);
  return r;
}

}  // namespace skipswarm::node

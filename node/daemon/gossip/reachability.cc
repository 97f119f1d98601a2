#include "node/daemon/gossip/reachability.h"

#include <grpcpp/grpcpp.h>

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/caller_key.h"
#include "common/real_clock.h"
#include "glog/logging.h"
#include "proto/grpc_status.h"

namespace skipswarm::node {
namespace {

// A channel of its own: a dial-back must open a new connection, not reuse
// one the asker opened to us (gRPC shares subchannels process-wide).
std::shared_ptr<grpc::Channel> FreshChannel(const std::string& address,
                                            const identity::PeerCredentials& creds,
                                            const common::NodeId& expected) {
  grpc::ChannelArguments args;
  creds.ConfigureChannel(args);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  return grpc::CreateCustomChannel(address, creds.ForChannel(expected), args);
}

}  // namespace

ReachabilityService::ReachabilityService(ReachabilityOptions options)
    : options_(std::move(options)) {}

grpc::Status ReachabilityService::Identify(grpc::ServerContext*, const proto::IdentifyRequest*,
                                           proto::IdentifyResponse* response) {
  response->set_node_id(options_.self.Bytes());
  return grpc::Status::OK;
}

grpc::Status ReachabilityService::Observe(grpc::ServerContext* context,
                                          const proto::ObserveRequest*,
                                          proto::ObserveResponse* response) {
  response->set_observed_address(common::GrpcPeerAddress(context->peer()));
  return grpc::Status::OK;
}

grpc::Status ReachabilityService::DialBack(grpc::ServerContext* context,
                                           const proto::DialBackRequest* request,
                                           proto::DialBackResponse* response) {
  if (!options_.swarm_id.empty() && request->swarm_id() != options_.swarm_id) {
    return proto::ToGrpcStatus(absl::PermissionDeniedError("wrong swarm id"));
  }
  absl::StatusOr<common::NodeId> from = common::NodeId::FromBytes(request->from());
  if (!from.ok()) return proto::ToGrpcStatus(absl::InvalidArgumentError("bad sender id"));
  absl::Status authenticated = options_.credentials->CheckPeer(context->auth_context(), *from);
  if (!authenticated.ok()) return proto::ToGrpcStatus(authenticated);
  if (request->address().empty() || request->address().size() > 300) {
    return proto::ToGrpcStatus(absl::InvalidArgumentError("bad address"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (dialing_ >= kMaxConcurrentDials) {
      return proto::ToGrpcStatus(absl::ResourceExhaustedError("too many dial-backs at once"));
    }
    ++dialing_;
  }
  response->set_observed_address(common::GrpcPeerAddress(context->peer()));
  auto stub = proto::Reachability::NewStub(
      FreshChannel(request->address(), *options_.credentials, *from));
  grpc::ClientContext dial;
  dial.set_deadline(common::SystemDeadlineAfter(options_.dial_timeout));
  dial.set_wait_for_ready(true);  // retry a refused connect until the deadline
  proto::IdentifyRequest identify;
  proto::IdentifyResponse identity;
  const grpc::Status s = stub->Identify(&dial, identify, &identity);
  if (!s.ok()) {
    response->set_detail(absl::StrCat(request->address(), ": ", s.error_message()));
  } else if (identity.node_id() != request->from()) {
    response->set_detail(absl::StrCat(request->address(), " is another node"));
  } else {
    response->set_reached(true);
  }
  {
    absl::MutexLock lock(&mu_);
    --dialing_;
  }
  return grpc::Status::OK;
}

int ReachabilityReport::answered() const {
  int n = 0;
  for (const DialBackAnswer& a : answers) n += a.answered ? 1 : 0;
  return n;
}

int ReachabilityReport::reached() const {
  int n = 0;
  for (const DialBackAnswer& a : answers) n += a.reached ? 1 : 0;
  return n;
}

ReachabilityReport::Verdict Judge(const std::vector<DialBackAnswer>& answers) {
  int answered = 0;
  for (const DialBackAnswer& a : answers) {
    if (a.reached) return ReachabilityReport::Verdict::kReachable;
    answered += a.answered ? 1 : 0;
  }
  return answered > 0 ? ReachabilityReport::Verdict::kBehindNat
                      : ReachabilityReport::Verdict::kUnknown;
}

ReachabilityReport CheckReachability(const std::vector<std::string>& peers,
                                     const std::string& advertised,
                                     const ReachabilityOptions& options, absl::Duration timeout) {
  ReachabilityReport report;
  report.advertised = advertised;
  report.answers.resize(peers.size());
  std::vector<std::thread> askers;
  for (size_t i = 0; i < peers.size(); ++i) {
    askers.emplace_back([&, i] {
      DialBackAnswer& a = report.answers[i];  // this thread's own slot
      a.peer = peers[i];
      grpc::ChannelArguments args;
      options.credentials->ConfigureChannel(args);
      auto stub = proto::Reachability::NewStub(
          grpc::CreateCustomChannel(peers[i], options.credentials->ForChannel(), args));
      grpc::ClientContext context;
      context.set_deadline(common::SystemDeadlineAfter(timeout));
      proto::DialBackRequest request;
      request.set_from(options.self.Bytes());
      request.set_address(advertised);
      request.set_swarm_id(options.swarm_id);
      proto::DialBackResponse response;
      const grpc::Status s = stub->DialBack(&context, request, &response);
      if (!s.ok()) {
        a.detail = absl::StrCat("no answer: ", s.error_message());
        return;
      }
      a.answered = true;
      a.reached = response.reached();
      a.detail = response.detail();
      a.observed_address = response.observed_address();
    });
  }
  for (std::thread& t : askers) t.join();
  report.verdict = Judge(report.answers);
  return report;
}

std::string DescribeReachability(const ReachabilityReport& r) {
  std::vector<std::string> seen_as;
  for (const DialBackAnswer& a : r.answers) {
    if (!a.observed_address.empty()) {
      // The host part only: the source port differs per connection.
      const size_t colon = a.observed_address.rfind(':');
      const std::string host = a.observed_address.substr(0, colon);
      bool dup = false;
      for (const std::string& s : seen_as) dup = dup || s == host;
      if (!dup) seen_as.push_back(host);
    }
  }
  const std::string peers = absl::StrCat(r.answered(), " of ", r.answers.size(), " peers");
  switch (r.verdict) {
    case ReachabilityReport::Verdict::kReachable:
      return absl::StrCat("reachable at ", r.advertised, " (dialed back by ", r.reached(), " of ",
                          r.answered(), " answering peers)");
    case ReachabilityReport::Verdict::kBehindNat:
      return absl::StrCat(
          "behind NAT: outbound-only mode (", r.advertised, " could not be dialed by ", peers,
          seen_as.empty() ? "" : absl::StrCat("; they see this node as ", absl::StrJoin(seen_as, ", ")),
          ")");
    case ReachabilityReport::Verdict::kUnknown:
      break;
  }
  return absl::StrCat("reachability unknown (", r.answers.empty() ? "no peer to ask" : peers,
                      r.answers.empty() ? "" : " answered", ")");
}

}  // namespace skipswarm::node

#include "manifest/manifest_service.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/real_clock.h"
#include "manifest/signed_manifest.h"
#include "proto/grpc_status.h"
#include "proto/version.h"

namespace skipswarm::manifest {

ManifestService::ManifestService(proto::SignedManifest signed_manifest, std::string swarm_id,
                                 std::shared_ptr<common::PeerQuota> quota)
    : signed_manifest_(std::move(signed_manifest)),
      swarm_id_(std::move(swarm_id)),
      quota_(std::move(quota)) {}

std::string PeerHost(const std::string& grpc_peer) {
  const size_t colon = grpc_peer.rfind(':');
  const size_t scheme = grpc_peer.find(':');
  if (colon == std::string::npos || colon == scheme) return grpc_peer;
  return grpc_peer.substr(0, colon);
}

grpc::Status ManifestService::GetManifest(grpc::ServerContext* context,
                                          const proto::GetManifestRequest* request,
                                          proto::GetManifestResponse* response) {
  if (quota_ != nullptr) {
    absl::Status admitted = quota_->AdmitKey(PeerHost(context->peer()),
                                             common::PeerClass::kStranger,
                                             request->ByteSizeLong());
    if (!admitted.ok()) {
      quota_->HoldRefusal(admitted);  // Note [Refusal hold]
      return proto::ToGrpcStatus(admitted);
    }
  }
  absl::Status version = proto::CheckProtocolVersion(request->protocol_version());
  if (!version.ok()) return proto::ToGrpcStatus(version);
  if (request->swarm_id() != swarm_id_) {
    // Admission (membership/record.h DeriveSwarmId): the same test gossip
    // applies to every record, asked here first so a joiner learns it
    // before it builds its stage.
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "admission refused: the joiner's swarm id (from --swarm_name and "
                        "--swarm_secret) is not this swarm's");
  }
  *response->mutable_signed_manifest() = signed_manifest_;
  return grpc::Status::OK;
}

absl::StatusOr<proto::SignedManifest> CallGetManifest(
    const std::string& address, const std::shared_ptr<const identity::PeerCredentials>& credentials,
    const std::string& swarm_id, absl::Duration timeout) {
  grpc::ChannelArguments args;
  credentials->ConfigureChannel(args);
  // A manifest is a few hundred bytes: a peer sending more is refused by
  // gRPC before we parse anything.
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxManifestBytes) + 4096);
  auto channel = grpc::CreateCustomChannel(address, credentials->ForChannel(), args);
  auto stub = proto::SwarmManifestService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(timeout));
  // Fail at once on a refused connection instead of waiting for the
  // deadline (the caller retries what is worth retrying).
  context.set_wait_for_ready(false);
  proto::GetManifestRequest request;
  request.set_protocol_version(proto::kProtocolVersion);
  request.set_swarm_id(swarm_id);
  proto::GetManifestResponse response;
  grpc::Status s = stub->GetManifest(&context, request, &response);
  if (!s.ok()) return proto::ToAbslStatus(s);
  return std::move(*response.mutable_signed_manifest());
}

}  // namespace skipswarm::manifest

#include "node/daemon/gossip/evidence_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/real_clock.h"
#include "glog/logging.h"
#include "proto/grpc_status.h"

namespace skipswarm::node {

EvidenceService::EvidenceService(EvidenceServiceOptions options) : options_(std::move(options)) {}

grpc::Status EvidenceService::Refuse(const std::string& reason, const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    ++counts_.refused[reason];
  }
  return proto::ToGrpcStatus(status);
}

grpc::Status EvidenceService::FetchEvidence(grpc::ServerContext* context,
                                            const proto::FetchEvidenceRequest* request,
                                            proto::FetchEvidenceResponse* response) {
  if (!options_.swarm_id.empty() && request->swarm_id() != options_.swarm_id) {
    return Refuse("bad_request", absl::PermissionDeniedError("wrong swarm id"));
  }
  absl::StatusOr<common::NodeId> from = common::NodeId::FromBytes(request->from());
  if (!from.ok()) return Refuse("bad_request", absl::InvalidArgumentError("bad sender id"));
  absl::Status authenticated = options_.credentials->CheckPeer(context->auth_context(), *from);
  if (!authenticated.ok()) return Refuse("unauthenticated", authenticated);
  // Charged before any work: a flood costs one refusal per request.
  if (options_.quota != nullptr) {
    absl::Status admitted = options_.quota->Admit(*from, request->ByteSizeLong());
    if (!admitted.ok()) {
      options_.quota->HoldRefusal(admitted);  // Note [Refusal hold]
      return Refuse("quota", admitted);
    }
  }
  absl::StatusOr<common::NodeId> accused = common::NodeId::FromBytes(request->accused());
  if (!accused.ok()) return Refuse("bad_request", absl::InvalidArgumentError("bad accused id"));
  const std::vector<Evidence> kept =
      options_.evidence_against ? options_.evidence_against(*accused) : std::vector<Evidence>{};
  int cap = std::max(1, options_.max_pieces);
  if (request->max_pieces() > 0) cap = std::min<int>(cap, request->max_pieces());
  size_t bytes = 0;
  // Newest first: the most recent pieces are the likeliest to name members
  // and keys the asker still has in its view.
  for (auto it = kept.rbegin(); it != kept.rend() && response->pieces_size() < cap; ++it) {
    const size_t size = it->commitment.ByteSizeLong() + it->output.size() +
                        it->answer.ByteSizeLong() +
                        (it->input_commitment ? it->input_commitment->ByteSizeLong() : 0) + 64;
    if (bytes + size > options_.max_reply_bytes) continue;  // one too large: try smaller ones
    bytes += size;
    proto::EvidencePiece* piece = response->add_pieces();
    *piece->mutable_commitment() = it->commitment;
    piece->set_output(std::string(it->output));
    *piece->mutable_answer() = it->answer;
    if (it->input_commitment) *piece->mutable_input_commitment() = *it->input_commitment;
  }
  if (response->pieces_size() == 0) {
    return Refuse("not_found", absl::NotFoundError(absl::StrCat(
                                   "no evidence kept against ", accused->ShortString())));
  }
  absl::MutexLock lock(&mu_);
  ++counts_.served;
  counts_.pieces_served += response->pieces_size();
  return grpc::Status::OK;
}

EvidenceServeCounts EvidenceService::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

absl::StatusOr<std::vector<Evidence>> FetchEvidence(const EvidenceFetchOptions& o,
                                                    const common::NodeId& accuser,
                                                    const std::string& address,
                                                    const common::NodeId& accused) {
  if (o.credentials == nullptr) return absl::FailedPreconditionError("no credentials");
  grpc::ChannelArguments args;
  o.credentials->ConfigureChannel(args);
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxEvidenceReplyBytes + (64 << 10)));
  auto stub = proto::Evidence::NewStub(
      grpc::CreateCustomChannel(address, o.credentials->ForChannel(accuser), args));
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(o.deadline));
  proto::FetchEvidenceRequest request;
  request.set_from(o.self.Bytes());
  request.set_swarm_id(o.swarm_id);
  request.set_accused(accused.Bytes());
  request.set_max_pieces(static_cast<uint32_t>(std::max(1, o.max_pieces)));
  proto::FetchEvidenceResponse response;
  const grpc::Status s = stub->FetchEvidence(&context, request, &response);
  if (!s.ok()) return proto::ToAbslStatus(s);
  return PiecesFromResponse(response, o.max_pieces);
}

std::vector<Evidence> PiecesFromResponse(const proto::FetchEvidenceResponse& response,
                                         int max_pieces) {
  std::vector<Evidence> out;
  for (const proto::EvidencePiece& p : response.pieces()) {
    if (static_cast<int>(out.size()) >= std::max(1, max_pieces)) break;
    Evidence e;
    e.commitment = p.commitment();
    e.output = absl::Cord(p.output());
    e.answer = p.answer();
    if (p.has_input_commitment()) e.input_commitment = p.input_commitment();
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace skipswarm::node

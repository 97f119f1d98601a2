#include "manifest/manifest_service.h"

#include <grpcpp/grpcpp.h>

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/caller_key.h"
#include "common/real_clock.h"
#include "manifest/signed_manifest.h"
#include "membership/join_work.h"
#include "proto/grpc_status.h"
#include "proto/version.h"

namespace skipswarm::manifest {

ManifestService::ManifestService(proto::SignedManifest signed_manifest, std::string swarm_id,
                                 std::shared_ptr<common::PeerQuota> quota,
                                 membership::AdmissionPolicy admission, common::Clock* clock,
                                 std::string challenge_secret)
    : signed_manifest_(std::move(signed_manifest)),
      swarm_id_(std::move(swarm_id)),
      quota_(std::move(quota)),
      admission_(std::move(admission)),
      clock_(clock),
      founder_id_(common::NodeId::FromPublicKey(admission_.founder_public_key)),
      challenges_(challenge_secret.empty() || clock == nullptr
                      ? std::nullopt
                      : std::make_optional<JoinChallenges>(std::move(challenge_secret))) {}

bool ManifestService::ChallengesListed() const {
  return challenges_.has_value() &&
         (admission_.mode == membership::AdmissionMode::kAllowList ||
          (admission_.mode == membership::AdmissionMode::kInvite &&
           !admission_.allowed_ids.empty()));
}

bool ManifestService::ListedClaim(const proto::GetManifestRequest& request) const {
  if (!ChallengesListed() || request.challenge().size() > kMaxJoinChallengeBytes ||
      request.signature().size() != identity::kSignatureBytes ||
      request.public_key().size() != identity::kPublicKeyBytes) {
    return false;
  }
  absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(request.node_id());
  return id.ok() && (*id == founder_id_ || admission_.allowed_ids.contains(*id));
}

bool ManifestService::ProvesKey(const proto::GetManifestRequest& request) const {
  // Cheapest first: a keyed hash, a hash, then the one verify.
  return challenges_->Fresh(request.challenge(), swarm_id_, clock_->SteadyNow()) &&
         common::NodeId::FromPublicKey(request.public_key()).Bytes() == request.node_id() &&
         identity::VerifySignature(
             request.public_key(),
             JoinChallengeMessage(swarm_id_, request.node_id(), request.challenge()),
             request.signature())
             .ok();
}

std::string ManifestService::ChallengeFor(const proto::GetManifestRequest& request) const {
  // Only to a caller that named this swarm, as the join work's ask.
  if (!ChallengesListed() || request.swarm_id() != swarm_id_) return "";
  return challenges_->Issue(swarm_id_, clock_->SteadyNow());
}

ManifestService::JoinerClaim ManifestService::ClaimOf(
    const proto::GetManifestRequest& request) const {
  // Hostile bytes: sizes first, then a parse; the signature or the work
  // hash waits for ProvesJoin (asked only while the strangers' budget is
  // short).
  JoinerClaim claim;
  if (admission_.mode == membership::AdmissionMode::kOpen) {
    if (admission_.join_work_bits != 0 &&
        request.public_key().size() == identity::kPublicKeyBytes) {
      // The key itself, not its id: no hash for a call that may never ask.
      claim.key = absl::StrCat("work:", absl::BytesToHexString(request.public_key()));
    }
    return claim;
  }
  if (ListedClaim(request)) {
    // Judged on the signature only for a listed id: an invited joiner that
    // signed a challenge too keeps its invite's claim.
    claim.key = absl::StrCat("key:", absl::BytesToHexString(request.node_id()));
    claim.listed = true;
    return claim;
  }
  if (clock_ == nullptr || admission_.mode != membership::AdmissionMode::kInvite ||
      request.invite().empty() || request.invite().size() > membership::kMaxInviteTokenBytes ||
      request.node_id().size() != common::NodeId::kBytes) {
    return claim;
  }
  proto::Invite invite;
  if (claim.invite.ParseFromString(request.invite()) &&
      invite.ParseFromString(claim.invite.invite()) &&
      invite.nonce().size() == membership::kInviteNonceBytes) {
    claim.key = absl::StrCat("invite:", absl::BytesToHexString(invite.nonce()));
  }
  return claim;
}

bool ManifestService::ProvesJoin(const proto::GetManifestRequest& request,
                                 const JoinerClaim& claim) const {
  if (claim.key.empty()) return false;
  if (claim.listed) return ProvesKey(request);
  if (admission_.mode == membership::AdmissionMode::kOpen) {
    // ClaimOf checked the key's size and the swarm's bits. The founder
    // asks no work of itself, and its key is public: it proves nothing
    // here. Then CheckJoinWork's test, without its message: one hash.
    return request.public_key() != admission_.founder_public_key &&
           membership::JoinWorkBits(admission_.manifest_id, request.public_key(),
                                    request.join_work()) >=
               static_cast<int>(admission_.join_work_bits);
  }
  absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(request.node_id());
  if (!id.ok()) return false;
  // CheckAdmission admits the founder and listed ids without looking at the
  // invite; their ids are public, so naming one proves nothing here: only
  // an invite that verifies does.
  if (*id == founder_id_ || admission_.allowed_ids.contains(*id)) {
    return false;
  }
  return membership::CheckAdmission(admission_, *id, claim.invite, clock_->Now()).ok();
}

std::string ManifestService::JoinWorkAsk(const proto::GetManifestRequest& request) const {
  // Only to a caller that named this swarm: a private swarm's manifest id
  // is not told to those without its secret.
  if (admission_.mode != membership::AdmissionMode::kOpen || admission_.join_work_bits == 0 ||
      request.swarm_id() != swarm_id_) {
    return "";
  }
  return absl::StrCat(admission_.manifest_id, "/", admission_.join_work_bits);
}

std::optional<JoinWorkAsk> ParseJoinWorkAsk(absl::string_view value) {
  constexpr size_t kHexId = 64;
  if (value.size() > kHexId + 3 || value.size() < kHexId + 2 || value[kHexId] != '/') {
    return std::nullopt;
  }
  JoinWorkAsk ask;
  if (!IsLowerHex64(value.substr(0, kHexId))) return std::nullopt;
  ask.manifest_id = std::string(value.substr(0, kHexId));
  if (!absl::SimpleAtoi(value.substr(kHexId + 1), &ask.bits) || ask.bits == 0 ||
      ask.bits > membership::kMaxJoinWorkBits) {
    return std::nullopt;
  }
  return ask;
}

namespace {

// Hostile input: each value is parsed with its bounds; one that does not
// parse is nothing asked.
SeedAsks AsksOf(const std::multimap<grpc::string_ref, grpc::string_ref>& trailers) {
  SeedAsks asks;
  if (auto it = trailers.find(kJoinWorkAskKey); it != trailers.end()) {
    asks.work = ParseJoinWorkAsk(absl::string_view(it->second.data(), it->second.size()));
  }
  if (auto it = trailers.find(kJoinChallengeKey); it != trailers.end()) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (ParseJoinChallenge(value).has_value()) asks.challenge = std::string(value);
  }
  return asks;
}

}  // namespace

grpc::Status ManifestService::GetManifest(grpc::ServerContext* context,
                                          const proto::GetManifestRequest* request,
                                          proto::GetManifestResponse* response) {
  if (quota_ != nullptr) {
    // Note [Manifest joiners]: a proven joiner (invite, signed challenge,
    // join work) may draw on the joiners' budget while a flood holds the
    // strangers'. A caller is its address's (Note [Caller keys]: an IPv6
    // caller's /64).
    const JoinerClaim claim = ClaimOf(*request);
    absl::Status admitted = quota_->AdmitJoinerKey(common::CallerKey(context->peer()), claim.key,
                                                   request->ByteSizeLong(),
                                                   [&] { return ProvesJoin(*request, claim); });
    if (!admitted.ok()) {
      // Note [Manifest joiners]: what an open swarm's joiner may solve to
      // be told from the flood. Said with every refusal of this swarm's
      // callers: one already holding the work (refused for the joiners'
      // budget) does not solve again.
      if (std::string ask = JoinWorkAsk(*request); !ask.empty()) {
        context->AddTrailingMetadata(kJoinWorkAskKey, ask);
      }
      // And what a listed id may sign (same note); a fresh one each time,
      // so one that went stale while the joiner waited is replaced.
      if (std::string challenge = ChallengeFor(*request); !challenge.empty()) {
        context->AddTrailingMetadata(kJoinChallengeKey, challenge);
      }
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
    const std::string& swarm_id, absl::Duration timeout, const JoinerProof& proof,
    SeedAsks* asks) {
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
  request.set_invite(proof.signed_invite);
  request.set_node_id(proof.node_id);
  request.set_public_key(proof.public_key);
  request.set_join_work(proof.join_work);
  request.set_challenge(proof.challenge);
  request.set_signature(proof.signature);
  proto::GetManifestResponse response;
  grpc::Status s = stub->GetManifest(&context, request, &response);
  if (asks != nullptr) *asks = AsksOf(context.GetServerTrailingMetadata());
  if (!s.ok()) return proto::ToAbslStatus(s);
  return std::move(*response.mutable_signed_manifest());
}

}  // namespace skipswarm::manifest

// Serving and fetching checkable evidence (Note [Evidence bans] in
// node/stage/evidence_bans.h): the catcher answers FetchEvidence from the
// pieces its output checks kept (StageServer::EvidenceAgainst); a member
// that sees a ban it has not adopted fetches them from the accuser and
// checks them itself (EvidenceAdopter, evidence_adopter.h).
//
//   EvidenceServiceOptions o;
//   o.evidence_against = [&](const NodeId& x) { return server->EvidenceAgainst(x); };
//   o.quota = quotas.evidence;                       // per caller
//   EvidenceService service(std::move(o));
//   builder->RegisterService(&service);              // the daemon's NodeServer
//   absl::StatusOr<std::vector<Evidence>> pieces =
//       FetchEvidence(request_options, accuser, address, accused);
//
// Hostile callers: the caller must prove its id (TLS), each request is
// charged to its PeerQuota (a small burst; RESOURCE_EXHAUSTED beyond), a
// reply holds at most max_pieces pieces and max_reply_bytes bytes, and a
// fetched reply is bounded the same way before anything is checked.
//
// Thread rule: the service is thread-safe (gRPC's threads); FetchEvidence
// blocks up to its deadline.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_EVIDENCE_SERVICE_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_EVIDENCE_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"
#include "node/compute/evidence.h"
#include "node/daemon/gossip/evidence.grpc.pb.h"

namespace skipswarm::node {

inline constexpr int kMaxServedEvidencePieces = 4;
// A reply's bytes (under NodeServer's 8 MiB receive limit, with room).
inline constexpr size_t kMaxEvidenceReplyBytes = 6 << 20;

struct EvidenceServiceOptions {
  common::NodeId self;
  std::string swarm_id;
  std::shared_ptr<const identity::PeerCredentials> credentials;  // required
  // Per caller (a member's id); null: unlimited (tests).
  std::shared_ptr<common::PeerQuota> quota;
  // The pieces kept against a member, oldest first (thread-safe).
  std::function<std::vector<Evidence>(const common::NodeId&)> evidence_against;
  int max_pieces = kMaxServedEvidencePieces;
  size_t max_reply_bytes = kMaxEvidenceReplyBytes;
};

struct EvidenceServeCounts {
  int64_t served = 0;         // requests answered with pieces
  int64_t pieces_served = 0;
  // Requests refused, by reason: "quota", "unauthenticated", "bad_request",
  // "not_found".
  std::map<std::string, int64_t> refused;
};

class EvidenceService final : public proto::Evidence::Service {
 public:
  explicit EvidenceService(EvidenceServiceOptions options);
  grpc::Status FetchEvidence(grpc::ServerContext* context,
                             const proto::FetchEvidenceRequest* request,
                             proto::FetchEvidenceResponse* response) override;
  EvidenceServeCounts counts() const;

 private:
  grpc::Status Refuse(const std::string& reason, const absl::Status& status);

  const EvidenceServiceOptions options_;
  mutable absl::Mutex mu_;
  EvidenceServeCounts counts_ ABSL_GUARDED_BY(mu_);
};

struct EvidenceFetchOptions {
  common::NodeId self;
  std::string swarm_id;
  std::shared_ptr<const identity::PeerCredentials> credentials;  // required
  int max_pieces = kMaxServedEvidencePieces;
  absl::Duration deadline = absl::Seconds(10);
};

// Asks `accuser` (at `address`, which must prove to be it) for its pieces
// against `accused`; at most o.max_pieces of them (the rest of a longer
// reply is dropped unread). Blocks up to o.deadline.
absl::StatusOr<std::vector<Evidence>> FetchEvidence(const EvidenceFetchOptions& o,
                                                    const common::NodeId& accuser,
                                                    const std::string& address,
                                                    const common::NodeId& accused);

// A fetched reply's pieces as FetchEvidence returns them: at most
// max_pieces (at least 1; the rest dropped unread), each field copied as
// served. Nothing is checked here: every piece is hostile until
// JudgeServedPiece (tests/fuzz/evidence_fuzzer.cc feeds it replies).
std::vector<Evidence> PiecesFromResponse(const proto::FetchEvidenceResponse& response,
                                         int max_pieces);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_EVIDENCE_SERVICE_H_

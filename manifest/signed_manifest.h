// Signing, verifying and describing a swarm manifest (manifest.proto).
//
//   SS_ASSIGN_OR_RETURN(proto::SignedManifest s, SignManifest(m, *identity));
//   SS_ASSIGN_OR_RETURN(VerifiedManifest v, VerifyManifest(s, pinned_sha256));
//   LOG(INFO) << "swarm manifest " << v.sha256 << ": " << ManifestSummary(v.manifest);
//
// Verification treats its input as hostile (it may come from any peer):
// sizes are checked before parsing, every failure is an InvalidArgument
// (malformed) or Unauthenticated (signature, key or pinned hash) with the
// reason, never a crash.
//
// Thread rule: pure functions, thread-safe.
#ifndef SKIPSWARM_MANIFEST_SIGNED_MANIFEST_H_
#define SKIPSWARM_MANIFEST_SIGNED_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/node_id.h"
#include "identity/identity.h"
#include "manifest/manifest.pb.h"

namespace skipswarm::manifest {

// A manifest is a few hundred bytes; anything near this is not one.
inline constexpr size_t kMaxManifestBytes = 64 * 1024;
inline constexpr uint32_t kManifestFormat = 1;

struct VerifiedManifest {
  proto::SwarmManifest manifest;
  proto::SignedManifest signed_manifest;  // as received, to serve onwards
  std::string sha256;                     // hex of signed_manifest.manifest
  common::NodeId founder;
};

// Hex SHA-256 of `bytes` (64 lowercase characters).
std::string Sha256Hex(absl::string_view bytes);

// Sets `m.founder_id` to `founder`'s id, serializes and signs.
absl::StatusOr<proto::SignedManifest> SignManifest(proto::SwarmManifest m,
                                                   const identity::Identity& founder);

// Checks sizes, the founder key (32 bytes, hashing to founder_id), the
// signature, the format and protocol version, and, when `expected_sha256`
// is not empty, that the manifest's hash is that one (a swarm file's pin).
absl::StatusOr<VerifiedManifest> VerifyManifest(const proto::SignedManifest& s,
                                                absl::string_view expected_sha256 = "");

// One line for logs: "model small (12 layers, d_model 256, 6 stages),
// tokenizer bytes, 100 iterations, lr 0.001, swarm skipswarm (TLS)".
std::string ManifestSummary(const proto::SwarmManifest& m);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_SIGNED_MANIFEST_H_

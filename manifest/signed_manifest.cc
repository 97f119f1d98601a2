#include "manifest/signed_manifest.h"

#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "proto/version.h"

namespace skipswarm::manifest {

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::StatusOr<proto::SignedManifest> SignManifest(proto::SwarmManifest m,
                                                   const identity::Identity& founder) {
  const std::string id = founder.id().Hex();
  m.set_founder_id(absl::HexStringToBytes(id));
  proto::SignedManifest s;
  // Deterministic for a given build; the hash is of these bytes as sent,
  // so receivers never re-serialize.
  if (!m.SerializeToString(s.mutable_manifest())) {
    return absl::InternalError("cannot serialize the swarm manifest");
  }
  if (s.manifest().size() > kMaxManifestBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the swarm manifest is ", s.manifest().size(),
                                                   " bytes; at most ", kMaxManifestBytes));
  }
  SS_ASSIGN_OR_RETURN(*s.mutable_signature(), founder.Sign(s.manifest()));
  s.set_founder_public_key(founder.public_key());
  return s;
}

absl::StatusOr<VerifiedManifest> VerifyManifest(const proto::SignedManifest& s,
                                                absl::string_view expected_sha256) {
  if (s.manifest().empty()) return absl::InvalidArgumentError("the swarm manifest is empty");
  if (s.manifest().size() > kMaxManifestBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the swarm manifest is ", s.manifest().size(),
                                                   " bytes; at most ", kMaxManifestBytes,
                                                   " are accepted"));
  }
  if (s.founder_public_key().size() != identity::kPublicKeyBytes) {
    return absl::UnauthenticatedError(absl::StrCat("the swarm manifest's founder key is ",
                                                   s.founder_public_key().size(),
                                                   " bytes, not an Ed25519 key"));
  }
  VerifiedManifest v;
  v.sha256 = Sha256Hex(s.manifest());
  if (!expected_sha256.empty() &&
      absl::AsciiStrToLower(std::string(expected_sha256)) != v.sha256) {
    return absl::UnauthenticatedError(
        absl::StrCat("the swarm manifest's sha256 is ", v.sha256, " but the swarm file pins ",
                     expected_sha256, ": this peer serves another swarm's manifest"));
  }
  absl::Status sig = identity::VerifySignature(s.founder_public_key(), s.manifest(), s.signature());
  if (!sig.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the swarm manifest's signature does not verify: ", sig.message()));
  }
  if (!v.manifest.ParseFromString(s.manifest())) {
    return absl::InvalidArgumentError("the swarm manifest is not a valid SwarmManifest");
  }
  v.founder = common::NodeId::FromPublicKey(s.founder_public_key());
  if (v.manifest.founder_id() != absl::HexStringToBytes(v.founder.Hex())) {
    return absl::UnauthenticatedError(
        "the swarm manifest names another founder than the key that signed it");
  }
  if (v.manifest.format() != kManifestFormat) {
    return absl::InvalidArgumentError(absl::StrCat("swarm manifest format ", v.manifest.format(),
                                                   "; this build reads format ", kManifestFormat,
                                                   " (upgrade skipswarm)"));
  }
  SS_RETURN_IF_ERROR(proto::CheckProtocolVersion(v.manifest.protocol_version()));
  v.signed_manifest = s;
  return v;
}

std::string ManifestSummary(const proto::SwarmManifest& m) {
  const proto::ManifestModel& model = m.model();
  return absl::StrFormat(
      "model %s (%d layers, d_model %d, %d heads, ffn %d, vocab %d, seq_len %d, %d stages), "
      "tokenizer %s, %d iterations, lr %g, %d MBs of %d samples per data node, swarm %s%s (%s, admission %s, %d allowed ids%s)",
      model.preset().empty() ? "custom" : model.preset(), model.num_layers(), model.d_model(),
      model.num_heads(), model.ffn_dim(), model.vocab_size(), model.seq_len(), model.num_stages(),
      m.tokenizer().kind(), m.optimizer().iterations(), m.optimizer().peak_lr(),
      m.data().mbs_per_iteration(), m.data().samples_per_mb(), m.admission().swarm_name(),
      m.admission().private_swarm() ? " (private)" : "",
      m.admission().tls() ? "TLS" : "plain text",
      m.admission().policy().empty() ? "open" : m.admission().policy(),
      m.admission().allowed_ids_size(), m.sign_frames() ? ", signed frames" : "");
}

}  // namespace skipswarm::manifest

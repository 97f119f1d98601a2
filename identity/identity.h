// A node's long-lived identity: an Ed25519 key pair, the NodeId derived from
// it (SHA-256 of the raw 32-byte public key) and a self-signed X.509
// certificate for mutual TLS.
//
//   SS_ASSIGN_OR_RETURN(auto identity, Identity::LoadOrCreate(path));
//   LOG(INFO) << "node id " << identity->id().Hex();
//   SS_ASSIGN_OR_RETURN(std::string sig, identity->Sign(bytes));
//   SS_RETURN_IF_ERROR(VerifySignature(identity->public_key(), bytes, sig));
//
// Key files are PEM (PKCS#8), so `openssl pkey -in node.key -noout -text`
// reads them. They are written atomically (temp file, fsync, rename) with
// mode 0600; Load refuses a key file that group or others can read, like ssh.
//
// Thread rule: an Identity is immutable after creation; all methods are
// thread-safe.
#ifndef SKIPSWARM_IDENTITY_IDENTITY_H_
#define SKIPSWARM_IDENTITY_IDENTITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/node_id.h"

namespace skipswarm::identity {

inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kSignatureBytes = 64;
// subjectAltName of every SkipSwarm certificate, and the TLS target name
// clients ask for (names carry no identity here; key hashes do).
inline constexpr char kCertificateDnsName[] = "skipswarm";

class Identity {
 public:
  ~Identity();
  Identity(const Identity&) = delete;
  Identity& operator=(const Identity&) = delete;

  // A fresh key pair from the OS random source.
  static absl::StatusOr<std::unique_ptr<Identity>> Generate();
  // Deterministic key from a 32-byte seed (tests and the simulator only;
  // a real node uses Generate).
  static absl::StatusOr<std::unique_ptr<Identity>> FromSeed(
      absl::string_view seed32);
  // Parses a PEM private key. Errors name what is wrong with it.
  static absl::StatusOr<std::unique_ptr<Identity>> FromPem(
      absl::string_view pem);
  // Reads `path` (NotFound if absent; FailedPrecondition if its mode lets
  // group/others read it).
  static absl::StatusOr<std::unique_ptr<Identity>> Load(
      const std::string& path);
  // Load, or Generate + Save when `path` does not exist.
  static absl::StatusOr<std::unique_ptr<Identity>> LoadOrCreate(
      const std::string& path);

  // Writes the private key atomically with mode 0600. Refuses to replace an
  // existing file unless `overwrite`.
  absl::Status Save(const std::string& path, bool overwrite = false) const;

  const common::NodeId& id() const { return id_; }
  // Raw 32-byte Ed25519 public key.
  const std::string& public_key() const { return public_key_; }
  std::string PrivateKeyPem() const;

  // Ed25519 signature (64 bytes) over `data`.
  absl::StatusOr<std::string> Sign(absl::string_view data) const;

  // Self-signed X.509 v3 certificate (PEM) for this key, subject
  // "CN=skipswarm-<id hex>", subjectAltName DNS:skipswarm, valid from
  // now-1d to now+`validity`.
  absl::StatusOr<std::string> SelfSignedCertificatePem(
      absl::Time now, absl::Duration validity = absl::Hours(24 * 3650)) const;

 private:
  struct Key;  // wraps EVP_PKEY
  explicit Identity(std::unique_ptr<Key> key);
  static absl::StatusOr<std::unique_ptr<Identity>> FromKey(
      std::unique_ptr<Key> key);

  std::unique_ptr<Key> key_;
  std::string public_key_;
  common::NodeId id_;
};

// OK iff `signature` is a valid Ed25519 signature of `data` by the raw
// 32-byte `public_key`; otherwise Unauthenticated / InvalidArgument.
absl::Status VerifySignature(absl::string_view public_key,
                             absl::string_view data,
                             absl::string_view signature);

// The raw Ed25519 public key inside a PEM certificate (InvalidArgument if it
// is not a parseable certificate with an Ed25519 key). Does not check dates
// or issuers: SkipSwarm certificates are self-signed and identity comes from
// the key's hash.
absl::StatusOr<std::string> PublicKeyFromCertificatePem(absl::string_view pem);

}  // namespace skipswarm::identity

#endif  // SKIPSWARM_IDENTITY_IDENTITY_H_

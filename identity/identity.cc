#include "common/atomic_file.h"
#include "identity/identity.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace skipswarm::identity {
namespace {

std::string OpenSslError() {
  unsigned long code = ERR_get_error();  // NOLINT(runtime/int): OpenSSL API
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(len));
}

std::string ErrnoMessage(absl::string_view what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

}  // namespace

struct Identity::Key {
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

Identity::Identity(std::unique_ptr<Key> key) : key_(std::move(key)) {}
Identity::~Identity() = default;

absl::StatusOr<std::unique_ptr<Identity>> Identity::FromKey(
    std::unique_ptr<Key> key) {
  if (key->pkey == nullptr || EVP_PKEY_id(key->pkey) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError("key is not an Ed25519 private key");
  }
  std::string pub(kPublicKeyBytes, '\0');
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(
          key->pkey, reinterpret_cast<unsigned char*>(pub.data()), &len) != 1 ||
      len != kPublicKeyBytes) {
    return absl::InternalError(
        absl::StrCat("cannot read public key: ", OpenSslError()));
  }
  std::unique_ptr<Identity> identity(new Identity(std::move(key)));
  identity->public_key_ = std::move(pub);
  identity->id_ = common::NodeId::FromPublicKey(identity->public_key_);
  return identity;
}

absl::StatusOr<std::unique_ptr<Identity>> Identity::Generate() {
  auto key = std::make_unique<Key>();
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx) != 1 ||
      EVP_PKEY_keygen(ctx, &key->pkey) != 1) {
    EVP_PKEY_CTX_free(ctx);
    return absl::InternalError(
        absl::StrCat("Ed25519 key generation failed: ", OpenSslError()));
  }
  EVP_PKEY_CTX_free(ctx);
  return FromKey(std::move(key));
}

absl::StatusOr<std::unique_ptr<Identity>> Identity::FromSeed(
    absl::string_view seed32) {
  if (seed32.size() != 32) {
    return absl::InvalidArgumentError("Ed25519 seed must be 32 bytes");
  }
  auto key = std::make_unique<Key>();
  key->pkey = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr,
      reinterpret_cast<const unsigned char*>(seed32.data()), seed32.size());
  if (key->pkey == nullptr) {
    return absl::InternalError(
        absl::StrCat("bad Ed25519 seed: ", OpenSslError()));
  }
  return FromKey(std::move(key));
}

absl::StatusOr<std::unique_ptr<Identity>> Identity::FromPem(
    absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  auto key = std::make_unique<Key>();
  key->pkey = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (key->pkey == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a PEM private key (expected the output of `skipswarm keygen`): ",
        OpenSslError()));
  }
  return FromKey(std::move(key));
}

absl::StatusOr<std::unique_ptr<Identity>> Identity::Load(
    const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "key file ", path, " does not exist; create one with "
          "`skipswarm keygen --key_file=", path, "`"));
    }
    return absl::PermissionDeniedError(ErrnoMessage("cannot stat", path));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "key file ", path, " is readable by group or others (mode 0",
        (st.st_mode >> 6) & 7, (st.st_mode >> 3) & 7, st.st_mode & 7,
        "); run `chmod 600 ", path,
        "`"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(ErrnoMessage("cannot read", path));
  std::stringstream buf;
  buf << in.rdbuf();
  auto identity = FromPem(buf.str());
  if (!identity.ok()) return common::Annotate(identity.status(), path);
  return identity;
}

absl::StatusOr<std::unique_ptr<Identity>> Identity::LoadOrCreate(
    const std::string& path) {
  auto loaded = Load(path);
  if (!absl::IsNotFound(loaded.status())) return loaded;
  SS_ASSIGN_OR_RETURN(auto identity, Generate());
  SS_RETURN_IF_ERROR(identity->Save(path));
  return identity;
}

std::string Identity::PrivateKeyPem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key_->pkey, nullptr, nullptr, 0, nullptr,
                           nullptr);
  return BioContents(bio.get());
}

absl::Status Identity::Save(const std::string& path, bool overwrite) const {
  if (!overwrite && access(path.c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "key file ", path,
        " already exists; refusing to replace a node identity (pass "
        "--overwrite_key to replace it; the node gets a new id)"));
  }
  return common::WriteFileAtomically(path, PrivateKeyPem(), 0600);
}

absl::StatusOr<std::string> Identity::Sign(absl::string_view data) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig(kSignatureBytes, '\0');
  size_t len = sig.size();
  bool ok = ctx != nullptr &&
            EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_->pkey) == 1 &&
            EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()),
                           &len,
                           reinterpret_cast<const unsigned char*>(data.data()),
                           data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != kSignatureBytes) {
    return absl::InternalError(absl::StrCat("signing failed: ", OpenSslError()));
  }
  return sig;
}

absl::StatusOr<std::string> Identity::SelfSignedCertificatePem(
    absl::Time now, absl::Duration validity) const {
  X509* x = X509_new();
  if (x == nullptr) return absl::InternalError("X509_new failed");
  std::unique_ptr<X509, decltype(&X509_free)> cert(x, &X509_free);
  X509_set_version(x, 2);
  // Serial: 64 bits of the node id keep certificates of distinct nodes
  // distinct without needing state.
  uint64_t serial = 0;
  std::memcpy(&serial, id_.Bytes().data(), sizeof(serial));
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial >> 1);
  time_t not_before = absl::ToTimeT(now - absl::Hours(24));
  time_t not_after = absl::ToTimeT(now + validity);
  if (X509_time_adj_ex(X509_getm_notBefore(x), 0, 0, &not_before) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(x), 0, 0, &not_after) == nullptr) {
    return absl::InternalError("cannot set certificate validity");
  }
  X509_NAME* name = X509_get_subject_name(x);
  const std::string cn = absl::StrCat("skipswarm-", id_.Hex());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(x, name);
  // A fixed DNS name that every client asks for (grpc_gossip.cc overrides
  // the TLS target name with it), so SNI matches whatever address a peer
  // was dialled at; identity comes from the key hash, not from names.
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
  const std::string alt_name = absl::StrCat("DNS:", kCertificateDnsName);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name,
                                            alt_name.c_str());
  if (san == nullptr || X509_add_ext(x, san, -1) != 1) {
    X509_EXTENSION_free(san);
    return absl::InternalError(
        absl::StrCat("cannot add subjectAltName: ", OpenSslError()));
  }
  X509_EXTENSION_free(san);
  if (X509_set_pubkey(x, key_->pkey) != 1 ||
      X509_sign(x, key_->pkey, nullptr) <= 0) {  // Ed25519: no digest
    return absl::InternalError(
        absl::StrCat("cannot sign certificate: ", OpenSslError()));
  }
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  return BioContents(bio.get());
}

absl::Status VerifySignature(absl::string_view public_key,
                             absl::string_view data,
                             absl::string_view signature) {
  if (public_key.size() != kPublicKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "public key must be ", kPublicKeyBytes, " bytes, got ",
        public_key.size()));
  }
  if (signature.size() != kSignatureBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "signature must be ", kSignatureBytes, " bytes, got ",
        signature.size()));
  }
  EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr,
      reinterpret_cast<const unsigned char*>(public_key.data()),
      public_key.size());
  if (pkey == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not an Ed25519 public key");
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok =
      ctx != nullptr &&
      EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
      EVP_DigestVerify(ctx,
                       reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(),
                       reinterpret_cast<const unsigned char*>(data.data()),
                       data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  if (!ok) {
    ERR_clear_error();
    return absl::UnauthenticatedError("bad Ed25519 signature");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PublicKeyFromCertificatePem(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
  if (x == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  EVP_PKEY* pkey = X509_get0_pubkey(x);
  std::string pub(kPublicKeyBytes, '\0');
  size_t len = pub.size();
  bool ok = pkey != nullptr && EVP_PKEY_id(pkey) == EVP_PKEY_ED25519 &&
            EVP_PKEY_get_raw_public_key(
                pkey, reinterpret_cast<unsigned char*>(pub.data()), &len) == 1 &&
            len == kPublicKeyBytes;
  X509_free(x);
  if (!ok) {
    ERR_clear_error();
    return absl::InvalidArgumentError("certificate key is not Ed25519");
  }
  return pub;
}


}  // namespace skipswarm::identity

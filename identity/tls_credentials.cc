#include "identity/tls_credentials.h"

#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "proto/grpc_status.h"

namespace skipswarm::identity {
namespace {

// Client side of Note [Peer authentication]: the server we dialled must be
// the node we meant. Runs synchronously inside the TLS handshake.
class ExpectedPeerVerifier final
    : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit ExpectedPeerVerifier(common::NodeId expected) : expected_(expected) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/,
              grpc::Status* sync_status) override {
    const grpc::string_ref pem = request->peer_cert();
    absl::StatusOr<common::NodeId> id =
        NodeIdFromCertificatePem(absl::string_view(pem.data(), pem.size()));
    absl::Status result;
    if (!id.ok()) {
      result = id.status();
    } else if (*id != expected_) {
      result = absl::UnauthenticatedError(
          absl::StrCat("the server's certificate is node ", id->ShortString(),
                       ", expected ", expected_.ShortString()));
    }
    if (!result.ok()) {
      LOG(WARNING) << "TLS: refused a server while dialling node "
                   << expected_.ShortString() << ": " << result.message();
    }
    *sync_status = proto::ToGrpcStatus(result);
    return true;
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  const common::NodeId expected_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const PeerCredentials>> PeerCredentials::Create(
    const GrpcSecurity& security, absl::Time now) {
  if (security.insecure) return Insecure();
  if (security.identity == nullptr) {
    return absl::InvalidArgumentError(
        "TLS needs the node identity (or run with --insecure for local tests)");
  }
  absl::StatusOr<std::string> cert =
      security.identity->SelfSignedCertificatePem(now);
  if (!cert.ok()) return cert.status();
  std::shared_ptr<PeerCredentials> creds(new PeerCredentials());
  creds->id_ = security.identity->id();
  creds->provider_ =
      std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
          std::vector<grpc::experimental::IdentityKeyCertPair>{
              {security.identity->PrivateKeyPem(), *std::move(cert)}});
  return creds;
}

std::shared_ptr<const PeerCredentials> PeerCredentials::Insecure() {
  return std::shared_ptr<const PeerCredentials>(new PeerCredentials());
}

std::shared_ptr<grpc::ServerCredentials> PeerCredentials::ForServer() const {
  if (insecure()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(provider_);
  options.watch_identity_key_cert_pairs();
  // Self-signed peers: ask for the client certificate but do not check it
  // against a CA; each call checks that its key hashes to the sender id.
  options.set_cert_request_type(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> PeerCredentials::ForChannel(
    const common::NodeId& expected) const {
  if (insecure()) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider_);
  options.watch_identity_key_cert_pairs();
  // No CA and no host name: identity is the key hash (Note [Peer
  // authentication]), checked in the handshake or per call.
  options.set_verify_server_certs(false);
  options.set_check_call_host(false);
  if (expected.IsZero()) {
    options.set_certificate_verifier(
        std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  } else {
    options.set_certificate_verifier(
        grpc::experimental::ExternalCertificateVerifier::Create<
            ExpectedPeerVerifier>(expected));
  }
  return grpc::experimental::TlsCredentials(options);
}

void PeerCredentials::ConfigureChannel(grpc::ChannelArguments& args) const {
  if (!insecure()) args.SetSslTargetNameOverride(kCertificateDnsName);
}

absl::Status PeerCredentials::CheckPeer(
    const std::shared_ptr<const grpc::AuthContext>& auth,
    const common::NodeId& claimed) const {
  if (insecure()) return absl::OkStatus();
  if (auth == nullptr) return absl::UnauthenticatedError("no TLS context");
  absl::StatusOr<common::NodeId> id = PeerIdFromAuthContext(*auth);
  if (!id.ok()) return id.status();
  if (*id != claimed) {
    return absl::UnauthenticatedError(
        absl::StrCat("peer's certificate is node ", id->ShortString(),
                     " but it claims to be ", claimed.ShortString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<common::NodeId> NodeIdFromCertificatePem(absl::string_view pem) {
  if (pem.empty()) {
    return absl::UnauthenticatedError("peer presented no TLS certificate");
  }
  absl::StatusOr<std::string> key = PublicKeyFromCertificatePem(pem);
  if (!key.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("peer certificate: ", key.status().message()));
  }
  return common::NodeId::FromPublicKey(*key);
}

absl::StatusOr<common::NodeId> PeerIdFromAuthContext(
    const grpc::AuthContext& auth) {
  std::vector<grpc::string_ref> pems = auth.FindPropertyValues("x509_pem_cert");
  if (pems.empty()) {
    return absl::UnauthenticatedError("peer presented no TLS certificate");
  }
  return NodeIdFromCertificatePem(absl::string_view(pems[0].data(), pems[0].size()));
}

}  // namespace skipswarm::identity

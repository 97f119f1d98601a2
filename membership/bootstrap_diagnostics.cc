#include "membership/bootstrap_diagnostics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::membership {

const char* JoinStepName(JoinStep step) {
  switch (step) {
    case JoinStep::kDns: return "dns";
    case JoinStep::kTcp: return "tcp";
    case JoinStep::kTls: return "tls";
    case JoinStep::kIdentity: return "identity";
    case JoinStep::kVersion: return "version";
    case JoinStep::kSwarm: return "swarm";
    case JoinStep::kAdmission: return "admission";
    case JoinStep::kTimeout: return "timeout";
    case JoinStep::kOther: return "other";
  }
  return "other";
}

JoinStep ClassifyGossipError(const absl::Status& status) {
  // gRPC reports transport failures as UNAVAILABLE with a free-text message;
  // the phrases below are gRPC 1.51's (core/ext/filters/client_channel,
  // tsi/ssl_transport_security).
  const std::string msg = absl::AsciiStrToLower(status.message());
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      if (absl::StrContains(msg, "protocol version")) return JoinStep::kVersion;
      if (absl::StrContains(msg, "swarm")) return JoinStep::kSwarm;
      return JoinStep::kOther;
    case absl::StatusCode::kUnauthenticated: return JoinStep::kIdentity;
    case absl::StatusCode::kPermissionDenied: return JoinStep::kAdmission;
    case absl::StatusCode::kDeadlineExceeded: return JoinStep::kTimeout;
    default: break;
  }
  if (absl::StrContains(msg, "dns") || absl::StrContains(msg, "resolution") ||
      absl::StrContains(msg, "name or service not known") ||
      absl::StrContains(msg, "domain name not found")) {
    return JoinStep::kDns;
  }
  if (absl::StrContains(msg, "handshake") || absl::StrContains(msg, "ssl") ||
      absl::StrContains(msg, "tls") || absl::StrContains(msg, "certificate")) {
    return JoinStep::kTls;
  }
  // The TCP connection was accepted and then closed without a word: what a
  // TLS server does to a plain-text (--insecure) client's HTTP/2 preface
  // (measured: gRPC reports "Socket closed"; a closed port says "refused").
  if (absl::StrContains(msg, "socket closed") && !absl::StrContains(msg, "refused")) {
    return JoinStep::kTls;
  }
  if (absl::StrContains(msg, "connect") || absl::StrContains(msg, "refused") ||
      absl::StrContains(msg, "unreachable") ||
      absl::StrContains(msg, "no host")) {
    return JoinStep::kTcp;
  }
  return JoinStep::kOther;
}

std::string JoinStepHint(JoinStep step) {
  switch (step) {
    case JoinStep::kDns:
      return "the host name does not resolve; check its spelling or use an IP "
             "address ([v6]:port for IPv6)";
    case JoinStep::kTcp:
      return "nothing accepts connections there; is the peer running, is the "
             "port right, and do firewalls / NAT port forwarding let it in?";
    case JoinStep::kTls:
      return "TLS handshake failed; both sides must use TLS (or both "
             "--insecure), and each needs its key from `skipswarm keygen`";
    case JoinStep::kIdentity:
      return "the peer's certificate does not match the node id it claims; "
             "it may be an impostor or use another key file";
    case JoinStep::kVersion:
      return "the nodes run incompatible skipswarm versions; upgrade the "
             "older one";
    case JoinStep::kSwarm:
      return "the peer belongs to another swarm; both sides need the same "
             "--swarm_name and --swarm_secret";
    case JoinStep::kAdmission:
      return "the swarm admits only invited or listed nodes (its manifest's "
             "admission policy); send our node id (`skipswarm keygen "
             "--show_key`) to its founder and pass the invite it makes "
             "(`skipswarm invite --node_id=...`) with --invite";
    case JoinStep::kTimeout:
      return "no answer in time; the peer may be overloaded or packets are "
             "dropped on the way";
    case JoinStep::kOther:
      return "see the error above";
  }
  return "";
}

absl::Status ExplainGossipError(const absl::Status& status,
                                const std::string& address) {
  if (status.ok()) return status;
  const JoinStep step = ClassifyGossipError(status);
  return absl::Status(status.code(),
                      absl::StrCat(address, ": [", JoinStepName(step), "] ",
                                   status.message(),
                                   "; hint: ", JoinStepHint(step)));
}

}  // namespace skipswarm::membership

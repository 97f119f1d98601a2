#include "manifest/bootstrap.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/backoff.h"
#include "manifest/join_challenge.h"
#include "manifest/manifest_service.h"
#include "membership/bootstrap_diagnostics.h"
#include "membership/join_work.h"

namespace skipswarm::manifest {
namespace {

std::string Hint(const std::string& step) {
  using membership::JoinStep;
  if (step == "http") {
    return "an HTTP server answered there: that is a node's metrics or status port; --join "
           "takes its node port, the one its start line prints as 'advertised as HOST:PORT'";
  }
  if (step == "admission") {
    return "the swarm refused us: use the swarm's --swarm_name and --swarm_secret (ask its "
           "operator)";
  }
  if (step == "manifest") {
    return "this peer is not serving the swarm you meant (or runs an older skipswarm); check "
           "the address or get a fresh swarm file from the founder";
  }
  if (step == "busy") {
    return "the peer refused for its budget of unknown callers (busy, or a flood of them); "
           "retried until --startup_timeout_s; in an invite swarm pass --invite so the peer "
           "can tell us from the flood (an open swarm's peer that asks join work, and an "
           "allow-list swarm's peer that gives a challenge, are answered at once)";
  }
  if (step == "dns") return membership::JoinStepHint(JoinStep::kDns);
  if (step == "tcp") return membership::JoinStepHint(JoinStep::kTcp);
  if (step == "tls") return membership::JoinStepHint(JoinStep::kTls);
  if (step == "timeout") return membership::JoinStepHint(JoinStep::kTimeout);
  if (step == "version") return membership::JoinStepHint(JoinStep::kVersion);
  return "see the error above";
}

// Steps worth trying again until the timeout: the peer may still be
// starting (refused) or busy.
bool Transient(const std::string& step) {
  return step == "tcp" || step == "timeout" || step == "other" || step == "busy";
}

// A connected TCP socket to `address` within `timeout`, or -1.
int ConnectWithin(const std::string& address, absl::Duration timeout) {
  auto [host, port] = SplitHostPort(address);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) return -1;
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

// Note [Manifest joiners]: the join work `ask` names, for `public_key`,
// solved in slices so the search ends at `deadline`; nullopt past it.
std::optional<uint64_t> SolveAskedWork(const JoinWorkAsk& ask, const std::string& public_key,
                                       absl::Duration deadline, common::RealClock* clock) {
  constexpr uint64_t kSlice = uint64_t{1} << 16;
  for (uint64_t first = 0; clock->SteadyNow() < deadline; first += kSlice) {
    absl::StatusOr<uint64_t> nonce =
        membership::SolveJoinWork(ask.manifest_id, public_key, ask.bits, first, kSlice);
    if (nonce.ok()) return *nonce;
    if (!absl::IsResourceExhausted(nonce.status())) return std::nullopt;
  }
  return std::nullopt;
}

// Note [Manifest joiners]: the proof answering a seed's `challenge`,
// signed by `signer`, into `proof`; false (nothing changed) when there is
// nothing new to answer: no signer, or the challenge proof already
// answers (the seed refused it for the joiners' budget: wait, then ask).
bool AnswerChallenge(const std::optional<std::string>& challenge,
                     const identity::Identity* signer, const std::string& swarm_id,
                     JoinerProof* proof) {
  if (!challenge.has_value() || signer == nullptr || *challenge == proof->challenge) {
    return false;
  }
  absl::StatusOr<std::string> signature = SignJoinChallenge(*signer, swarm_id, *challenge);
  if (!signature.ok()) {
    LOG(WARNING) << "cannot sign the seed's join challenge: " << signature.status();
    return false;
  }
  proof->challenge = *challenge;
  proof->signature = *std::move(signature);
  proof->node_id = signer->id().Bytes();
  proof->public_key = signer->public_key();
  return true;
}

}  // namespace

bool AnswersHttp(const std::string& address, absl::Duration timeout) {
  if (!CheckJoinAddress(address).ok()) return false;
  const int fd = ConnectWithin(address, timeout);
  if (fd < 0) return false;
  const std::string request = "GET / HTTP/1.0\r\nHost: skipswarm\r\n\r\n";
  bool http = false;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    pollfd p{fd, POLLIN, 0};
    char buf[8] = {};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      http = n >= 5 && absl::string_view(buf, 5) == "HTTP/";
    }
  }
  close(fd);
  return http;
}

absl::Status ResolveJoinHost(const std::string& address) {
  auto [host, port] = SplitHostPort(address);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (res != nullptr) freeaddrinfo(res);
  if (rc == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(address, ": [dns] cannot resolve '", host,
                                             "': ", gai_strerror(rc), "; hint: ", Hint("dns")));
}

std::string ClassifyBootstrapError(const absl::Status& status, const std::string& address) {
  const std::string msg = absl::AsciiStrToLower(status.message());
  switch (status.code()) {
    case absl::StatusCode::kPermissionDenied: return "admission";
    case absl::StatusCode::kUnimplemented: return "manifest";
    case absl::StatusCode::kResourceExhausted:
      // A quota's refusal ("... is over its ... quota (...)"), or gRPC's own
      // for an answer above our receive limit (an oversized manifest).
      return absl::StrContains(msg, " quota (") ? "busy" : "manifest";
    case absl::StatusCode::kFailedPrecondition:
      if (absl::StrContains(msg, "protocol version")) return "version";
      break;
    default: break;
  }
  // A metrics / status server: gRPC sees a TLS handshake fail or an
  // HTTP/1.x answer; only asking it in HTTP tells them apart for sure.
  if (status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kDeadlineExceeded ||
      status.code() == absl::StatusCode::kInternal || status.code() == absl::StatusCode::kUnknown) {
    if (!absl::StrContains(msg, "refused") && AnswersHttp(address, absl::Seconds(1))) {
      return "http";
    }
  }
  return membership::JoinStepName(membership::ClassifyGossipError(status));
}

absl::Status ExplainBootstrapError(const absl::Status& status, const std::string& address) {
  if (status.ok()) return status;
  const std::string step = ClassifyBootstrapError(status, address);
  return absl::Status(status.code(), absl::StrCat(address, ": [", step, "] ", status.message(),
                                                  "; hint: ", Hint(step)));
}

absl::StatusOr<VerifiedManifest> FetchSwarmManifest(const JoinTargets& targets,
                                                    const BootstrapOptions& options,
                                                    common::RealClock* clock,
                                                    uint64_t* join_work) {
  std::map<std::string, absl::Status> errors;
  std::set<std::string> done;  // final failures
  for (const std::string& a : targets.addresses) {
    absl::Status ok = CheckJoinAddress(a);
    if (ok.ok()) ok = ResolveJoinHost(a);
    if (!ok.ok()) {
      errors[a] = ok;
      done.insert(a);
    }
  }
  const absl::Duration deadline = clock->SteadyNow() + options.timeout;
  bool waiting_logged = false;
  // Note [Manifest joiners]: a busy peer is asked again after a growing,
  // jittered delay; a starting one (tcp) every 200 ms as before.
  common::Backoff busy_backoff({absl::Milliseconds(200), absl::Seconds(2)}, options.backoff_seed);
  JoinerProof proof = options.proof;
  std::optional<JoinWorkAsk> solved;  // what proof's join work answers
  // Whether a challenge was answered at once since the last wait: a seed
  // giving a new challenge at every call (a liar) gets at most one
  // immediate retry per backoff.
  bool challenge_retried = false;
  while (done.size() < targets.addresses.size()) {
    bool busy = false;
    bool retry_now = false;
    for (const std::string& a : targets.addresses) {
      if (done.count(a)) continue;
      const absl::Duration left = std::max(absl::Milliseconds(100), deadline - clock->SteadyNow());
      SeedAsks asks;
      absl::StatusOr<proto::SignedManifest> got =
          CallGetManifest(a, options.credentials, options.swarm_id,
                          std::min(options.call_timeout, left), proof, &asks);
      const std::optional<JoinWorkAsk>& ask = asks.work;
      if (got.ok()) {
        absl::StatusOr<VerifiedManifest> v = VerifyManifest(*got, targets.pinned_sha256);
        if (v.ok()) {
          if (join_work != nullptr && solved.has_value() && solved->manifest_id == v->sha256) {
            *join_work = proof.join_work;
          }
          return v;
        }
        errors[a] = absl::Status(v.status().code(),
                                 absl::StrCat(a, ": [manifest] ", v.status().message(),
                                              "; hint: ", Hint("manifest")));
        done.insert(a);
        continue;
      }
      const std::string step = ClassifyBootstrapError(got.status(), a);
      busy = busy || step == "busy";
      // Note [Manifest joiners]: an open swarm's seed asked join work; with
      // a swarm file only the pinned manifest's (a lying seed gets none).
      if (step == "busy" && ask.has_value() && !options.public_key.empty() &&
          (targets.pinned_sha256.empty() || ask->manifest_id == targets.pinned_sha256) &&
          !(solved.has_value() && solved->manifest_id == ask->manifest_id &&
            solved->bits >= ask->bits)) {
        const absl::Duration start = clock->SteadyNow();
        if (std::optional<uint64_t> nonce =
                SolveAskedWork(*ask, options.public_key, deadline, clock)) {
          proof.public_key = options.public_key;
          proof.join_work = *nonce;
          solved = ask;
          retry_now = true;
          LOG(INFO) << a << " is busy and asks join work: " << ask->bits
                    << " bits for swarm manifest " << ask->manifest_id.substr(0, 12)
                    << ", solved in " << clock->SteadyNow() - start << "; asking again with it";
        }
      }
      // Note [Manifest joiners]: a listed id's seed gave a challenge.
      if (step == "busy" &&
          AnswerChallenge(asks.challenge, options.signer, options.swarm_id, &proof) &&
          !challenge_retried) {
        retry_now = true;
        challenge_retried = true;
        LOG(INFO) << a << " is busy and gave a join challenge; asking again with its signature";
      }
      errors[a] = absl::Status(got.status().code(),
                               absl::StrCat(a, ": [", step, "] ", got.status().message(),
                                            "; hint: ", Hint(step)));
      if (!Transient(step)) done.insert(a);
    }
    if (done.size() == targets.addresses.size() || clock->SteadyNow() >= deadline) break;
    if (!waiting_logged) {
      // Said at once, explained: a wrong port should not look like a hang.
      LOG(WARNING) << "no bootstrap peer served the swarm manifest yet ("
                   << errors.begin()->second.message() << "); retrying for up to "
                   << options.timeout << " (--startup_timeout_s)";
      waiting_logged = true;
    }
    if (retry_now) continue;
    challenge_retried = false;
    clock->SleepFor(std::min(busy ? busy_backoff.Next() : absl::Milliseconds(200),
                             std::max(absl::ZeroDuration(), deadline - clock->SteadyNow())));
  }
  std::vector<std::string> lines;
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  for (const std::string& a : targets.addresses) {
    lines.push_back(std::string(errors[a].message()));
    code = errors[a].code();
  }
  if (targets.addresses.size() > 1) code = absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrCat("cannot fetch the swarm manifest from --join (",
                                         targets.addresses.size(), " address(es)):\n  ",
                                         absl::StrJoin(lines, "\n  ")));
}

}  // namespace skipswarm::manifest

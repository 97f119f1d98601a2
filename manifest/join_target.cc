#include "manifest/join_target.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "manifest/swarm_file.h"

namespace skipswarm::manifest {
namespace {

absl::Status AddressError(absl::string_view address, absl::string_view what,
                          absl::string_view hint) {
  return absl::InvalidArgumentError(
      absl::StrCat("--join=", address, ": [address] ", what, "; hint: ", hint));
}

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

absl::Status CheckJoinAddress(absl::string_view address) {
  if (address.empty()) return AddressError(address, "empty address", "give HOST:PORT");
  const size_t scheme = address.find("://");
  if (scheme != absl::string_view::npos) {
    // The usual slip: copying the status page's or metrics' URL.
    absl::string_view rest = address.substr(scheme + 3);
    rest = rest.substr(0, rest.find('/'));
    return AddressError(address, "a URL, not a node address",
                        absl::StrCat("give the node's HOST:PORT without a scheme or path, e.g. "
                                     "--join=", rest.empty() ? "HOST:7000" : std::string(rest),
                                     " (and the node port, not its metrics port)"));
  }
  if (absl::StrContains(address, '/')) {
    return AddressError(address, "contains '/': not HOST:PORT", "give HOST:PORT, e.g. host:7000");
  }
  absl::string_view host, port;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return AddressError(address, "'[' without ']'", "write IPv6 addresses as [v6]:PORT");
    }
    host = address.substr(1, close - 1);
    absl::string_view after = address.substr(close + 1);
    if (!absl::ConsumePrefix(&after, ":") || after.empty()) {
      return AddressError(address, "no port", "add the node's gossip port: [v6]:PORT");
    }
    port = after;
  } else {
    const size_t colons = std::count(address.begin(), address.end(), ':');
    if (colons > 1) {
      return AddressError(address, "an IPv6 address needs brackets",
                          "write it as [v6]:PORT, e.g. [::1]:7000");
    }
    if (colons == 0) {
      return AddressError(address, "no port",
                          absl::StrCat("add the node's gossip port, e.g. --join=", address,
                                       ":7000 (the node prints 'gossip on HOST:PORT' at start)"));
    }
    const size_t colon = address.find(':');
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (host.empty()) return AddressError(address, "no host", "give HOST:PORT");
  int p = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &p)) {
    return AddressError(address, absl::StrCat("port '", port, "' is not a number"),
                        "give HOST:PORT with a numeric port");
  }
  if (p < 1 || p > 65535) {
    return AddressError(address, absl::StrCat("port ", p, " is outside 1..65535"),
                        "give the port the node listens on");
  }
  return absl::OkStatus();
}

std::pair<std::string, std::string> SplitHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  std::string host(address.substr(0, colon));
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  return {host, std::string(address.substr(colon + 1))};
}

absl::StatusOr<JoinTargets> ParseJoinFlag(absl::string_view flag) {
  JoinTargets t;
  auto add = [&t](const std::string& a) {
    if (std::find(t.addresses.begin(), t.addresses.end(), a) == t.addresses.end()) {
      t.addresses.push_back(a);
    }
  };
  for (absl::string_view raw : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    const std::string entry(absl::StripAsciiWhitespace(raw));
    if (entry.empty()) continue;
    if (absl::EndsWith(entry, ".json") || IsFile(entry)) {
      absl::StatusOr<SwarmFile> file = ReadSwarmFile(entry);
      if (!file.ok()) {
        return absl::Status(file.status().code(),
                            absl::StrCat("--join=", entry, ": [swarm-file] ",
                                         file.status().message()));
      }
      if (!t.pinned_sha256.empty() && t.pinned_sha256 != file->manifest_sha256) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--join names swarm files of two swarms (manifests ", t.pinned_sha256, " and ",
            file->manifest_sha256, "); give one"));
      }
      t.pinned_sha256 = file->manifest_sha256;
      t.swarm_name = file->swarm_name;
      for (const std::string& a : file->bootstrap) add(a);
      continue;
    }
    absl::Status ok = CheckJoinAddress(entry);
    if (!ok.ok()) return ok;
    add(entry);
  }
  if (t.addresses.empty()) {
    return absl::InvalidArgumentError("--join names no bootstrap address");
  }
  return t;
}

}  // namespace skipswarm::manifest

#include "node/daemon/gossip/advertise_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

// The local address the kernel picks towards `peer` ("host:port"), or "".
std::string SourceAddressTowards(const std::string& peer) {
  absl::StatusOr<HostPort> hp = ParseHostPort(peer, "--join");
  if (!hp.ok()) return "";
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(), &hints, &found) != 0) {
    return "";
  }
  std::string out;
  for (addrinfo* a = found; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local;
    socklen_t len = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {0};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr = local.ss_family == AF_INET
                             ? static_cast<const void*>(
                                   &reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                             : static_cast<const void*>(
                                   &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, addr, text, sizeof(text)) != nullptr) out = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return out;
}

std::string FirstInterfaceAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string out;
  for (ifaddrs* i = all; i != nullptr && out.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                  sizeof(text)) != nullptr) {
      out = text;
    }
  }
  freeifaddrs(all);
  return out;
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, absl::string_view flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", text, ": ", why, " (want HOST:PORT, or [IPv6]:PORT)"));
  };
  HostPort hp;
  size_t colon;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("no closing ']'");
    hp.host = std::string(text.substr(1, close - 1));
    colon = close + 1;
    if (colon >= text.size() || text[colon] != ':') return bad("no port");
  } else {
    colon = text.rfind(':');
    if (colon == absl::string_view::npos) return bad("no port");
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) return bad("an IPv6 address needs brackets");
  }
  if (!absl::SimpleAtoi(text.substr(colon + 1), &hp.port) || hp.port < 0 || hp.port > 65535) {
    return bad("the port is not a number in [0, 65535]");
  }
  return hp;
}

std::string FormatHostPort(const HostPort& hp) {
  return hp.host.find(':') != std::string::npos ? absl::StrCat("[", hp.host, "]:", hp.port)
                                                 : absl::StrCat(hp.host, ":", hp.port);
}

bool IsUnspecifiedHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "0:0:0:0:0:0:0:0";
}

absl::StatusOr<std::string> ResolveAdvertiseAddress(const std::string& listen,
                                                    const std::string& advertise, int bound_port,
                                                    const std::vector<std::string>& join) {
  HostPort hp;
  if (!advertise.empty()) {
    absl::StatusOr<HostPort> a = ParseHostPort(advertise, "--advertise");
    if (!a.ok()) return a.status();
    hp = *a;
  } else {
    absl::StatusOr<HostPort> l = ParseHostPort(listen, "--listen");
    if (!l.ok()) return l.status();
    hp = *l;
  }
  if (hp.port == 0) hp.port = bound_port;
  if (IsUnspecifiedHost(hp.host)) {
    std::string host;
    if (!join.empty()) host = SourceAddressTowards(join.front());
    if (host.empty()) host = FirstInterfaceAddress();
    hp.host = host.empty() ? "127.0.0.1" : host;
  }
  return FormatHostPort(hp);
}

}  // namespace skipswarm::node

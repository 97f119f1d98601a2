#include "common/caller_key.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::common {
namespace {

// gRPC writes a few dozen characters; anything longer is not an address.
constexpr size_t kMaxAddressChars = 128;
// Interface names are at most IF_NAMESIZE - 1 (15) characters, scope ids
// at most 10 digits.
constexpr size_t kMaxZoneChars = 16;

int HexValue(char c) {
  if (absl::ascii_isdigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool HasAddressScheme(absl::string_view grpc_peer) {
  return absl::StartsWith(grpc_peer, "ipv4:") || absl::StartsWith(grpc_peer, "ipv6:");
}

// The host of "[host]:port", "[host]" or "host:port"; an unbracketed
// string with more than one ':' is an IPv6 address without a port.
absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? address.substr(1) : address.substr(1, close - 1);
  }
  const size_t colon = address.find(':');
  if (colon != absl::string_view::npos && address.find(':', colon + 1) == absl::string_view::npos) {
    return address.substr(0, colon);
  }
  return address;
}

std::string Ipv4KeyOf(const uint8_t* bytes) {
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, bytes, text, sizeof(text));
  return absl::StrCat("ipv4:", text);
}

std::optional<std::string> Ipv4Key(absl::string_view host) {
  std::array<uint8_t, 4> bytes;
  if (inet_pton(AF_INET, std::string(host).c_str(), bytes.data()) != 1) return std::nullopt;
  return Ipv4KeyOf(bytes.data());
}

// A zone kept in a key: an interface name or scope id, nothing else.
bool IsZone(absl::string_view zone) {
  if (zone.empty() || zone.size() > kMaxZoneChars) return false;
  for (char c : zone) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

// Note [Caller keys]: the /64, a mapped address as IPv4, a link-local
// caller's zone kept.
std::optional<std::string> Ipv6Key(absl::string_view host) {
  const size_t percent = host.find('%');
  const absl::string_view zone =
      percent == absl::string_view::npos ? absl::string_view() : host.substr(percent + 1);
  std::array<uint8_t, 16> bytes;
  if (inet_pton(AF_INET6, std::string(host.substr(0, percent)).c_str(), bytes.data()) != 1) {
    return std::nullopt;
  }
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(kMapped, kMapped + 12, bytes.begin())) return Ipv4KeyOf(bytes.data() + 12);
  const bool link_local = bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;  // fe80::/10
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, bytes.data(), text, sizeof(text));
  std::string key = absl::StrCat("ipv6:", text, "/64");
  if (link_local && IsZone(zone)) absl::StrAppend(&key, "%", zone);
  return key;
}

// The peer string without a trailing ":port" (none after the scheme's).
std::string WithoutPort(absl::string_view peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == absl::string_view::npos || colon == scheme) return std::string(peer);
  return std::string(peer.substr(0, colon));
}

}  // namespace

std::string PercentDecoded(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string GrpcPeerAddress(absl::string_view grpc_peer) {
  if (!HasAddressScheme(grpc_peer)) return std::string(grpc_peer);
  return PercentDecoded(grpc_peer.substr(5));
}

std::string CallerKey(absl::string_view grpc_peer) {
  if (grpc_peer.size() <= kMaxAddressChars && HasAddressScheme(grpc_peer)) {
    const std::string address = GrpcPeerAddress(grpc_peer);
    const absl::string_view host = HostOf(address);
    if (std::optional<std::string> key = Ipv6Key(host)) return *std::move(key);
    if (std::optional<std::string> key = Ipv4Key(host)) return *std::move(key);
  }
  return WithoutPort(grpc_peer);
}

}  // namespace skipswarm::common

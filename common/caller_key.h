// CallerKey: the key a service a stranger can reach charges a caller known
// only by its address to (PeerQuota::AdmitKey; Note [Caller keys]); and
// GrpcPeerAddress, the caller's address as a dialable "host:port".
//
//   quota->AdmitKey(common::CallerKey(context->peer()), PeerClass::kStranger, bytes);
//   response->set_observed_address(common::GrpcPeerAddress(context->peer()));
//
// Thread rule: a pure function.
#ifndef SKIPSWARM_COMMON_CALLER_KEY_H_
#define SKIPSWARM_COMMON_CALLER_KEY_H_

#include <string>

#include "absl/strings/string_view.h"

namespace skipswarm::common {

// Note [Caller keys]
// * A per-address budget is only as strong as an address is scarce. An
//   IPv4 host usually has one address, but an IPv6 host is routed a whole
//   /64 (2^64 addresses: SLAAC and privacy addresses let it send from any
//   of them), so keying by the full IPv6 address gave one host as many
//   stranger budgets as it cared to use addresses.
// * So an IPv6 caller is keyed by its /64 prefix ("ipv6:2001:db8:1:2::/64"),
//   an IPv4 caller by its address ("ipv4:10.0.0.1"), and an IPv4-mapped
//   IPv6 address (::ffff:a.b.c.d) as the IPv4 address it carries. The
//   price: hosts sharing one /64 (one LAN) share one stranger budget, as
//   hosts behind one IPv4 NAT already do. A link-local caller's zone (the
//   interface) stays in its key: fe80::/64 names a different link on each.
// * The input is gRPC's peer string, which gRPC writes as a URI: 1.51
//   writes "ipv4:10.0.0.1:5000", "ipv6:%5B::1%5D:5000" (brackets percent-
//   escaped) and "ipv6:%5Bfe80::1%254%5D:5000" (zone: "%" escaped, then
//   the numeric scope id); it already writes a mapped address as ipv4.
//   The unescaped forms ("ipv6:[::1]:5000", "[fe80::1%eth0]") are read
//   too. Anything else (unix:, an address that does not parse) is keyed by
//   the whole string without a trailing ":port" (a caller does not choose
//   it: gRPC writes it from the socket).

// The quota key of the caller gRPC names `grpc_peer` (ServerContext::peer()).
std::string CallerKey(absl::string_view grpc_peer);

// The address gRPC's peer string names, its scheme removed and
// percent-decoded: "ipv4:10.0.0.1:5000" -> "10.0.0.1:5000",
// "ipv6:%5B::1%5D:5000" -> "[::1]:5000", "ipv6:%5Bfe80::1%254%5D:5000" ->
// "[fe80::1%4]:5000". A string with another scheme (or none) comes back
// unchanged.
std::string GrpcPeerAddress(absl::string_view grpc_peer);

// URI percent-decoding of each "%XX" (XX hex); a '%' not followed by two
// hex digits is kept, so an unescaped zone ("[fe80::1%eth0]") reads as
// written.
std::string PercentDecoded(absl::string_view s);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_CALLER_KEY_H_

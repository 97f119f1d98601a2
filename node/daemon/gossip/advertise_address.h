// The address a daemon puts in its record (what peers dial): `--advertise`,
// or by default the `--listen` address, with what only the bound socket
// knows filled in.
//
//   SS_ASSIGN_OR_RETURN(std::string a, ResolveAdvertiseAddress(
//       "0.0.0.0:0", /*advertise=*/"", server.port(), {"10.0.0.1:7000"}));
//   // "10.0.0.7:41234": our source address towards the bootstrap peer
//
// Rules: port 0 (in --advertise or --listen) becomes the bound port; an
// unspecified host (empty, 0.0.0.0, ::) becomes the local address this
// host uses towards the first --join address (a connected UDP socket: no
// packet is sent), else the first non-loopback IPv4 address of an
// interface that is up, else 127.0.0.1. A host name is kept as given.
//
// Thread rule: thread-safe (no state).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_ADVERTISE_ADDRESS_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_ADVERTISE_ADDRESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::node {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

// "host:port" or "[v6]:port"; InvalidArgument naming `flag` otherwise.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, absl::string_view flag);
// Brackets an IPv6 literal.
std::string FormatHostPort(const HostPort& hp);
bool IsUnspecifiedHost(absl::string_view host);

absl::StatusOr<std::string> ResolveAdvertiseAddress(const std::string& listen,
                                                    const std::string& advertise, int bound_port,
                                                    const std::vector<std::string>& join);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_ADVERTISE_ADDRESS_H_

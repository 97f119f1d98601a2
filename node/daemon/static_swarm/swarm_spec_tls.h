// Security of a static `--swarm` node (NodeDaemon): mutual TLS from the
// node's key, with every peer pinned to the node id its --swarm entry
// names, or plain text behind an explicit --insecure. Gossip nodes get the
// same credentials through swarm_membership.h; here the list, not signed
// records, says who is who.
//
//   SS_ASSIGN_OR_RETURN(StaticSwarmTls tls,
//                       StaticSwarmTls::Create({key_file, insecure}, swarm, name, now));
//   transport_options.credentials = tls.credentials;   // pipeline streams
//   group_options.credentials = tls.credentials;       // replica averaging
//   group_options.members_only = true;
//   transport = std::make_unique<ListedPeersOnlyTransport>(std::move(transport), ids);
//
// Note [Static swarm security]: every entry of the list carries its node's
// id (NAME/STAGES/PIPE/GROUP/ID, the key hash `skipswarm keygen` prints),
// so the id a peer is dialled as, and the id a caller claims, are key
// hashes; identity/tls_credentials.h then does the rest: a channel to a
// member fails its handshake unless the server's certificate is that
// member's key, and a server refuses a stream or push whose certificate is
// not the claimed sender's. Create refuses a list with an entry without
// an id (nobody could check that peer), a key file whose id is not this
// node's entry (it would be refused by everyone), and neither or both of
// --node_key_file and --insecure (plain text is never a default).
// A node with a valid key of its own that the list does not name proves
// who it is but is no member: the replica group refuses it
// (GrpcGroupOptions::members_only) and so does the pipeline
// (ListedPeersOnlyTransport).
//
// Thread rule: Create is a pure function of its inputs and the key file;
// the result is immutable. The identity must outlive every channel and
// server built from the credentials.
#ifndef SKIPSWARM_NODE_DAEMON_STATIC_SWARM_SWARM_SPEC_TLS_H_
#define SKIPSWARM_NODE_DAEMON_STATIC_SWARM_SWARM_SPEC_TLS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "identity/identity.h"
#include "identity/tls_credentials.h"
#include "node/daemon/stack/swarm_spec.h"
#include "node/transport/forwarding_transport.h"

namespace skipswarm::node {

struct StaticSwarmSecurityOptions {
  std::string key_file;   // --node_key_file (must exist: its id is in the list)
  bool insecure = false;  // --insecure: plain text, no keys
};

struct StaticSwarmTls {
  // Null when insecure.
  std::unique_ptr<identity::Identity> identity;
  std::shared_ptr<const identity::PeerCredentials> credentials;

  // INVALID_ARGUMENT / NOT_FOUND / FAILED_PRECONDITION with a message that
  // says what to change (Note [Static swarm security]).
  static absl::StatusOr<StaticSwarmTls> Create(const StaticSwarmSecurityOptions& options,
                                               const std::vector<SwarmMember>& swarm,
                                               const std::string& name, absl::Time now);
};

// A Transport decorator that refuses frames from peers not in `members`
// (PERMISSION_DENIED to the sender, logged) and passes everything else
// through. `from` is the id the inner transport authenticated (with TLS:
// the certificate's key). Thread rule: as the inner transport's.
class ListedPeersOnlyTransport final : public ForwardingTransport {
 public:
  ListedPeersOnlyTransport(std::unique_ptr<Transport> inner, std::vector<PeerId> members);

  void SetFrameHandler(FrameHandler handler) override;

 private:
  const std::vector<PeerId> members_;  // sorted
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STATIC_SWARM_SWARM_SPEC_TLS_H_

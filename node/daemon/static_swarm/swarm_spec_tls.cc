#include "node/daemon/static_swarm/swarm_spec_tls.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::node {

absl::StatusOr<StaticSwarmTls> StaticSwarmTls::Create(const StaticSwarmSecurityOptions& options,
                                                      const std::vector<SwarmMember>& swarm,
                                                      const std::string& name, absl::Time now) {
  if (options.insecure && !options.key_file.empty()) {
    return absl::InvalidArgumentError("give --node_key_file or --insecure, not both");
  }
  StaticSwarmTls out;
  if (options.insecure) {
    out.credentials = identity::PeerCredentials::Insecure();
    return out;
  }
  if (options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a static --swarm node needs --node_key_file=FILE (mutual TLS; every --swarm entry "
        "then ends in its node's id: NAME/STAGES/PIPELINE_ADDR/GROUP_ADDR/NODE_ID, from "
        "`skipswarm keygen`) or an explicit --insecure (plain text, local tests only)");
  }
  const SwarmMember* me = nullptr;
  std::vector<std::string> unpinned;
  for (const SwarmMember& m : swarm) {
    if (m.name == name) me = &m;
    if (!m.pinned) unpinned.push_back(m.name);
  }
  if (me == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--name '", name, "' is not in --swarm"));
  }
  if (!unpinned.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "with --node_key_file every --swarm entry must end in its node's id (/NODE_ID, 64 hex "
        "digits from `skipswarm keygen`) so its certificate can be checked; without one: ",
        absl::StrJoin(unpinned, ", ")));
  }
  absl::StatusOr<std::unique_ptr<identity::Identity>> identity =
      identity::Identity::Load(options.key_file);
  if (!identity.ok()) {
    return absl::Status(identity.status().code(),
                        absl::StrCat("--node_key_file=", options.key_file, ": ",
                                     identity.status().message(),
                                     " (make one with `skipswarm keygen --key_file=",
                                     options.key_file, "` and put the id it prints in ", name,
                                     "'s --swarm entry)"));
  }
  if ((*identity)->id() != me->info.id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node_key_file=", options.key_file, " is node ", (*identity)->id().Hex(),
        ", but --swarm entry '", name, "' names node ", me->info.id.Hex(),
        "; its peers would refuse it (wrong key file, or the entry's id is stale)"));
  }
  out.identity = *std::move(identity);
  absl::StatusOr<std::shared_ptr<const identity::PeerCredentials>> credentials =
      identity::PeerCredentials::Create({out.identity.get()}, now);
  if (!credentials.ok()) return credentials.status();
  out.credentials = *std::move(credentials);
  return out;
}

ListedPeersOnlyTransport::ListedPeersOnlyTransport(std::unique_ptr<Transport> inner,
                                                   std::vector<PeerId> members)
    : ForwardingTransport(std::move(inner)), members_([&] {
        std::sort(members.begin(), members.end());
        return std::move(members);
      }()) {}

void ListedPeersOnlyTransport::SetFrameHandler(FrameHandler handler) {
  if (!handler) return inner()->SetFrameHandler(nullptr);
  inner()->SetFrameHandler(
      [this, handler = std::move(handler)](const PeerId& from, Frame frame, AckFn ack) {
        if (!std::binary_search(members_.begin(), members_.end(), from)) {
          LOG(WARNING) << "refused a frame from node " << from
                       << ": not in this node's --swarm list";
          ack(absl::PermissionDeniedError(absl::StrCat(
              "node ", from.ShortString(), " is not in this node's --swarm list")));
          return;
        }
        handler(from, std::move(frame), std::move(ack));
      });
}

}  // namespace skipswarm::node

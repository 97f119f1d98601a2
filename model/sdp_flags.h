// The subnetwork data parallelism flags (model/sdp_assignment.h), shared by
// `train-ref`, `skipswarm node` and `skipswarm local`; a command lists
// kSdpFlagsFile in its Command::flag_files to accept them.
//
//   --sdp=forward|backward|off|auto (node)   --sdp_workers=K (train-ref)   --sdp_keep=F
//
//   SS_ASSIGN_OR_RETURN(SdpOptions sdp, ReadSdpFlags());
//
// Thread rule: call from main's thread after flags are parsed.
#ifndef SKIPSWARM_MODEL_SDP_FLAGS_H_
#define SKIPSWARM_MODEL_SDP_FLAGS_H_

#include "absl/status/statusor.h"
#include "model/sdp_assignment.h"

namespace skipswarm::model {

// InvalidArgument for an unknown mode, workers < 1 or keep outside (0, 1].
// --sdp=auto (`skipswarm node`, a gossip joiner: it chooses between a
// pipeline stage and a subnetwork, Note [Join role] in node/daemon/gossip/
// join_role.h) only where `auto_role` is given: it is set true and the
// mode stays kOff; elsewhere auto is refused.
absl::StatusOr<SdpOptions> ReadSdpFlags(bool* auto_role = nullptr);

inline constexpr char kSdpFlagsFile[] = "model/sdp_flags.cc";

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_SDP_FLAGS_H_

#include "model/sdp_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, sdp, "off",
          "Subnetwork data parallelism: forward (each worker trains only its subnetwork's "
          "stages; the others are skipped), backward (the whole model forward, gradients and "
          "optimiser state only for the subnetwork's stages), or off. `skipswarm node` joining a "
          "gossip swarm without --host_stages also takes auto: it chooses between a pipeline "
          "stage and a subnetwork (forward masking) from the swarm's state.");
ABSL_FLAG(int, sdp_workers, 4,
          "train-ref --sdp: simulated workers K, each training --mbs_per_iteration "
          "micro-batches of its own data per iteration.");
ABSL_FLAG(double, sdp_keep, 0.5,
          "--sdp: fraction of the stages in each subnetwork (first and last stage always).");

namespace skipswarm::model {

absl::StatusOr<SdpOptions> ReadSdpFlags(bool* auto_role) {
  SdpOptions o;
  const std::string text = absl::GetFlag(FLAGS_sdp);
  if (auto_role != nullptr) *auto_role = false;
  if (text == "auto") {
    if (auto_role == nullptr) {
      return absl::InvalidArgumentError(
          "--sdp=auto is for `skipswarm node` joining a gossip swarm (it chooses its role "
          "there); here pass forward, backward or off");
    }
    *auto_role = true;
  } else {
    absl::StatusOr<SdpMode> mode = ParseSdpMode(text);
    if (!mode.ok()) return mode.status();
    o.mode = *mode;
  }
  o.workers = absl::GetFlag(FLAGS_sdp_workers);
  o.keep = absl::GetFlag(FLAGS_sdp_keep);
  if (o.workers < 1) return absl::InvalidArgumentError("--sdp_workers must be >= 1");
  if (!(o.keep > 0 && o.keep <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--sdp_keep must be in (0, 1], not ", o.keep));
  }
  return o;
}

}  // namespace skipswarm::model

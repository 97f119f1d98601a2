#include "model/sdp_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, sdp, "off",
          "Subnetwork data parallelism: forward (each worker trains only its subnetwork's "
          "stages; the others are skipped), backward (the whole model forward, gradients and "
          "optimiser state only for the subnetwork's stages), or off.");
ABSL_FLAG(int, sdp_workers, 4,
          "train-ref --sdp: simulated workers K, each training --mbs_per_iteration "
          "micro-batches of its own data per iteration.");
ABSL_FLAG(double, sdp_keep, 0.5,
          "--sdp: fraction of the stages in each subnetwork (first and last stage always).");

namespace skipswarm::model {

absl::StatusOr<SdpOptions> ReadSdpFlags() {
  SdpOptions o;
  absl::StatusOr<SdpMode> mode = ParseSdpMode(absl::GetFlag(FLAGS_sdp));
  if (!mode.ok()) return mode.status();
  o.mode = *mode;
  o.workers = absl::GetFlag(FLAGS_sdp_workers);
  o.keep = absl::GetFlag(FLAGS_sdp_keep);
  if (o.workers < 1) return absl::InvalidArgumentError("--sdp_workers must be >= 1");
  if (!(o.keep > 0 && o.keep <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--sdp_keep must be in (0, 1], not ", o.keep));
  }
  return o;
}

}  // namespace skipswarm::model

#include "node/transport/transport.h"

#include <utility>

namespace skipswarm::node {

FrameHandler AdmitWith(
    std::function<absl::Status(const PeerId& from, Frame frame)> admit) {
  return [admit = std::move(admit)](const PeerId& from, Frame frame,
                                    AckFn ack) {
    ack(admit(from, std::move(frame)));
  };
}

bool IsRetryElsewhere(const absl::Status& ack) {
  return absl::IsResourceExhausted(ack) || absl::IsUnavailable(ack) ||
         absl::IsDeadlineExceeded(ack);
}

}  // namespace skipswarm::node

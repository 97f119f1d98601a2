#include "node/transport/test_util.h"

#include <utility>

namespace skipswarm::node::testutil {

std::string TestPayload(size_t bytes, uint64_t seed) {
  std::string out(bytes, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>(x);
  }
  return out;
}

Frame MakeTestFrame(const std::vector<PeerId>& route, uint32_t hop,
                    size_t payload_bytes, uint64_t mb_id,
                    proto::Direction direction) {
  Frame frame;
  proto::FrameHeader& h = frame.header;
  h.set_swarm_id(kTestSwarm);
  h.set_iteration(3);
  h.set_mb_id(mb_id);
  h.set_origin(route.front().Bytes());
  for (size_t i = 0; i < route.size(); ++i) {
    proto::Hop* stop = h.add_route();
    stop->set_node_id(route[i].Bytes());
    stop->set_stage(static_cast<uint32_t>(i));
  }
  h.set_hop_index(hop);
  h.set_direction(direction);
  h.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
  h.mutable_tensor()->add_shape(static_cast<int64_t>(payload_bytes / 4));
  h.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
  frame.payload = absl::Cord(TestPayload(payload_bytes, mb_id + 1));
  SealFrame(frame);
  return frame;
}

SendDone AckWaiter::Callback() {
  return [this](absl::Status status) {
    status_ = std::move(status);
    done_.Notify();
  };
}

absl::Status AckWaiter::Wait() {
  done_.WaitForNotification();
  return status_;
}

}  // namespace skipswarm::node::testutil

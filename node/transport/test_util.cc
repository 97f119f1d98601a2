#include "node/transport/test_util.h"

#include <utility>

#include "absl/strings/match.h"

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

LogCapture::LogCapture() { google::AddLogSink(this); }

LogCapture::~LogCapture() { google::RemoveLogSink(this); }

void LogCapture::send(google::LogSeverity severity, const char*, const char*,
                      int, const google::LogMessageTime&, const char* message,
                      size_t message_len) {
  if (severity < google::GLOG_WARNING) return;
  absl::MutexLock lock(&mu_);
  lines_.emplace_back(message, message_len);
}

bool LogCapture::WaitFor(absl::string_view needle, absl::Duration timeout) {
  auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, needle)) return true;
    }
    return false;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&found), timeout);
}

int LogCapture::Count(absl::string_view needle) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const std::string& line : lines_) n += absl::StrContains(line, needle);
  return n;
}

}  // namespace skipswarm::node::testutil

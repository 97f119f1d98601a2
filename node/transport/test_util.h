// Test helpers for node/transport (testonly).
#ifndef SKIPSWARM_NODE_TRANSPORT_TEST_UTIL_H_
#define SKIPSWARM_NODE_TRANSPORT_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "node/transport/frame.h"
#include "node/transport/transport.h"

namespace skipswarm::node::testutil {

inline constexpr char kTestSwarm[] = "test-swarm";

// A sealed frame of `payload_bytes` deterministic bytes at hop `hop` of a
// route through `route` (route[0] is the origin).
Frame MakeTestFrame(const std::vector<PeerId>& route, uint32_t hop,
                    size_t payload_bytes, uint64_t mb_id = 0,
                    proto::Direction direction = proto::DIRECTION_FORWARD);

// Deterministic payload bytes.
std::string TestPayload(size_t bytes, uint64_t seed = 1);

// One Send's outcome, waitable from the test thread.
class AckWaiter {
 public:
  SendDone Callback();
  // Blocks until the callback ran; returns its status.
  absl::Status Wait();
  bool HasRun() { return done_.HasBeenNotified(); }

 private:
  absl::Notification done_;
  absl::Status status_;
};

// Collects WARNING and worse glog lines while it exists, so tests can check
// that a rejection was logged. Thread-safe.
class LogCapture final : public google::LogSink {
 public:
  LogCapture();
  ~LogCapture() override;

  void send(google::LogSeverity severity, const char* full_filename,
            const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message,
            size_t message_len) override;
  // Blocks until a captured line contains `needle` (false after `timeout`).
  bool WaitFor(absl::string_view needle,
               absl::Duration timeout = absl::Seconds(10));
  int Count(absl::string_view needle);

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node::testutil

#endif  // SKIPSWARM_NODE_TRANSPORT_TEST_UTIL_H_

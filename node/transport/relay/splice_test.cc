// Splice on a real loopback socket and a fake circuit stream: the bytes
// arrive intact and in few messages when the socket has many queued.
#include "node/transport/relay/splice.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

// Records what Splice writes; Read blocks until `expected` bytes were
// written, then reports the end of the call.
class RecordingStream final : public RelayStream {
 public:
  explicit RecordingStream(size_t expected) : expected_(expected) {}

  bool Write(const proto::RelayBytes& message, grpc::WriteOptions) override {
    absl::MutexLock lock(&mu_);
    sizes_.push_back(message.data().size());
    bytes_ += message.data();
    return true;
  }
  bool Read(proto::RelayBytes*) override {
    absl::MutexLock lock(&mu_);
    auto all_written = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return bytes_.size() >= expected_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&all_written), absl::Seconds(20));
    return false;
  }
  bool NextMessageSize(uint32_t* size) override {
    *size = 0;
    return false;
  }
  void WaitForInitialMetadata() override {}
  bool WritesDone() override { return true; }
  grpc::Status Finish() override { return grpc::Status::OK; }

  std::vector<size_t> sizes() {
    absl::MutexLock lock(&mu_);
    return sizes_;
  }
  std::string bytes() {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  const size_t expected_;
  absl::Mutex mu_;
  std::vector<size_t> sizes_ ABSL_GUARDED_BY(mu_);
  std::string bytes_ ABSL_GUARDED_BY(mu_);
};

TEST(SpliceTest, QueuedBytesGoUpIntactInMessagesOfMoreThan64KiB) {
  absl::StatusOr<LoopbackListener> listener = ListenOnLoopback();
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::StatusOr<int> sender = ConnectTcp("127.0.0.1:" + std::to_string(listener->port));
  ASSERT_TRUE(sender.ok()) << sender.status();
  const int fd = ::accept(listener->fd, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  // 1 MiB queued before Splice starts (loopback buffers hold it).
  std::string sent(1 << 20, '\0');
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_EQ(::send(*sender, sent.data(), sent.size(), 0), static_cast<ssize_t>(sent.size()));

  RecordingStream stream(sent.size());
  grpc::ClientContext context;
  const SpliceCounts counts = Splice(fd, &stream, &context);
  ::close(*sender);
  ::close(listener->fd);

  EXPECT_EQ(counts.to_stream, sent.size());
  EXPECT_TRUE(stream.bytes() == sent);
  // Each message costs a write, a relay read and write and a wake-up per
  // hop: a socket with more than 64 KiB queued fills a larger message.
  size_t largest = 0;
  for (size_t s : stream.sizes()) largest = std::max(largest, s);
  EXPECT_GT(largest, size_t{64} << 10) << stream.sizes().size() << " messages";
  EXPECT_LE(largest, kSpliceChunkBytes);
}

}  // namespace
}  // namespace skipswarm::node

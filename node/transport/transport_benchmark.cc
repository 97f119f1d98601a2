// Transport benchmarks: throughput of the gRPC transport and the shaper on a real clock.
//
//   bazel run -c opt //node/transport:transport_benchmark
//
// BM_GrpcHopOverhead4MB   one 4 MB activation hop over loopback gRPC, one at
//                         a time: seal (CRC) + chunk + send + receive +
//                         reassemble + validate (CRC) + ack.
// BM_GrpcStreamThroughput activations through one stream, 4 frames in flight.
//                         Both: /0 plain text (--insecure), /1 mutual TLS
//                         with Ed25519 node certificates (the default).
// BM_GrpcThroughputOverRtt/R/P  the same stream through a DelayProxy with
//                         an R ms round trip, into a daemon's NodeServer
//                         with P=1 its window (16 MiB + gRPC's bandwidth
//                         probe) or P=0 a fixed 1 MiB window without the
//                         probe (Note [Stream window]); TLS.
// BM_RawTcpCopy           the same bytes through a plain loopback TCP socket
//                         (write → read into a buffer), the ceiling.
// BM_Crc32c4MB            CRC-32C of a 4 MB payload (hardware / table).
// BM_ShapedTransferRealClock  10 MB over a shaped 10 MB/s, 50 ms link on the
//                         real clock (expect ≈ 1.05 s).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "common/crc32c.h"
#include "common/real_clock.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "identity/tls_credentials.h"
#include "node/transport/delay_proxy.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/malloc_tuning.h"
#include "node/transport/node_server.h"
#include "node/transport/shaping_transport.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

constexpr size_t kActivationBytes = 4 << 20;

// What the daemon's main does (see malloc_tuning.h). Process-wide and
// irreversible: figures without it come from GLIBC_TUNABLES-free runs of an
// older build (README.md).
void TuneMalloc() {
  static const bool tuned = [] {
    absl::Status status = TuneMallocForLargeFrames();
    if (!status.ok()) fprintf(stderr, "%s\n", status.ToString().c_str());
    return status.ok();
  }();
  (void)tuned;
}

// Two gRPC transports on loopback, plain text or mutual TLS; b accepts
// everything.
struct LoopbackPair {
  explicit LoopbackPair(bool tls) : clock(common::RealClock::Create()) {
    TuneMalloc();
    GrpcTransportOptions options;
    options.swarm_id = kTestSwarm;
    options.self = PeerId::ForName("a");
    options.credentials = identity::PeerCredentials::Insecure();
    if (tls) {
      a_key = identity::TestIdentity('a');
      options.self = a_key->id();
      options.credentials =
          identity::PeerCredentials::Create({a_key.get()}, clock->Now()).value();
    }
    a = GrpcTransport::Create(options, clock.get()).value();
    options.self = PeerId::ForName("b");
    if (tls) {
      b_key = identity::TestIdentity('b');
      options.self = b_key->id();
      options.credentials =
          identity::PeerCredentials::Create({b_key.get()}, clock->Now()).value();
    }
    b = GrpcTransport::Create(options, clock.get()).value();
    a->SetPeerAddress(b->self(), b->loopback_address());
    b->SetFrameHandler(AdmitWith([](const PeerId&, Frame) { return absl::OkStatus(); }));
  }
  Frame Next(const Frame& prototype) {
    Frame frame = prototype;  // the Cord shares the payload buffer
    frame.header.set_mb_id(next_mb++);
    return frame;
  }
  std::unique_ptr<common::RealClock> clock;
  std::unique_ptr<identity::Identity> a_key, b_key;  // outlive the transports
  std::unique_ptr<GrpcTransport> a, b;
  uint64_t next_mb = 0;
};

void BM_GrpcHopOverhead4MB(benchmark::State& state) {
  LoopbackPair pair(state.range(0) == 1);
  state.SetLabel(state.range(0) == 1 ? "tls" : "plain");
  const Frame prototype =
      MakeTestFrame({pair.a->self(), pair.b->self(), pair.a->self()}, 1, kActivationBytes);
  for (auto _ : state) {
    Frame frame = pair.Next(prototype);
    SealFrame(frame);  // the sender's CRC is part of the hop
    absl::Notification acked;
    absl::Status status;
    pair.a->Send(pair.b->self(), std::move(frame), [&](absl::Status s) {
      status = std::move(s);
      acked.Notify();
    });
    acked.WaitForNotification();
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  }
  state.SetBytesProcessed(state.iterations() * kActivationBytes);
}
BENCHMARK(BM_GrpcHopOverhead4MB)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// Sends `frames` activations from a to `to` with at most `window` in
// flight; false when one failed.
struct SendCount {
  absl::Mutex mu;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  int done ABSL_GUARDED_BY(mu) = 0;
  int window = 0;
  int frames = 0;
  bool failed ABSL_GUARDED_BY(mu) = false;
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight < window; }
  bool AllDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done == frames; }
};

bool SendStream(GrpcTransport& a, const PeerId& to, const Frame& prototype, uint64_t& next_mb,
                int frames, int window) {
  SendCount count;
  count.window = window;
  count.frames = frames;
  for (int i = 0; i < frames; ++i) {
    {
      absl::MutexLock lock(&count.mu);
      count.mu.Await(absl::Condition(&count, &SendCount::HasRoom));
      ++count.in_flight;
    }
    Frame frame = prototype;
    frame.header.set_mb_id(next_mb++);
    a.Send(to, std::move(frame), [&count](absl::Status s) {
      absl::MutexLock lock(&count.mu);
      --count.in_flight;
      ++count.done;
      count.failed |= !s.ok();
    });
  }
  absl::MutexLock lock(&count.mu);
  count.mu.Await(absl::Condition(&count, &SendCount::AllDone));
  return !count.failed;
}

void BM_GrpcStreamThroughput(benchmark::State& state) {
  LoopbackPair pair(state.range(0) == 1);
  state.SetLabel(state.range(0) == 1 ? "tls" : "plain");
  const Frame prototype =
      MakeTestFrame({pair.a->self(), pair.b->self(), pair.a->self()}, 1, kActivationBytes);
  constexpr int kFramesPerIteration = 16;
  for (auto _ : state) {
    if (!SendStream(*pair.a, pair.b->self(), prototype, pair.next_mb, kFramesPerIteration, 4)) {
      state.SkipWithError("a send failed");
    }
  }
  state.SetBytesProcessed(state.iterations() * kFramesPerIteration * kActivationBytes);
}
BENCHMARK(BM_GrpcStreamThroughput)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GrpcThroughputOverRtt(benchmark::State& state) {
  TuneMalloc();
  auto clock = common::RealClock::Create();
  std::unique_ptr<identity::Identity> a_key = identity::TestIdentity('a');
  std::unique_ptr<identity::Identity> b_key = identity::TestIdentity('b');
  NodeServerOptions server_options;  // P=1: the daemon's defaults
  if (state.range(1) == 0) {
    server_options.stream_receive_window_bytes = 1 << 20;
    server_options.bandwidth_probe = false;
  }
  NodeServer server(server_options);
  GrpcTransportOptions options;
  options.swarm_id = kTestSwarm;
  options.self = b_key->id();
  options.credentials = identity::PeerCredentials::Create({b_key.get()}, clock->Now()).value();
  options.serve_on = server.builder();
  std::unique_ptr<GrpcTransport> b = GrpcTransport::Create(options, clock.get()).value();
  b->SetFrameHandler(AdmitWith([](const PeerId&, Frame) { return absl::OkStatus(); }));
  if (absl::Status started = server.Start(options.credentials); !started.ok()) {
    state.SkipWithError(started.ToString().c_str());
    return;
  }
  options.serve_on = nullptr;
  options.listen_address = "";
  options.self = a_key->id();
  options.credentials = identity::PeerCredentials::Create({a_key.get()}, clock->Now()).value();
  std::unique_ptr<GrpcTransport> a = GrpcTransport::Create(options, clock.get()).value();
  auto proxy = DelayProxy::Start(absl::StrCat("127.0.0.1:", server.port()),
                                 absl::Milliseconds(state.range(0)) / 2, clock.get());
  if (!proxy.ok()) {
    state.SkipWithError(proxy.status().ToString().c_str());
    return;
  }
  a->SetPeerAddress(b->self(), (*proxy)->address());
  state.SetLabel(state.range(1) == 1 ? "probe (default)" : "fixed 1 MiB, no probe");
  const Frame prototype = [&] {
    Frame f = MakeTestFrame({a->self(), b->self(), a->self()}, 1, kActivationBytes);
    SealFrame(f);
    return f;
  }();
  uint64_t next_mb = 0;
  constexpr int kFrames = 8;
  // A first stream warms the connection (TLS, the probe's estimate).
  if (!SendStream(*a, b->self(), prototype, next_mb, kFrames, 4)) {
    state.SkipWithError("warm-up send failed");
  }
  for (auto _ : state) {
    if (!SendStream(*a, b->self(), prototype, next_mb, kFrames, 4)) {
      state.SkipWithError("a send failed");
    }
  }
  state.SetBytesProcessed(state.iterations() * kFrames * kActivationBytes);
  a.reset();
  server.Shutdown(absl::Seconds(1));
  b.reset();
}
BENCHMARK(BM_GrpcThroughputOverRtt)
    ->ArgsProduct({{0, 20, 100}, {0, 1}})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_RawTcpCopy(benchmark::State& state) {
  TuneMalloc();
  constexpr size_t kBytesPerIteration = 16 * kActivationBytes;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(listener, 1);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  int writer = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(writer, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    state.SkipWithError("connect failed");
    return;
  }
  int reader = accept(listener, nullptr, nullptr);
  std::atomic<bool> stop{false};
  // The reader drains kBytesPerIteration into a buffer, then answers 1 byte.
  std::thread drain([&] {
    std::vector<char> buffer(1 << 20);
    while (!stop.load()) {
      size_t got = 0;
      while (got < kBytesPerIteration) {
        ssize_t n = read(reader, buffer.data(), buffer.size());
        if (n <= 0) return;
        got += static_cast<size_t>(n);
      }
      char ack = 1;
      if (write(reader, &ack, 1) != 1) return;
    }
  });
  const std::string payload = testutil::TestPayload(kActivationBytes);
  for (auto _ : state) {
    for (size_t sent = 0; sent < kBytesPerIteration; sent += payload.size()) {
      size_t off = 0;
      while (off < payload.size()) {
        ssize_t n = write(writer, payload.data() + off, payload.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
    }
    char ack;
    if (read(writer, &ack, 1) != 1) state.SkipWithError("no ack");
  }
  stop.store(true);
  shutdown(writer, SHUT_RDWR);
  close(writer);
  drain.join();
  close(reader);
  close(listener);
  state.SetBytesProcessed(state.iterations() * kBytesPerIteration);
}
BENCHMARK(BM_RawTcpCopy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Crc32c4MB(benchmark::State& state) {
  const std::string data = testutil::TestPayload(kActivationBytes);
  const bool portable = state.range(0) == 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(portable ? common::Crc32cExtendPortable(0, data) : common::Crc32c(data));
  }
  state.SetBytesProcessed(state.iterations() * kActivationBytes);
  state.SetLabel(portable ? "table" : "sse4.2");
}
BENCHMARK(BM_Crc32c4MB)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_ShapedTransferRealClock(benchmark::State& state) {
  auto clock = common::RealClock::Create();
  Switchboard board(clock.get());
  ShapingOptions options;
  options.default_link = {absl::Milliseconds(50), 10e6};
  auto a = std::make_unique<ShapingTransport>(
      board.Attach(PeerId::ForName("a")).value(), clock.get(), options);
  auto b = board.Attach(PeerId::ForName("b")).value();
  absl::Mutex mu;
  absl::Notification* arrived = nullptr;
  b->SetFrameHandler(AdmitWith([&](const PeerId&, Frame) {
    absl::MutexLock lock(&mu);
    arrived->Notify();
    return absl::OkStatus();
  }));
  const Frame prototype = MakeTestFrame({a->self(), b->self(), a->self()}, 1, 10'000'000);
  uint64_t mb = 0;
  for (auto _ : state) {
    absl::Notification here;
    {
      absl::MutexLock lock(&mu);
      arrived = &here;
    }
    Frame frame = prototype;
    frame.header.set_mb_id(mb++);
    a->Send(b->self(), std::move(frame), [](absl::Status) {});
    here.WaitForNotification();  // delivery, not the ack (+50 ms)
  }
  state.SetBytesProcessed(state.iterations() * 10'000'000);
  a.reset();
  b.reset();
}
BENCHMARK(BM_ShapedTransferRealClock)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace
}  // namespace skipswarm::node

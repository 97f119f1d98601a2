// Relayed hop vs direct hop on loopback, through the real transport and
// relay code (README.md, "Cost of a relayed hop"):
//
//   bazel build -c opt //node/transport/relay:relay_benchmark
//   bazel-bin/node/transport/relay/relay_benchmark --benchmark_repetitions=5
//       (add --benchmark_report_aggregates_only=true for medians only)
//
// BM_Hop/<bytes>/<relayed>  one frame of <bytes> payload from P to N over
//     the pipeline transport (mutual TLS), one at a time: send, N's handler
//     acks, P sees the ack. relayed=0: P dials N's server directly;
//     relayed=1: P dials its RelayDialer's loopback endpoint, the circuit
//     runs P -> R's Relay service -> N's RelayAttacher -> N's server, as for
//     an outbound-only N (every byte TLS-encrypted again on both relay
//     legs; R paces P, and N's acks, on the daemon's default relay quota,
//     both members).
//     Sizes: 512 KiB (about the default model's activation frame,
//     model::MaxFramePayloadBytes) and 1 MiB (a group gradient chunk's
//     ceiling; the relay sees bytes only, so a frame of that size costs
//     what the chunk would).
// BM_Window/<bytes>/<relayed>  the same with 4 frames in flight (MB/s).
// BM_HopBesideAHog/<quota>  BM_Hop relayed 512 KiB while another caller H
//     (a stranger to R) pushes 512 KiB frames to N through the same relay,
//     4 in flight, as fast as it can; quota=0: R without a relay quota (as
//     before the per-caller budgets), quota=1: the daemon's. Counter
//     hog_MBps: what H moved meanwhile.
// BM_HopBesideAnAnswerHog/<quota>  the same with the hog on the Accept
//     side (Note [Relay directions]): H, a stranger to R, attaches to it
//     with raw Relay streams, an accomplice opens a circuit to H and sends
//     nothing, and H "answers" 256 KiB messages as fast as R copies them
//     to the accomplice. hog_MBps: what reached the accomplice.
//
// Counter cpu_ms_per_msg: the whole process's CPU time (every thread of
// P, R and N: TLS, copies, gRPC's pollers) per frame. On a shared machine
// wall times swing with the load; this one barely does, so it is the
// figure to compare between builds.
//
// All three nodes live in this process, so every leg is a loopback TCP
// connection and the figures are the relay's own costs (copies, framing,
// thread hand-offs, extra TLS), not a network's.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/cord.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "common/real_clock.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "identity/tls_credentials.h"
#include "model/model_config.h"
#include "node/daemon/reporting/daemon_quotas.h"
#include "node/transport/frame.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/node_server.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/relay/relay_test_util.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::MakeTestFrame;
using ::skipswarm::node::testutil::RelayParty;

// An attached node H that floods its answers (raw Relay streams, keys
// TestIdentity('h') and its accomplice's TestIdentity('c'), both strangers
// to R): C opens a circuit to H and only reads; H writes messages of
// `bytes` to it as fast as R takes them. Counts the bytes C reads. Lives
// until destroyed (before R).
class AnswerHog {
 public:
  AnswerHog(common::Clock* clock, const RelayCandidate& relay, const common::NodeId& relay_id,
            size_t bytes) {
    h_ = std::make_unique<RelayParty>('h', clock, relay, relay_id);
    c_ = std::make_unique<RelayParty>('c', clock, relay, relay_id);
    calls_ = h_->stub->Attach(&attach_context_, h_->AttachRequest());
    proto::RelayCall call;
    CHECK(calls_->Read(&call));  // "attached"
    connect_ = c_->stub->Connect(&connect_context_);
    proto::RelayBytes first = c_->Opening();
    first.set_target(h_->key->id().Bytes());
    CHECK(connect_->Write(first));
    do {
      CHECK(calls_->Read(&call));
    } while (call.circuit() == 0);  // heartbeats
    accept_ = h_->stub->Accept(&accept_context_);
    proto::RelayBytes opening = h_->Opening();
    opening.set_circuit(call.circuit());
    CHECK(accept_->Write(opening));
    proto::RelayBytes spliced;
    CHECK(connect_->Read(&spliced));
    writer_ = std::thread([this, bytes] {
      proto::RelayBytes m;
      m.set_data(std::string(bytes, 'h'));
      while (!stop_.HasBeenNotified() && accept_->Write(m)) {
      }
    });
    reader_ = std::thread([this] {
      proto::RelayBytes m;
      while (connect_->Read(&m)) bytes_.fetch_add(static_cast<int64_t>(m.data().size()));
    });
  }
  ~AnswerHog() {
    stop_.Notify();
    accept_context_.TryCancel();
    connect_context_.TryCancel();
    writer_.join();
    reader_.join();
    accept_->Finish();
    connect_->Finish();
    attach_context_.TryCancel();
    calls_->Finish();
  }
  int64_t bytes() const { return bytes_.load(); }

 private:
  using BytesStream = grpc::ClientReaderWriter<proto::RelayBytes, proto::RelayBytes>;

  std::unique_ptr<RelayParty> h_, c_;
  grpc::ClientContext attach_context_, connect_context_, accept_context_;
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> calls_;
  std::unique_ptr<BytesStream> connect_, accept_;
  absl::Notification stop_;
  std::atomic<int64_t> bytes_{0};
  std::thread writer_, reader_;
};

// P (sender), N (receiver, its handler acks at once) and, when relayed, R
// (a relay N attached to) with P's dialer. Built once per benchmark run.
class World {
 public:
  explicit World(bool relayed, bool quota = true)
      : clock_(common::RealClock::Create()),
        ends_(clock_.get(), [](const PeerId&, Frame, AckFn ack) { ack(absl::OkStatus()); }) {
    if (!relayed) {
      ends_.DialDirect();
      return;
    }
    // R paces both sides as a daemon does (Note [Paced bytes], Note [Relay
    // directions]): the default model's relay quota, P and N members.
    quotas_ = MakeDaemonQuotas(model::ModelConfig(), 4, clock_.get());
    quotas_.members->SetMembers({ends_.p_key->id(), ends_.n_key->id()});
    RelayServiceOptions ro;
    if (quota) {
      ro.quota = quotas_.relay;
      ro.clock = clock_.get();
    }
    relay_.emplace('r', clock_.get(), ro);
    const RelayCandidate r = relay_->candidate();
    ends_.Attach([r] { return std::vector<RelayCandidate>{r}; }, 1,
                 [this](const RelayChange& c) {
                   if (!c.relays.empty()) attached_.Notify();
                 });
    CHECK(attached_.WaitForNotificationWithTimeout(absl::Seconds(20)));
    ends_.DialThrough([r](const common::NodeId&) { return std::vector<RelayCandidate>{r}; });
  }

  ~World() { StopHog(); }

  // Starts H: a stranger's transport and dialer, pushing frames of `bytes`
  // to N through R, 4 in flight, until StopHog.
  void StartHog(size_t bytes) {
    hog_key_ = identity::TestIdentity('h');
    auto creds = identity::PeerCredentials::Create({hog_key_.get()}, clock_->Now()).value();
    GrpcTransportOptions o;
    o.self = hog_key_->id();
    o.credentials = creds;
    o.swarm_id = testutil::kTestSwarm;
    o.listen_address = "";
    hog_ = GrpcTransport::Create(o, clock_.get()).value();
    const RelayCandidate r = relay_->candidate();
    hog_dialer_ = std::make_unique<RelayDialer>(
        RelayDialerOptions{hog_key_->id(), creds},
        [r](const common::NodeId&) { return std::vector<RelayCandidate>{r}; });
    hog_->SetPeerAddress(ends_.n_key->id(), hog_dialer_->EndpointFor(ends_.n_key->id()).value());
    absl::Cord payload =
        MakeTestFrame({hog_key_->id(), ends_.n_key->id()}, 1, bytes, 0).payload;
    hog_thread_ = std::thread([this, payload, bytes] {
      for (uint64_t mb = 0; !hog_stop_.HasBeenNotified();) {
        std::vector<AckWaiter> acks(4);
        for (AckWaiter& ack : acks) {
          Frame frame = MakeTestFrame({hog_key_->id(), ends_.n_key->id()}, 1, 0, mb++);
          frame.header.mutable_tensor()->set_shape(0, static_cast<int64_t>(bytes / 4));
          frame.payload = payload;
          SealFrame(frame);
          hog_->Send(ends_.n_key->id(), std::move(frame), ack.Callback());
        }
        for (AckWaiter& ack : acks) {
          if (ack.Wait().ok()) hog_bytes_.fetch_add(static_cast<int64_t>(bytes));
        }
      }
    });
  }
  // Starts an AnswerHog instead (its bytes are hog_bytes()).
  void StartAnswerHog(size_t bytes) {
    answer_hog_ = std::make_unique<AnswerHog>(clock_.get(), relay_->candidate(),
                                              relay_->key->id(), bytes);
  }
  int64_t hog_bytes() const {
    return answer_hog_ != nullptr ? answer_hog_->bytes() : hog_bytes_.load();
  }
  common::Clock* clock() const { return clock_.get(); }

  // Sends `count` frames of `bytes` at once and waits for every ack. The
  // frames share one payload, made on the first call: generating a test
  // payload costs about as much CPU as sending it directly, and that is
  // not the transport's cost.
  absl::Status Send(size_t bytes, int count, uint64_t* mb) {
    if (payload_.size() != bytes) {
      payload_ = MakeTestFrame({ends_.p_key->id(), ends_.n_key->id()}, 1, bytes, 0).payload;
    }
    std::vector<AckWaiter> acks(static_cast<size_t>(count));
    for (AckWaiter& ack : acks) {
      Frame frame = MakeTestFrame({ends_.p_key->id(), ends_.n_key->id()}, 1, 0, (*mb)++);
      frame.header.mutable_tensor()->set_shape(0, static_cast<int64_t>(bytes / 4));
      frame.payload = payload_;  // shared, not copied
      SealFrame(frame);
      ends_.p->Send(ends_.n_key->id(), std::move(frame), ack.Callback());
    }
    absl::Status status;
    for (AckWaiter& ack : acks) status.Update(ack.Wait());
    return status;
  }

 private:
  void StopHog() {
    answer_hog_.reset();
    if (!hog_thread_.joinable()) return;
    hog_stop_.Notify();
    hog_thread_.join();
    hog_dialer_.reset();
    hog_.reset();
  }

  std::unique_ptr<common::RealClock> clock_;
  absl::Notification attached_;
  DaemonQuotas quotas_;
  std::optional<testutil::TestRelay> relay_;  // R, when relayed; outlives ends_'s attacher
  testutil::RelayEnds ends_;
  absl::Cord payload_;
  // H, when started; it goes before R and N.
  std::unique_ptr<identity::Identity> hog_key_;
  std::unique_ptr<GrpcTransport> hog_;
  std::unique_ptr<RelayDialer> hog_dialer_;
  std::thread hog_thread_;
  absl::Notification hog_stop_;
  std::atomic<int64_t> hog_bytes_{0};
  std::unique_ptr<AnswerHog> answer_hog_;  // when started; goes before R
};

double ProcessCpuMs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

void RunHops(benchmark::State& state, int in_flight) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  World world(/*relayed=*/state.range(1) != 0);
  uint64_t mb = 0;
  // The first frame opens the connection (and, relayed, the circuit).
  CHECK(world.Send(bytes, 1, &mb).ok());
  const double cpu_start = ProcessCpuMs();
  for (auto _ : state) {
    const absl::Status s = world.Send(bytes, in_flight, &mb);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  const int64_t messages = state.iterations() * in_flight;
  state.counters["cpu_ms_per_msg"] =
      (ProcessCpuMs() - cpu_start) / static_cast<double>(std::max<int64_t>(1, messages));
  state.SetBytesProcessed(messages * static_cast<int64_t>(bytes));
}

// P's relayed hops while a hog floods R: a caller (StartHog) or, with
// `answers`, an attached node (StartAnswerHog).
void RunBesideAHog(benchmark::State& state, bool answers) {
  constexpr size_t kBytes = 512 << 10;
  World world(/*relayed=*/true, /*quota=*/state.range(0) != 0);
  uint64_t mb = 0;
  CHECK(world.Send(kBytes, 1, &mb).ok());
  if (answers) {
    world.StartAnswerHog(256 << 10);
  } else {
    world.StartHog(kBytes);
  }
  const int64_t hog_start = world.hog_bytes();
  const double cpu_start = ProcessCpuMs();
  const absl::Duration start = world.clock()->SteadyNow();
  for (auto _ : state) {
    const absl::Status s = world.Send(kBytes, 1, &mb);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  const double seconds = absl::ToDoubleSeconds(world.clock()->SteadyNow() - start);
  state.counters["cpu_ms_per_msg"] =
      (ProcessCpuMs() - cpu_start) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["hog_MBps"] =
      static_cast<double>(world.hog_bytes() - hog_start) / 1e6 / std::max(1e-9, seconds);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}

void BM_HopBesideAHog(benchmark::State& state) { RunBesideAHog(state, /*answers=*/false); }
void BM_HopBesideAnAnswerHog(benchmark::State& state) {
  RunBesideAHog(state, /*answers=*/true);
}
void BM_Hop(benchmark::State& state) { RunHops(state, 1); }
void BM_Window(benchmark::State& state) { RunHops(state, 4); }

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : {int64_t{512} << 10, int64_t{1} << 20}) {
    b->Args({bytes, 0})->Args({bytes, 1});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
}
BENCHMARK(BM_Hop)->Apply(Sizes);
BENCHMARK(BM_Window)->Apply(Sizes);
BENCHMARK(BM_HopBesideAHog)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);
BENCHMARK(BM_HopBesideAnAnswerHog)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);

}  // namespace
}  // namespace skipswarm::node

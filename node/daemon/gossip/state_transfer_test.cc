// State transfer over real gRPC on loopback (port 0): boundary snapshots,
// chunking with CRC + SHA-256, resume after a cut stream, another replica
// after a failed one. No sleeps: a fetch that must wait for a boundary runs
// on a thread and the test calls OnBoundary once the request is seen.
#include "node/daemon/gossip/state_transfer.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"

namespace skipswarm::node {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u + seed;
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

struct Source {
  explicit Source(StateServerOptions o = {}, size_t bytes = (size_t{5} << 20) / 2) {
    if (o.self == common::NodeId()) o.self = common::NodeId::ForName("source");
    o.swarm_id = "t";
    server = *StateServer::Create(o, [this, bytes](int stage) -> absl::StatusOr<StageSnapshot> {
      ++snapshots;
      return StageSnapshot{Pattern(bytes, stage), 77};
    });
    address = absl::StrCat("127.0.0.1:", server->port());
  }
  std::unique_ptr<StateServer> server;
  std::string address;
  int snapshots = 0;
};

FetchOptions Wanted(int stage, uint64_t iteration) {
  FetchOptions o;
  o.self = common::NodeId::ForName("joiner");
  o.swarm_id = "t";
  o.stage = stage;
  o.iteration = iteration;
  o.deadline = absl::Seconds(20);
  return o;
}

// Runs the fetch on a thread; once its request waits at the source, the
// source reaches the wanted boundary (no sleeps: waiting() is the signal).
absl::StatusOr<FetchedState> FetchAcrossBoundary(Source& src, const FetchOptions& o,
                                                 std::vector<StateSource> sources) {
  src.server->OnBoundary(o.iteration - 1, {{o.stage, 1}});
  absl::StatusOr<FetchedState> got = absl::UnknownError("not run");
  std::thread t([&] { got = FetchStageState(sources, o); });
  while (src.server->waiting() == 0) std::this_thread::yield();
  src.server->OnBoundary(o.iteration, {{o.stage, 1}});
  t.join();
  return got;
}

TEST(StateTransferTest, JoinerGetsTheBoundarySnapshotChunkedAndChecked) {
  Source src;
  absl::StatusOr<FetchedState> got = FetchAcrossBoundary(src, Wanted(2, 7), {src.address});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, Pattern((size_t{5} << 20) / 2, 2));
  EXPECT_EQ(got->params_digest, 77u);
  EXPECT_EQ(src.snapshots, 1);
  // A second joiner of the same boundary is served from the cached bytes.
  absl::StatusOr<FetchedState> again = FetchStageState({src.address}, Wanted(2, 7));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->bytes, got->bytes);
  EXPECT_EQ(src.snapshots, 1);
}

TEST(StateTransferTest, PassedBoundaryWithoutSnapshotIsRefused) {
  Source src;
  src.server->OnBoundary(9, {{1, 5}});
  EXPECT_EQ(*QuerySourceIteration(src.address, nullptr, absl::Seconds(5)), 9u);
  absl::StatusOr<FetchedState> got = FetchStageState({src.address}, Wanted(1, 4));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("already started"), std::string::npos) << got.status();
  absl::StatusOr<FetchedState> other = FetchStageState({src.address}, Wanted(3, 12));
  EXPECT_NE(other.status().message().find("does not host stage 3"), std::string::npos)
      << other.status();
}

// Note [Snapshot in the iteration]: with in_iteration set, the boundary
// the source is at is served from a snapshot taken then (and cached);
// once its owner says the update ran, the request is refused as before;
// passed boundaries older than the current one never reach it.
TEST(StateTransferTest, TheBoundaryASourceIsAtIsServedWhileItsUpdateHasNotRun) {
  StateServerOptions o;
  std::atomic<int> asked{0};
  std::atomic<bool> updated{false};
  o.in_iteration = [&](int stage, uint64_t boundary) -> absl::StatusOr<StageSnapshot> {
    ++asked;
    if (updated) return absl::FailedPreconditionError("its update ran");
    return StageSnapshot{Pattern(4000, static_cast<int>(boundary) + stage), 31};
  };
  Source src(o);
  src.server->OnBoundary(9, {{1, 5}});
  absl::StatusOr<FetchedState> got = FetchStageState({src.address}, Wanted(1, 9));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, Pattern(4000, 10));
  EXPECT_EQ(got->params_digest, 31u);
  ASSERT_TRUE(FetchStageState({src.address}, Wanted(1, 9)).ok());
  EXPECT_EQ(asked.load(), 1) << "the snapshot is cached";
  EXPECT_EQ(src.snapshots, 0);
  // An older boundary is not asked for; a later iteration's, once updated,
  // is refused.
  EXPECT_FALSE(FetchStageState({src.address}, Wanted(1, 8)).ok());
  EXPECT_EQ(asked.load(), 1);
  src.server->OnBoundary(10, {{1, 6}});
  updated = true;
  absl::StatusOr<FetchedState> late = FetchStageState({src.address}, Wanted(1, 10));
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_NE(late.status().message().find("its update ran"), std::string::npos) << late.status();
}

TEST(StateTransferTest, CutStreamResumesFromItsOffset) {
  StateServerOptions o;
  o.cut_first_stream_after_chunks = 1;
  Source src(o);
  absl::StatusOr<FetchedState> got = FetchAcrossBoundary(src, Wanted(1, 3), {src.address});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, Pattern((size_t{5} << 20) / 2, 1));
  EXPECT_EQ(got->streams, 2);  // cut after 1 MiB, resumed
  EXPECT_EQ(got->sources_tried, 1);
}

TEST(StateTransferTest, DeadReplicaIsSkippedForALiveOne) {
  // A closed port first (a replica that just died), then a live source.
  Source fresh;
  std::string dead;
  {
    Source gone;
    dead = gone.address;
  }
  absl::StatusOr<FetchedState> got =
      FetchAcrossBoundary(fresh, Wanted(1, 8), {dead, fresh.address});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->source, fresh.address);
  EXPECT_EQ(got->sources_tried, 2);
}

TEST(StateTransferTest, MutualTlsChecksBothEnds) {
  // Certificates are dated from the wall clock (TLS checks validity).
  const absl::Time now = common::RealClock::Create()->Now();
  auto source_key = *identity::Identity::Generate();
  auto joiner_key = *identity::Identity::Generate();
  auto other_key = *identity::Identity::Generate();
  StateServerOptions so;
  so.self = source_key->id();
  so.credentials = *identity::PeerCredentials::Create({source_key.get()}, now);
  Source src(so, 3000);
  FetchOptions o = Wanted(1, 4);
  o.self = joiner_key->id();
  o.credentials = *identity::PeerCredentials::Create({joiner_key.get()}, now);
  absl::StatusOr<FetchedState> got =
      FetchAcrossBoundary(src, o, {StateSource(src.address, source_key->id())});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes.size(), 3000u);
  // A caller claiming someone else's id is refused...
  FetchOptions liar = o;
  liar.self = other_key->id();
  EXPECT_EQ(FetchStageState({StateSource(src.address, source_key->id())}, liar).status().code(),
            absl::StatusCode::kUnavailable);  // UNAUTHENTICATED, reported per source
  // ...and a server that is not the replica we meant is not trusted.
  EXPECT_FALSE(FetchStageState({StateSource(src.address, other_key->id())}, o).ok());
  // Plain text cannot talk to a TLS source.
  FetchOptions plain = o;
  plain.credentials = nullptr;
  EXPECT_FALSE(FetchStageState({src.address}, plain).ok());
}

// A source whose snapshot is larger than the stage can be (it claimed any
// size, and every byte was read and held until the deadline) is refused at
// its first chunk; the next source delivers.
TEST(StateTransferTest, ASnapshotLargerThanTheStageIsRefusedAtItsFirstChunk) {
  Source big({}, size_t{8} << 20);
  Source honest({}, size_t{1} << 20);
  // Both reach boundary 3 with a joiner waiting (snapshots cached). Without
  // the bound the whole 8 MiB was taken.
  absl::StatusOr<FetchedState> unbounded = FetchAcrossBoundary(big, Wanted(1, 3), {big.address});
  ASSERT_TRUE(unbounded.ok()) << unbounded.status();
  EXPECT_EQ(unbounded->bytes.size(), size_t{8} << 20);
  ASSERT_TRUE(FetchAcrossBoundary(honest, Wanted(1, 3), {honest.address}).ok());

  FetchOptions o = Wanted(1, 3);
  o.max_bytes = StateBytesBound(64 * 1024);  // 1.75 MiB for 64 Ki parameters
  absl::StatusOr<FetchedState> got = FetchStageState({big.address, honest.address}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->source, honest.address);
  EXPECT_EQ(got->sources_tried, 2);
  EXPECT_EQ(got->streams, 2) << "the oversized source is not retried";
  absl::StatusOr<FetchedState> refused = FetchStageState({big.address}, o);
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("RESOURCE_EXHAUSTED"), std::string::npos)
      << refused.status();
}

// Note [Checkpoint copies]: a checkpoint published at its boundary is
// served after the boundary has passed (a copy holder asks a little late).
TEST(StateTransferTest, APublishedCheckpointIsServedAfterItsBoundary) {
  Source src;
  src.server->Publish(1, 10, StageSnapshot{Pattern(3000, 9), 5});
  src.server->OnBoundary(12, {{1, 5}});
  absl::StatusOr<FetchedState> got = FetchStageState({src.address}, Wanted(1, 10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, Pattern(3000, 9));
  EXPECT_EQ(src.snapshots, 0) << "the published bytes are served, not a new snapshot";
}

// A copy of a stage this node does not host is served whatever the
// boundary, listed in Health, and only the newest `keep` per stage stay.
TEST(StateTransferTest, HeldCopiesAreServedListedAndPruned) {
  Source holder;
  holder.server->OnBoundary(40, {{2, 1}});  // hosts stage 2 only
  for (uint64_t it : {10, 20, 30}) {
    holder.server->HoldCopy(1, it, StageSnapshot{Pattern(2000, static_cast<int>(it)), it}, 2);
  }
  holder.server->HoldCopy(3, 30, StageSnapshot{Pattern(100, 3), 1}, 2);
  absl::StatusOr<std::vector<std::pair<int, uint64_t>>> held =
      QueryHeldCopies(holder.address, nullptr, absl::Seconds(5));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(*held, (std::vector<std::pair<int, uint64_t>>{{1, 20}, {1, 30}, {3, 30}}));
  absl::StatusOr<FetchedState> got = FetchStageState({holder.address}, Wanted(1, 30));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, Pattern(2000, 30));
  EXPECT_EQ(got->params_digest, 30u);
  absl::StatusOr<FetchedState> pruned = FetchStageState({holder.address}, Wanted(1, 10));
  EXPECT_FALSE(pruned.ok());
  EXPECT_NE(pruned.status().message().find("does not host stage 1"), std::string::npos)
      << pruned.status();
  // A bounded fetch refuses a copy larger than the stage can be.
  FetchOptions o = Wanted(1, 30);
  o.max_bytes = 1000;
  EXPECT_FALSE(FetchStageState({holder.address}, o).ok());
}

// Note [Peer quotas]: a stranger asking for snapshots is held to its bytes
// and stream budget; a member of the same source is served.
TEST(StateTransferTest, AStrangersRequestsAreHeldToItsQuota) {
  common::SimClock quota_clock;
  common::PeerQuotaOptions q;
  q.service = "state";
  q.member = {100, 100, 1e9, 1e9, 4};
  q.stranger = {1, 10, 1e5, 4e6, 1};
  auto quota = std::make_shared<common::PeerQuota>(q, &quota_clock);
  const common::NodeId member = common::NodeId::ForName("member");
  quota->SetClassifier([member](const common::NodeId& id) {
    return id == member ? common::PeerClass::kMember : common::PeerClass::kStranger;
  });
  StateServerOptions o;
  o.quota = quota;
  Source src(o);  // 2.5 MiB snapshots
  absl::StatusOr<FetchedState> first = FetchAcrossBoundary(src, Wanted(2, 7), {src.address});
  ASSERT_TRUE(first.ok()) << first.status();
  // 2.5 of the stranger's 4 MB are spent: the next copy is refused.
  FetchOptions again = Wanted(2, 7);
  again.deadline = absl::Seconds(2);
  absl::StatusOr<FetchedState> second = FetchStageState({src.address}, again);
  EXPECT_FALSE(second.ok());
  EXPECT_EQ((quota->refusals()[{common::QuotaReason::kBytes, common::PeerClass::kStranger}]),
            1u);
  FetchOptions as_member = Wanted(2, 7);
  as_member.self = member;
  EXPECT_TRUE(FetchStageState({src.address}, as_member).ok());
}

// Note [Health channels]: one channel per member while its queries succeed;
// a failed query drops it (the next dials afresh), and so does a change of
// credentials or a set past kMaxChannels.
TEST(StateTransferTest, HealthChannelsKeepAChannelWhileItsQueriesSucceed) {
  HealthChannels health;
  auto src = std::make_unique<Source>();
  src->server->OnBoundary(9, {{1, 5}});
  const StateSource at(src->address, common::NodeId::ForName("source"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(*health.QueryIteration(at, nullptr, absl::Seconds(5)), 9u);
    EXPECT_EQ(health.channels(), 1u);
  }
  src->server->OnBoundary(10, {{1, 5}});
  EXPECT_EQ(*health.QueryIteration(at, nullptr, absl::Seconds(5)), 10u);
  // Not training yet: answered, so the channel stays.
  Source idle;
  const StateSource idle_at(idle.address, common::NodeId::ForName("source"));
  absl::StatusOr<uint64_t> none = health.QueryIteration(idle_at, nullptr, absl::Seconds(5));
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();
  EXPECT_EQ(health.channels(), 2u);
  // The source goes away: the query fails and its channel is dropped.
  src.reset();
  EXPECT_FALSE(health.QueryIteration(at, nullptr, absl::Seconds(5)).ok());
  EXPECT_EQ(health.channels(), 1u);
  // New credentials: every kept channel goes.
  Source other;
  const StateSource other_at(other.address, common::NodeId::ForName("source"));
  (void)health.QueryIteration(other_at, nullptr, absl::Seconds(5));
  EXPECT_EQ(health.channels(), 2u);
  none = health.QueryIteration(idle_at, identity::PeerCredentials::Insecure(), absl::Seconds(5));
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();
  EXPECT_EQ(health.channels(), 1u);
  // Past kMaxChannels members, the kept set starts again.
  HealthChannels many;
  for (size_t i = 0; i <= HealthChannels::kMaxChannels; ++i) {
    (void)many.QueryIteration(StateSource(idle.address, common::NodeId::ForName(
                                                            absl::StrCat("m", i))),
                              nullptr, absl::Seconds(5));
  }
  EXPECT_EQ(many.channels(), 1u);
}

}  // namespace
}  // namespace skipswarm::node

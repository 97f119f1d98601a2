// Note [Checkpoint copies]: who holds a stage's copies, the holder's disk
// store, and a copier pulling a published checkpoint over loopback gRPC
// (port 0) into its store and StateServer. No sleeps: the test waits for
// the copier's counters.
#include "node/daemon/gossip/checkpoint_copies.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

membership::MemberInfo Member(const std::string& name, std::vector<uint32_t> stages) {
  membership::MemberInfo m;
  m.id = common::NodeId::ForName(name);
  m.stages = std::move(stages);
  return m;
}

membership::View SwarmView() {
  membership::View v;
  v.members = {Member("d0", {0}), Member("d1", {0}), Member("s1r0", {1}), Member("s1r1", {1}),
               Member("s2r0", {2}), Member("s2r1", {2}), Member("s3r0", {3}),
               Member("s3r1", {3}), Member("joining", {})};
  return v;
}

TEST(CheckpointCopiesTest, HoldersAreKLiveMembersThatDoNotHostTheStage) {
  membership::View v = SwarmView();
  for (int stage = 0; stage < 4; ++stage) {
    std::vector<common::NodeId> holders = CopyHolders(v, stage, 2);
    ASSERT_EQ(holders.size(), 2u);
    EXPECT_NE(holders[0], holders[1]);
    for (const common::NodeId& h : holders) {
      for (const membership::MemberInfo& m : v.members) {
        if (m.id != h) continue;
        EXPECT_FALSE(m.stages.empty()) << "a member without a stage holds no copy";
        EXPECT_EQ(std::count(m.stages.begin(), m.stages.end(), static_cast<uint32_t>(stage)), 0);
      }
      EXPECT_TRUE(IsCopyHolder(v, h, stage, 2));
    }
    // Every node computes the same holders, whatever the order of its view.
    membership::View reversed = v;
    std::reverse(reversed.members.begin(), reversed.members.end());
    EXPECT_EQ(CopyHolders(reversed, stage, 2), holders);
  }
  // A dead holder is replaced by the next in rank; the other stays.
  std::vector<common::NodeId> before = CopyHolders(v, 1, 2);
  for (membership::MemberInfo& m : v.members) {
    if (m.id == before[0]) m.state = proto::MEMBER_STATE_DEAD;
  }
  std::vector<common::NodeId> after = CopyHolders(v, 1, 2);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], before[1]);
  EXPECT_NE(after[1], before[0]);
  EXPECT_TRUE(CopyHolders(v, 1, 0).empty());
}

TEST(CheckpointCopiesTest, StoreKeepsTheNewestCopiesPerStageAcrossReopening) {
  const std::string dir = ::testing::TempDir() + "/copy-store";
  std::filesystem::remove_all(dir);
  {
    auto store = *CopyStore::Open(dir, 2);
    for (uint64_t it : {10, 20, 30}) ASSERT_TRUE(store->Put(1, it, absl::StrCat("s1@", it)).ok());
    ASSERT_TRUE(store->Put(2, 30, "s2@30").ok());
  }
  std::ofstream(dir + "/stage-x-iter-1.ckpt") << "not ours";
  auto store = *CopyStore::Open(dir, 2);
  EXPECT_EQ(store->List(), (std::vector<std::pair<int, uint64_t>>{{1, 20}, {1, 30}, {2, 30}}));
  EXPECT_EQ(*store->Read(1, 30), "s1@30");
  EXPECT_TRUE(absl::IsNotFound(store->Read(1, 10).status()));
}

TEST(CheckpointCopiesTest, CopierPullsAPublishedCheckpointIntoDiskAndServer) {
  StateServerOptions so;
  so.self = common::NodeId::ForName("replica");
  so.swarm_id = "t";
  auto replica = *StateServer::Create(so, [](int) -> absl::StatusOr<StageSnapshot> {
    return absl::InternalError("no snapshot expected: the checkpoint was published");
  });
  const std::string bytes(300000, 'w');
  replica->Publish(1, 20, StageSnapshot{bytes, 9});
  replica->OnBoundary(21, {{1, 9}});
  const std::string replica_address = absl::StrCat("127.0.0.1:", replica->port());

  so.self = common::NodeId::ForName("holder");
  auto holder = *StateServer::Create(so, [](int) -> absl::StatusOr<StageSnapshot> {
    return absl::NotFoundError("none");
  });
  const std::string dir = ::testing::TempDir() + "/copier";
  std::filesystem::remove_all(dir);
  auto store = *CopyStore::Open(dir, 3);
  CopierOptions co;
  co.self = so.self;
  co.swarm_id = "t";
  co.max_bytes = [](int) { return uint64_t{1} << 20; };
  {
    CheckpointCopier copier(co, holder.get(), store.get());
    copier.Request(1, 20, {StateSource(replica_address)});
    // A source that claims more than the stage can hold is refused.
    StateServerOptions big = so;
    big.self = common::NodeId::ForName("big");
    auto hostile = *StateServer::Create(big, [](int) -> absl::StatusOr<StageSnapshot> {
      return absl::NotFoundError("none");
    });
    hostile->Publish(2, 20, StageSnapshot{std::string(size_t{2} << 20, 'x'), 1});
    hostile->OnBoundary(21, {{2, 1}});
    copier.Request(2, 20, {StateSource(absl::StrCat("127.0.0.1:", hostile->port()))});
    while (copier.copies_made() + copier.pulls_failed() < 2) std::this_thread::yield();
    EXPECT_EQ(copier.copies_made(), 1);
    EXPECT_EQ(copier.pulls_failed(), 1);
  }
  EXPECT_EQ(*store->Read(1, 20), bytes);
  EXPECT_EQ(store->List(), (std::vector<std::pair<int, uint64_t>>{{1, 20}}));
  EXPECT_EQ(holder->HeldCopies(), (std::vector<std::pair<int, uint64_t>>{{1, 20}}));
  // Served by the holder, which does not host stage 1.
  FetchOptions o;
  o.self = common::NodeId::ForName("restorer");
  o.swarm_id = "t";
  o.stage = 1;
  o.iteration = 20;
  absl::StatusOr<FetchedState> got =
      FetchStageState({StateSource(absl::StrCat("127.0.0.1:", holder->port()))}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, bytes);
}

}  // namespace
}  // namespace skipswarm::node

#include "node/daemon/stack/route_recorder.h"

#include <cstdlib>
#include <filesystem>

#include "gtest/gtest.h"
#include "model/route_record.h"
#include "node/daemon/stack/routes_file_planner.h"

namespace skipswarm::node {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::filesystem::remove(path);
  return path;
}

// 2 data nodes, 3 stages x 2 replicas.
std::vector<PeerInfo> Members() {
  std::vector<PeerInfo> m;
  auto add = [&m](const char* name, int stage) {
    PeerInfo p;
    p.id = PeerId::ForName(name);
    p.stages = {stage};
    m.push_back(p);
  };
  for (const char* n : {"d0", "d1"}) add(n, 0);
  for (const char* n : {"a1", "b1"}) add(n, 1);
  for (const char* n : {"a2", "b2"}) add(n, 2);
  return m;
}

TEST(RouteRecorderTest, RecordReadsBackAsTheGlobalBatchWithItsStages) {
  StaticSwarmView view(Members());
  const int mbs = 3;
  std::vector<std::string> paths;
  std::map<std::string, std::vector<std::vector<PlannedRoute>>> planned;  // name -> per iteration
  for (const char* name : {"d1", "d0"}) {  // d1 first: the record sorts by GLOBAL_MB
    paths.push_back(TempPath(std::string(name) + ".routes"));
    auto rec = RecordingPlanner::Create(std::make_unique<InOrderPlanner>(), name, paths.back(),
                                        mbs);
    ASSERT_TRUE(rec.ok()) << rec.status();
    EXPECT_EQ((*rec)->name(), "inorder");
    for (uint64_t it = 0; it < 2; ++it) {
      auto r = (*rec)->Plan({.iteration = it, .self = PeerId::ForName(name), .mbs = mbs,
                             .num_stages = 3},
                            view);
      ASSERT_TRUE(r.ok()) << r.status();
      planned[name].push_back(*r);
    }
  }
  auto record = model::ReadRouteRecord(paths);
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_EQ(record->size(), 2u);
  for (int64_t it = 0; it < 2; ++it) {
    const std::vector<model::RecordedRoute>& got = record->at(it);
    ASSERT_EQ(got.size(), 6u);  // D x M: the reference's global batch
    for (int k = 0; k < 6; ++k) {
      const model::RecordedRoute& r = got[k];
      // Note [Data order]: i*D*M + d*M + j, d = rank of the data node.
      EXPECT_EQ(r.global_mb, static_cast<uint64_t>(it * 6 + k));
      const int rank = k / mbs;
      const std::string origin = rank == (PeerId::ForName("d0") < PeerId::ForName("d1") ? 0 : 1)
                                     ? "d0"
                                     : "d1";
      EXPECT_EQ(r.origin, origin);
      const PlannedRoute& p = planned[origin][it][k % mbs];
      ASSERT_EQ(r.stages.size(), p.hops.size());
      for (size_t h = 0; h < p.hops.size(); ++h) {
        EXPECT_EQ(r.stages[h], p.hops[h].stage);
        EXPECT_EQ(r.nodes[h], p.hops[h].node.Hex().substr(0, 8));
      }
    }
  }
}

TEST(RouteRecorderTest, DataSlotsAndSkipRoutesAreRecordedAndReplanningWins) {
  StaticSwarmView view(Members());
  std::map<std::string, PeerId> ids;
  for (const PeerInfo& p : Members()) {
    for (const char* n : {"d0", "d1", "a1", "b1", "a2", "b2"}) {
      if (PeerId::ForName(n) == p.id) ids[n] = p.id;
    }
  }
  const std::string path = TempPath("slots.routes");
  for (const char* routes : {"d0 5 d0/0 a2/2\nd0 1 d0/0 a1/1 b2/2\n", "d0 5 d0/0 b1/1\n"}) {
    auto inner = RoutesFilePlanner::Parse(routes, ids);
    ASSERT_TRUE(inner.ok()) << inner.status();
    auto rec = RecordingPlanner::Create(*std::move(inner), "d0", path, 2);
    ASSERT_TRUE(rec.ok()) << rec.status();
    ASSERT_TRUE((*rec)->Plan({.iteration = 3, .self = ids["d0"], .mbs = 2}, view).ok());
  }
  auto record = model::ReadRouteRecord({path});
  ASSERT_TRUE(record.ok()) << record.status();
  const std::vector<model::RecordedRoute>& got = record->at(3);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].global_mb, 3u * 2 * 2 + 1);  // iteration x D x M + data slot
  EXPECT_EQ(got[0].stages, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(got[1].global_mb, 3u * 2 * 2 + 5);
  EXPECT_EQ(got[1].stages, (std::vector<int>{0, 1}));  // the second plan's line won
}

TEST(RouteRecorderTest, AnUnwritableRecordIsAnError) {
  auto rec = RecordingPlanner::Create(std::make_unique<InOrderPlanner>(), "d0",
                                      "/nonexistent-dir/x.routes", 2);
  EXPECT_TRUE(absl::IsUnavailable(rec.status())) << rec.status();
  EXPECT_FALSE(RecordingPlanner::Create(nullptr, "d0", TempPath("y.routes"), 2).ok());
}

}  // namespace
}  // namespace skipswarm::node

// `skipswarm local --sdp=forward --local_mixed` (Note [Mixed local swarm]
// in launcher/local_layout.h): two SDP nodes train their subnetworks beside
// a pipeline swarm of the tiny model (4 stages here), averaging the stages
// they share with its replicas. The loss is finite and falls, the SDP
// nodes send and receive no pipeline frame, their routes stay on their own
// node, and no two data nodes read the same micro-batch.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

constexpr int kIterations = 16;
constexpr int kMbs = 2;
constexpr int kDataNodes = 3;  // d0, w0, w1

// "frames_sent"'s or "frames_received"'s largest value in `node`'s lines.
int64_t MaxField(const std::string& progress, const std::string& node, const std::string& key) {
  int64_t best = -1;
  for (const std::string& line : Lines(progress)) {
    if (!absl::StrContains(line, "\"node\":\"" + node + "\"")) continue;
    const size_t at = line.find("\"" + key + "\":");
    if (at == std::string::npos) continue;
    const size_t start = at + key.size() + 3;
    int64_t v;
    const size_t end = line.find_first_of(",}", start);
    if (absl::SimpleAtoi(line.substr(start, end - start), &v)) best = std::max(best, v);
  }
  return best;
}

TEST(LocalMixedTest, SdpNodesTrainBesideThePipelineOnTheirOwnData) {
  const std::string dir = *MakeTestDir("local_mixed");
  std::vector<std::string> args = TinyModelArgs("local");
  // 4 stages: keep 0.75 gives w0 = 0+1+3 and w1 = 0+2+3.
  args.insert(args.end(), {"--stages=4", "--layers=4", "--sdp=forward", "--local_mixed",
                           "--sdp_workers=2", "--sdp_keep=0.75", "--local_data_nodes=1",
                           "--local_replicas=1", "--local_mbs=" + std::to_string(kMbs),
                           "--local_record_routes", "--local_dir=" + dir + "/run",
                           "--local_iterations=" + std::to_string(kIterations)});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "4 pipeline nodes (1 data nodes, 3 stages x 1 replicas) "
                                        "and 2 SDP nodes (forward masking, 3 of 4 stages each: "
                                        "w0=0+1+3 w1=0+2+3)"))
      << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "pipeline frames sent/received, SDP nodes: w0 0/0 w1 0/0"))
      << r->out;

  // The loss (mean over the three data nodes) is finite and falls.
  absl::StatusOr<std::string> csv = ReadFile(dir + "/run/loss.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  std::vector<double> losses;
  for (const std::string& line : Lines(*csv)) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    double loss;
    if (f.size() > 1 && absl::SimpleAtod(f[1], &loss)) losses.push_back(loss);
  }
  ASSERT_EQ(losses.size(), static_cast<size_t>(kIterations)) << *csv;
  for (double l : losses) EXPECT_TRUE(std::isfinite(l)) << *csv;
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last = (losses[kIterations - 3] + losses[kIterations - 2] +
                       losses[kIterations - 1]) / 3;
  EXPECT_LT(last, first - 0.5) << *csv;

  // The metric: SDP nodes exchanged no pipeline frame; the pipeline did.
  absl::StatusOr<std::string> progress = ReadFile(dir + "/run/progress.jsonl");
  ASSERT_TRUE(progress.ok()) << progress.status();
  for (const char* sdp : {"w0", "w1"}) {
    EXPECT_EQ(MaxField(*progress, sdp, "frames_sent"), 0) << sdp;
    EXPECT_EQ(MaxField(*progress, sdp, "frames_received"), 0) << sdp;
  }
  EXPECT_GT(MaxField(*progress, "d0", "frames_sent"), 0);
  EXPECT_GT(MaxField(*progress, "s1r0", "frames_received"), 0);

  // Data: every (iteration, global MB) once over all data nodes, inside
  // its iteration's range; an SDP node's every hop on one node.
  std::map<std::pair<int64_t, int64_t>, std::string> seen;
  for (const char* origin : {"d0", "w0", "w1"}) {
    absl::StatusOr<std::string> routes = ReadFile(dir + "/run/routes/" + origin + ".routes");
    ASSERT_TRUE(routes.ok()) << routes.status();
    int count = 0;
    for (const std::string& line : Lines(*routes)) {
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      ASSERT_GE(f.size(), 4u) << line;
      int64_t it, mb;
      ASSERT_TRUE(absl::SimpleAtoi(f[0], &it) && absl::SimpleAtoi(f[1], &mb)) << line;
      EXPECT_GE(mb, it * kDataNodes * kMbs) << line;
      EXPECT_LT(mb, (it + 1) * kDataNodes * kMbs) << line;
      auto [where, fresh] = seen.emplace(std::make_pair(it, mb), origin);
      EXPECT_TRUE(fresh) << "MB " << mb << " of iteration " << it << " read by both "
                         << where->second << " and " << origin;
      if (origin[0] == 'w') {
        std::set<std::string> nodes;
        for (size_t i = 3; i < f.size(); ++i) nodes.insert(f[i].substr(0, f[i].find('/')));
        EXPECT_EQ(nodes.size(), 1u) << line;
      }
      ++count;
    }
    EXPECT_EQ(count, kIterations * kMbs) << origin;
  }
}

}  // namespace
}  // namespace skipswarm::tests

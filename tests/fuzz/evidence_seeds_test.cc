// The evidence fuzzer's seeds (corpus/evidence/, written by make_seeds) must
// reach the verdicts their names say, judged as evidence_fuzzer.cc judges
// them (JudgeServedPiece with the real sketch judge): a seed whose
// signatures went stale (evidence_world.h changed without regenerating)
// would leave the CI run mutating invalid pieces only. Regenerate them with
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "node/compute/output_check.h"
#include "node/daemon/gossip/evidence_service.h"
#include "node/stage/evidence_bans.h"
#include "tests/fuzz/evidence_world.h"

namespace skipswarm::fuzz {
namespace {

TEST(EvidenceSeedsTest, EverySeedReachesTheVerdictItsNameSays) {
  const EvidenceWorld w;
  std::set<std::string> reached;
  for (const auto& entry : std::filesystem::directory_iterator("tests/fuzz/corpus/evidence")) {
    const std::string name = entry.path().filename().string();
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string input = bytes.str();
    ASSERT_GE(input.size(), 1u) << name;
    const uint8_t flags = static_cast<uint8_t>(input[0]);
    proto::FetchEvidenceResponse response;
    ASSERT_TRUE(response.ParseFromString(input.substr(1))) << name;
    const std::vector<node::Evidence> pieces =
        node::PiecesFromResponse(response, node::kMaxServedEvidencePieces);
    ASSERT_FALSE(pieces.empty()) << name;
    const node::PieceVerdict v = node::JudgeServedPiece(
        pieces[0], Accused(w, flags).id(), Lookup(w, flags), node::testing::EvidenceLimits(),
        [](const node::WireTensor& received, const model::OutputSketch& sketch,
           const model::SketchCheckOptions& options) {
          return node::CheckOutputAgainstSketch(received, sketch, options);
        });
    const std::string verdict = node::PieceVerdictName(v);
    EXPECT_EQ(name.rfind(verdict, 0), 0u) << name << " judged " << verdict;
    reached.insert(verdict);
  }
  // The seeds reach both convictions, so mutations start next to them.
  EXPECT_EQ(reached.count("false_input"), 1u);
  EXPECT_EQ(reached.count("convicts"), 1u);
  EXPECT_GE(reached.size(), 5u);
}

}  // namespace
}  // namespace skipswarm::fuzz

// `skipswarm local --sdp`: four real node processes, each training its own
// subnetwork over gRPC (forward and backward masking), train exactly like
// `skipswarm train-ref --sdp` with the same assignment: the loss of every
// iteration within 1e-4 relative (loss.csv keeps 6 significant digits).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

constexpr int kIterations = 12;

// 6 stages (keep 0.5 = stages {0, j, 5}), small enough for CI.
std::vector<std::string> Args(const std::string& command) {
  return {command,          "--stages=6",        "--layers=6",     "--d_model=32",
          "--heads=2",      "--ffn=64",          "--seq_len=32",   "--samples_per_mb=2",
          "--threads=1",    "--warmup_steps=2",  "--lr=0.003",     "--seed=1",
          "--init_seed=1",  "--sdp_keep=0.5",    "--sdp_workers=4"};
}

std::vector<double> Column(const std::string& text, const std::string& key) {
  std::vector<double> out;
  for (const std::string& line : Lines(text)) {
    if (key.empty()) {  // loss.csv: iteration,loss,...
      std::vector<std::string> f = absl::StrSplit(line, ',');
      double v;
      if (f.size() > 1 && absl::SimpleAtod(f[1], &v)) out.push_back(v);
      continue;
    }
    const size_t at = line.find("\"" + key + "\":");
    if (at == std::string::npos) continue;
    const size_t start = at + key.size() + 3;
    double v;
    if (absl::SimpleAtod(line.substr(start, line.find(',', start) - start), &v)) out.push_back(v);
  }
  return out;
}

void CompareWithReference(const std::string& mode) {
  const std::string dir = *MakeTestDir("local_sdp_" + mode);
  std::vector<std::string> local = Args("local");
  local.insert(local.end(), {"--sdp=" + mode, "--local_dir=" + dir + "/run",
                             "--local_iterations=" + std::to_string(kIterations),
                             "--local_mbs=2"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(local, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "4 SDP nodes (" + mode + " masking, 3 of 6 stages"))
      << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "w0=0+1+5 w1=0+2+5 w2=0+3+5 w3=0+4+5")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "peak RSS per node (MiB): w0 ")) << r->out;

  std::vector<std::string> ref = Args("train-ref");
  ref.insert(ref.end(), {"--sdp=" + mode, "--iterations=" + std::to_string(kIterations),
                         "--mbs_per_iteration=2", "--log_every=1", "--eval_every=0",
                         "--final_eval_batches=1", "--eval_batches=1",
                         "--metrics_out=" + dir + "/ref.jsonl"});
  absl::StatusOr<ProcessResult> t = RunSkipswarm(ref, dir);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->exit_code, 0) << t->out << t->err;

  const std::vector<double> swarm = Column(*ReadFile(dir + "/run/loss.csv"), "");
  const std::vector<double> want = Column(*ReadFile(dir + "/ref.jsonl"), "loss");
  ASSERT_EQ(swarm.size(), static_cast<size_t>(kIterations));
  ASSERT_EQ(want.size(), static_cast<size_t>(kIterations));
  for (int i = 0; i < kIterations; ++i) {
    EXPECT_LT(std::abs(swarm[i] - want[i]) / want[i], 1e-4)
        << mode << " iteration " << i << ": swarm " << swarm[i] << " train-ref " << want[i];
  }
}

TEST(LocalSdpTest, ForwardMaskingSwarmEqualsTrainRef) { CompareWithReference("forward"); }

TEST(LocalSdpTest, BackwardMaskingSwarmEqualsTrainRef) { CompareWithReference("backward"); }

}  // namespace
}  // namespace skipswarm::tests

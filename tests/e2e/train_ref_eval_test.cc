// `skipswarm train-ref` with --checkpoint_dir, then `skipswarm eval
// --checkpoint=` on what it wrote: both exit 0 with finite figures, and
// eval reads back the model train-ref evaluated last (same validation
// loss on the same batches).
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(TrainRefEvalTest, CheckpointOfTrainRefEvaluatesToTheSameLoss) {
  const std::string dir = *MakeTestDir("train_ref_eval");
  const std::string ckpt = dir + "/ckpt";
  std::vector<std::string> train = TinyModelArgs("train-ref");
  train.insert(train.end(), {"--iterations=10", "--checkpoint_dir=" + ckpt, "--eval_batches=4",
                             "--final_eval_batches=8", "--log_every=5"});
  absl::StatusOr<ProcessResult> t = RunSkipswarm(train, dir);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->exit_code, 0) << t->out << t->err;

  std::smatch m;
  const std::regex progress(R"(iter +10/10 +loss ([0-9.]+))");
  ASSERT_TRUE(std::regex_search(t->out, m, progress)) << t->out;
  const double train_loss = std::stod(m[1].str());
  const std::regex final_eval(R"(eval +iter +10 +val_loss ([0-9.]+) +val_ppl ([0-9.]+))");
  ASSERT_TRUE(std::regex_search(t->out, m, final_eval)) << t->out;
  const double val_loss = std::stod(m[1].str());
  EXPECT_TRUE(std::isfinite(train_loss) && std::isfinite(val_loss));
  EXPECT_LT(val_loss, std::log(256.0)) << "no better than uniform bytes";
  EXPECT_TRUE(std::regex_search(t->out, std::regex("checkpoint +iter 10 +-> " + ckpt)))
      << t->out;

  std::vector<std::string> eval = TinyModelArgs("eval");
  eval.insert(eval.end(), {"--checkpoint=" + ckpt, "--final_eval_batches=8"});
  absl::StatusOr<ProcessResult> e = RunSkipswarm(eval, dir);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->exit_code, 0) << e->out << e->err;
  EXPECT_TRUE(std::regex_search(e->out, std::regex("iteration 10, 3 stages"))) << e->out;
  // The stage-removal table: 0, 1 and 2 of 3 stages removed.
  const std::regex row(R"((\d+)% +(\d) +(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +\+([0-9.]+)%)");
  std::vector<double> losses;
  for (auto it = std::sregex_iterator(e->out.begin(), e->out.end(), row);
       it != std::sregex_iterator(); ++it) {
    const double loss = std::stod((*it)[4].str());
    EXPECT_TRUE(std::isfinite(loss) && std::isfinite(std::stod((*it)[5].str()))) << it->str();
    losses.push_back(loss);
  }
  ASSERT_EQ(losses.size(), 3u) << e->out;
  EXPECT_NEAR(losses[0], val_loss, 1e-3) << "eval of the checkpoint differs from train-ref's";
  EXPECT_GT(losses[2], losses[0]) << "removing stages should cost loss";
}

}  // namespace
}  // namespace skipswarm::tests

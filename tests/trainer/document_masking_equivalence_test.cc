// Document masking under parallel layouts (issue 19): the tiny GPT trained for 10
// iterations with --eod-mask-loss --reset-position-ids (learned positions and RoPE),
// and with --calculate-per-token-loss, under TP 2, PP 2 (1F1B and interleaved) and DP 2
// with the distributed optimizer matches the one-rank run of the same flags: loss and
// gradient norm per iteration within 1e-5 relative, every parameter after training.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"

namespace conveyor::testing_util {
namespace {

const LayoutRun& OneRankReference(const Layout& layout) {
  static auto* references = new std::map<std::string, LayoutRun>;
  const Layout one = OneRank(layout);
  const std::string name = LayoutName(one);
  auto it = references->find(name);
  if (it != references->end()) return it->second;
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(one), "reference_" + name);
  EXPECT_TRUE(run.ok()) << run.status();
  return (*references)[name] = run.ok() ? *run : LayoutRun();
}

class DocumentMaskingEquivalenceTest : public ::testing::TestWithParam<Layout> {};

TEST_P(DocumentMaskingEquivalenceTest, MatchesOneRank) {
  const Layout layout = GetParam();
  const LayoutRun& reference = OneRankReference(layout);
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(layout), LayoutName(layout));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, reference, 1e-5, 1e-5);
  for (const std::string& problem : CompareParams(run->params, reference.params)) {
    ADD_FAILURE() << problem;
  }
}

std::vector<Layout> DocumentLayouts() {
  std::vector<Layout> all = {TpDp(2, 1, false, false), Pipeline(2, "1f1b", 1, 2),
                             Pipeline(2, "interleaved-1f1b", 2, 4), TpDp(1, 2, false, true)};
  Layout llama_tp = TpDp(2, 1, true, false);  // RoPE, sequence parallel
  llama_tp.llama = true;
  all.push_back(llama_tp);
  for (Layout& l : all) l.documents = true;
  Layout per_token = TpDp(1, 2, false, true);
  per_token.documents = per_token.per_token_loss = true;
  all.push_back(per_token);
  Layout per_token_pp = Pipeline(2, "1f1b", 1, 2);
  per_token_pp.documents = per_token_pp.per_token_loss = true;
  all.push_back(per_token_pp);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, DocumentMaskingEquivalenceTest,
                         ::testing::ValuesIn(DocumentLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

// The flags change the run (so the equivalence above is not that of plain runs): the
// masked curve leaves the plain one, and per-token weighting leaves the per-micro-batch
// mean's.
TEST(DocumentMaskingTest, MaskingAndPerTokenLossChangeTheRun) {
  Layout plain;
  Layout documents;
  documents.documents = true;
  Layout per_token = documents;
  per_token.per_token_loss = true;
  const LayoutRun& a = OneRankReference(plain);
  const LayoutRun& b = OneRankReference(documents);
  const LayoutRun& c = OneRankReference(per_token);
  ASSERT_EQ(a.losses.size(), 10u);
  ASSERT_EQ(b.losses.size(), 10u);
  ASSERT_EQ(c.losses.size(), 10u);
  double masked_gap = 0.0, per_token_gap = 0.0;
  for (size_t i = 0; i < 10; ++i) {
    masked_gap = std::max(masked_gap, std::fabs(a.losses[i] - b.losses[i]) / a.losses[i]);
    per_token_gap =
        std::max(per_token_gap, std::fabs(b.grad_norms[i] - c.grad_norms[i]) / b.grad_norms[i]);
  }
  EXPECT_GT(masked_gap, 1e-3);
  EXPECT_GT(per_token_gap, 1e-4);
}

}  // namespace
}  // namespace conveyor::testing_util

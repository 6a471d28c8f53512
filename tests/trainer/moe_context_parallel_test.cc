// docs/design.md §3 for mixtures of experts under context parallelism: the tiny GPT with
// an MoE layer in every layer (top-2 of 4 experts, both auxiliary losses, a capacity that
// drops tokens) trained for 10 iterations with each sample's tokens spread over CP ranks
// matches its one-rank run: loss and gradient norm within 1e-5 relative, and every
// parameter (and expert bias) after training. A rank holds a half or a quarter of each
// sample, so a router deciding on its own tokens would take an expert's capacity from
// them (3 for a CP 2 rank's 4 tokens, where the micro-batch's 8 give 5) and drop other
// tokens, and weigh the auxiliary losses with its own counts
// (moe_context_parallel_metrics_test checks the logged figures).
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"
#include "trainer/config/config_validation.h"

namespace conveyor::testing_util {
namespace {

// A layout and the MoE settings it runs beyond Layout::moe's.
struct MoeCase {
  std::string name;
  Layout layout;
  // Changes to the config (for the layout and its one-rank reference alike); null:
  // Layout::moe's settings.
  std::function<void(Config*)> change;
};

// gtest names a failing case by this.
void PrintTo(const MoeCase& c, std::ostream* os) { *os << c.name; }

Layout ContextParallel(int cp, Layout layout = {}) {
  layout.moe = true;
  layout.cp = cp;
  return layout;
}

// `layout`'s tiny config with the case's changes, resolved again for its ranks.
Config CaseConfig(const MoeCase& c, const Layout& layout) {
  Config config = TinyConfig(layout);
  if (!c.change) return config;
  c.change(&config);
  config.mutable_training()->clear_num_micro_batches();  // derived from the batch sizes
  absl::StatusOr<Config> resolved =
      ResolveConfig(config, layout.tp * layout.cp * layout.pp * layout.dp);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? *resolved : config;
}

class MoeContextParallelTest : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeContextParallelTest, MatchesOneRank) {
  const MoeCase& c = GetParam();
  // Layout::moe's own settings share the cached one-rank run.
  absl::StatusOr<LayoutRun> own_reference;
  if (c.change) {
    own_reference = RunLayout(CaseConfig(c, OneRank(c.layout)), "reference_" + c.name);
    ASSERT_TRUE(own_reference.ok()) << own_reference.status();
  }
  const LayoutRun& reference = c.change ? *own_reference : ReferenceRun(c.layout);
  if (c.layout.expert_bias) {
    const std::vector<float>& bias = reference.params.at("layers.1.mlp.router.expert_bias");
    EXPECT_NE(bias, std::vector<float>(4, 0.0f)) << "the expert bias never moved";
  }
  absl::StatusOr<LayoutRun> run = RunLayout(CaseConfig(c, c.layout), c.name);
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, reference, 1e-5, 1e-5);
  for (const std::string& problem : CompareParams(run->params, reference.params)) {
    ADD_FAILURE() << problem;
  }
}

std::vector<MoeCase> Cases() {
  Layout dp = ContextParallel(2, TpDp(1, 2, false, true));
  Layout tp = ContextParallel(2, TpDp(2, 1, true, false));
  Layout ep = ContextParallel(2);
  ep.ep = 2;  // the expert-parallel ranks are the two context-parallel ranks (DP x CP = 2)
  Layout ep_dp = ContextParallel(2, TpDp(1, 2, false, true));
  ep_dp.ep = 4;  // one expert per rank, the group spanning both DP and CP ranks
  Layout pp = ContextParallel(2, Pipeline(2, "1f1b", 1, 2));
  Layout bias = ContextParallel(2);
  bias.expert_bias = true;
  Layout per_token = ContextParallel(2);
  per_token.per_token_loss = true;
  // seq_aux_loss balances each sequence on its own: two per micro-batch, each spread
  // over both ranks.
  auto seq_aux = [](Config* config) {
    config->mutable_model()->add_moe_router_load_balancing_type("seq_aux_loss");
    config->mutable_training()->set_micro_batch_size(2);
  };
  // seq_aux_loss and global_aux_loss together (Megatron's list form, a coefficient each):
  // the global counts are the whole micro-batch's on every context-parallel rank.
  auto seq_and_global = [seq_aux](Config* config) {
    seq_aux(config);
    ModelConfig& m = *config->mutable_model();
    m.clear_moe_aux_loss_coeff();
    m.add_moe_aux_loss_coeff(0.01f);
    m.add_moe_router_load_balancing_type("global_aux_loss");
    m.add_moe_aux_loss_coeff(0.02f);
  };
  // Dropping by position keeps each expert's earliest tokens of the sample order, which
  // interleaves the ranks' chunks.
  auto position = [](Config* config) {
    config->mutable_model()->set_moe_token_drop_policy("position");
    config->mutable_training()->set_micro_batch_size(2);
  };
  auto padded = [](Config* config) {
    config->mutable_model()->set_moe_pad_expert_input_to_capacity(true);
  };
  // Full recomputation routes each micro-batch twice (gathering twice on every rank).
  auto recomputed = [](Config* config) {
    config->mutable_recompute()->set_recompute_granularity("full");
    config->mutable_recompute()->set_recompute_method("uniform");
    config->mutable_recompute()->set_recompute_num_layers(1);
  };
  return {{"CP2", ContextParallel(2), nullptr},
          {"CP4", ContextParallel(4), nullptr},  // chunks of one token
          {"CP2xDP2_DistOpt", dp, nullptr},
          {"CP2xTP2_SP", tp, nullptr},
          {"CP2xEP2", ep, nullptr},
          {"CP2xDP2xEP4_DistOpt", ep_dp, nullptr},
          {"CP2xPP2_1f1b", pp, nullptr},
          {"CP2_expert_bias", bias, nullptr},
          {"CP2_per_token_loss", per_token, nullptr},
          {"CP2_seq_aux_loss", ContextParallel(2), seq_aux},
          {"CP2xEP2_seq_and_global_aux_loss", ep, seq_and_global},
          {"CP2_drop_position", ContextParallel(2), position},
          {"CP2_padded_to_capacity", ContextParallel(2), padded},
          {"CP2_full_recompute", ContextParallel(2), recomputed}};
}

INSTANTIATE_TEST_SUITE_P(Layouts, MoeContextParallelTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<MoeCase>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor::testing_util

#include "tests/trainer/layout_runs.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "data/mock_dataset.h"
#include "gtest/gtest.h"
#include "parallel/launcher.h"
#include "parallel/parallel_state.h"
#include "runtime/memory_tracker.h"
#include "tests/util/test_dirs.h"
#include "trainer/backend.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/resolved_config.h"
#include "trainer/optimization/expert_bias_update.h"
#include "trainer/rank_training.h"

namespace conveyor::testing_util {
namespace {

// Runs in each child: trains, then writes losses/norms (logging rank) and this rank's
// parameter shards (data-parallel rank 0) as text.
int RankMain(const Config& config, const std::string& dir, const RankEnvironment& env,
             const TransportFactory& make_transport) {
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(config, env.world_size);
  if (!resolved.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env.rank,
                 std::string(resolved.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<Backend> backend = StartBackend(*resolved, env.local_rank);
  if (!backend.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env.rank,
                 std::string(backend.status().message()).c_str());
    return 1;
  }
  const std::unique_ptr<testing_util::FakeDeviceTransport> test_transport =
      make_transport ? make_transport() : nullptr;
  absl::StatusOr<std::unique_ptr<ParallelState>> state =
      ParallelState::Create(env, resolved->layout(), absl::Seconds(60),
                            test_transport != nullptr ? test_transport.get() : backend->transport);
  if (!state.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env.rank, std::string(state.status().message()).c_str());
    return 1;
  }
  const MockSampleSource data(config.training().seed(), config.model().vocab_size(),
                              config.model().seq_length());
  absl::StatusOr<RankRun> run = TrainOnRank(*resolved, **state, data, {}, {}, *backend);
  if (!run.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env.rank, std::string(run.status().message()).c_str());
    return 1;
  }
  if (IsLoggingRank(**state)) {
    std::ofstream f(dir + "/curve");
    for (size_t i = 0; i < run->result.losses.size(); ++i) {
      f << absl::StrFormat("%.17g %.17g\n", run->result.losses[i], run->result.grad_norms[i]);
    }
  }
  if (test_transport != nullptr) {
    std::ofstream f(absl::StrFormat("%s/device_operations.%d", dir, env.rank));
    f << test_transport->device_log().size() << "\n";
  }
  {
    std::ofstream f(absl::StrFormat("%s/memory.%d", dir, env.rank));
    const TrainingResult::ModelStateBytes& model_state = run->result.model_state;
    f << MemoryTracker::Global().peak_bytes(MemoryCategory::kActivations) << " "
      << MemoryTracker::Global().peak_total() << " " << model_state.weights << " "
      << model_state.grads << " " << model_state.optimizer << "\n";
  }
  // Each value once: a parameter's from rank 0 of the ranks holding it (an expert's from
  // its expert-data-parallel rank 0).
  if ((*state)->dp_cp().rank() == 0 || (*state)->expert_dp().rank() == 0) {
    std::ofstream f(absl::StrFormat("%s/params.%d", dir, env.rank));
    for (Parameter* p : run->stage->parameters()) {
      // Under --bf16 the distributed optimizer keeps some parameters' fp32 values only in
      // its master shard, gone with the run: bf16 layouts compare curves only.
      if (p->value.empty()) continue;
      if ((p->expert_parallel ? (*state)->expert_dp() : (*state)->dp_cp()).rank() != 0) continue;
      const std::vector<int64_t> index = GlobalIndices(*p);
      for (size_t i = 0; i < index.size(); ++i) {
        f << p->name << " " << index[i] << " " << absl::StrFormat("%.9g", p->value.data()[i])
          << "\n";
      }
    }
    for (const ExpertBias* bias : StageExpertBiases(run->stage.get())) {
      if ((*state)->dp_cp().rank() != 0) break;
      for (size_t e = 0; e < bias->values().size(); ++e) {
        f << bias->name() << " " << e << " " << absl::StrFormat("%.9g", bias->values()[e]) << "\n";
      }
    }
  }
  return 0;
}

}  // namespace

Layout TpDp(int tp, int dp, bool sp, bool distributed_optimizer) {
  Layout l;
  l.tp = tp;
  l.dp = dp;
  l.sequence_parallel = sp;
  l.distributed_optimizer = distributed_optimizer;
  return l;
}

Layout Pipeline(int pp, std::string schedule, int chunks, int layers) {
  Layout l;
  l.pp = pp;
  l.schedule = std::move(schedule);
  l.chunks = chunks;
  l.layers = layers;
  return l;
}

Layout OneRank(const Layout& layout) {
  Layout one;
  one.layers = layout.layers;
  one.untied = layout.untied;
  one.llama = layout.llama;
  one.qk_layernorm = layout.qk_layernorm;
  one.mla = layout.mla;
  one.bf16 = layout.bf16;
  one.device = layout.device;
  one.documents = layout.documents;
  one.per_token_loss = layout.per_token_loss;
  one.moe = layout.moe;
  one.expert_bias = layout.expert_bias;
  one.group_limited = layout.group_limited;
  one.load_balancing = layout.load_balancing;
  one.rope_scaling = layout.rope_scaling;
  one.window = layout.window;
  one.wsd_decoupled_lr = layout.wsd_decoupled_lr;
  one.squared_relu = layout.squared_relu;
  one.mtp = layout.mtp;
  return one;
}

std::string LayoutName(const Layout& l) {
  std::string name = absl::StrFormat("TP%dxPP%dxDP%d_L%d", l.tp, l.pp, l.dp, l.layers);
  if (l.cp > 1) name += absl::StrFormat("_CP%d", l.cp);
  if (l.ep > 1) name += absl::StrFormat("_EP%d", l.ep);
  if (l.etp > 0) name += absl::StrFormat("_ETP%d", l.etp);
  if (!l.recompute.empty()) name += "_recompute_" + l.recompute;
  if (l.sequence_parallel) name += "_SP";
  if (l.distributed_optimizer) name += "_DistOpt";
  if (!l.schedule.empty()) name += "_" + l.schedule;
  if (l.chunks > 1) name += absl::StrFormat("_V%d", l.chunks);
  if (l.first_stage_layers > 0) name += absl::StrFormat("_first%d", l.first_stage_layers);
  if (l.untied) name += "_untied";
  if (l.account_for_embedding) name += "_embedding_counted";
  if (l.overlap_grad_reduce) name += "_overlap";
  if (l.overlap_param_gather) name += "_param_gather";
  if (l.grad_reduce_in_bf16) name += "_bf16_reduce";
  if (l.llama) name += "_llama";
  if (l.qk_layernorm) name += "_qknorm";
  if (l.mla) name += "_mla";
  if (l.bf16) name += "_bf16";
  if (l.device != "cpu") name += "_" + l.device;
  if (l.documents) name += "_documents";
  if (l.per_token_loss) name += "_per_token_loss";
  if (l.moe) name += "_moe";
  if (l.expert_bias) name += "_expert_bias";
  if (l.group_limited) name += "_group_limited";
  if (!l.load_balancing.empty()) name += "_" + absl::StrReplaceAll(l.load_balancing, {{" ", "_"}});
  if (!l.rope_scaling.empty()) name += "_" + l.rope_scaling;
  if (l.window >= 0) name += absl::StrFormat("_window%d", l.window);
  if (l.wsd_decoupled_lr) name += "_wsd_decoupled_lr";
  if (l.squared_relu) name += "_squared_relu";
  if (l.mtp > 0) name += absl::StrFormat("_mtp%d", l.mtp);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

Config TinyConfig(const Layout& l) {
  Config c;
  ModelConfig& m = *c.mutable_model();
  m.set_num_layers(l.layers);
  m.set_untie_embeddings_and_output_weights(l.untied || l.llama);
  if (l.llama) {
    m.set_position_embedding_type("rope");
    m.set_normalization("RMSNorm");
    m.set_swiglu(true);
    m.set_num_query_groups(2);
    m.set_disable_bias_linear(true);
  }
  m.set_qk_layernorm(l.qk_layernorm);
  if (l.mla) {
    m.set_multi_latent_attention(true);
    m.set_qk_layernorm(true);
    m.set_q_lora_rank(12);
    m.set_kv_lora_rank(10);
    m.set_qk_head_dim(6);
    m.set_qk_pos_emb_head_dim(4);
    m.set_v_head_dim(5);
  }
  m.set_squared_relu(l.squared_relu);
  m.set_mtp_num_layers(l.mtp);
  if (!l.rope_scaling.empty()) m.set_rotary_base(100.0f);  // wavelengths of 6 to 200 tokens
  if (l.rope_scaling == "llama3") {
    m.set_use_rope_scaling(true);
    m.set_rope_scaling_factor(4.0f);
    m.set_rope_scaling_original_max_position_embeddings(64);
  } else if (l.rope_scaling == "yarn") {
    m.set_position_embedding_type("yarn");
    m.set_rotary_scaling_factor(4.0f);
    m.set_yarn_original_max_position_embeddings(64);
  }
  if (l.window >= 0) {
    m.set_window_size(absl::StrFormat("%d,0", l.window));
    m.set_window_attn_skip_freq("2");
  }
  if (l.moe) {
    m.set_disable_bias_linear(true);
    m.set_num_experts(4);
    m.set_moe_ffn_hidden_size(24);
    if (l.load_balancing.empty()) m.add_moe_aux_loss_coeff(0.01f);
    for (const absl::string_view type : absl::StrSplit(l.load_balancing, ' ', absl::SkipEmpty())) {
      m.add_moe_router_load_balancing_type(std::string(type));
      m.add_moe_aux_loss_coeff(0.01f);
    }
    m.set_moe_z_loss_coeff(0.001f);
    m.set_moe_expert_capacity_factor(1.25f);
    if (l.expert_bias) {
      m.set_moe_router_score_function("sigmoid");
      m.set_moe_router_enable_expert_bias(true);
      m.set_moe_router_bias_update_rate(0.01f);
    }
    if (l.group_limited) {
      m.set_moe_router_score_function("sigmoid");
      m.set_moe_router_num_groups(2);
      m.set_moe_router_group_topk(1);
      m.set_moe_shared_expert_intermediate_size(16);
      m.set_moe_shared_expert_gate(true);
    }
  }
  m.set_hidden_size(32);
  m.set_num_attention_heads(4);
  m.set_ffn_hidden_size(64);
  m.set_seq_length(8);
  m.set_vocab_size(60);  // padded to 64: exercises the padded rows
  m.set_make_vocab_size_divisible_by(16);
  m.set_hidden_dropout(0.1f);
  m.set_attention_dropout(0.1f);
  c.mutable_training()->set_micro_batch_size(1);
  c.mutable_training()->set_global_batch_size(8);
  c.mutable_training()->set_train_iters(10);
  c.mutable_optimizer()->set_lr(1e-2f);
  c.mutable_optimizer()->set_lr_warmup_iters(2);
  c.mutable_optimizer()->set_clip_grad(0.5f);  // engaged: checks the global norm
  if (l.wsd_decoupled_lr) {
    OptimizerConfig& o = *c.mutable_optimizer();
    o.set_lr_decay_style("WSD");
    o.set_lr_wsd_decay_style("minus_sqrt");
    o.set_lr_wsd_decay_iters(4);
    o.set_decoupled_lr(3e-2f);
    o.set_decoupled_min_lr(1e-3f);
  }
  c.mutable_data()->set_mock_data(true);
  c.mutable_logging()->set_log_interval(100);
  c.mutable_parallel()->set_tensor_model_parallel_size(l.tp);
  c.mutable_parallel()->set_pipeline_model_parallel_size(l.pp);
  c.mutable_parallel()->set_context_parallel_size(l.cp);
  c.mutable_parallel()->set_expert_model_parallel_size(l.ep);
  c.mutable_parallel()->set_expert_tensor_parallel_size(l.etp);
  if (!l.recompute.empty()) {
    RecomputeConfig& r = *c.mutable_recompute();
    r.set_recompute_granularity(l.recompute);
    if (l.recompute == "full") {
      r.set_recompute_method("uniform");
      r.set_recompute_num_layers(1);
    } else {
      r.add_recompute_modules("mlp");
      r.add_recompute_modules("layernorm");
    }
  }
  c.mutable_parallel()->set_nproc_per_node(l.tp * l.cp * l.pp * l.dp);
  c.mutable_parallel()->set_pipeline_schedule(l.schedule);
  if (l.chunks > 1) c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(l.chunks);
  if (l.first_stage_layers > 0) {
    c.mutable_parallel()->set_decoder_first_pipeline_num_layers(l.first_stage_layers);
  }
  c.mutable_parallel()->set_account_for_embedding_in_pipeline_split(l.account_for_embedding);
  c.mutable_parallel()->set_overlap_grad_reduce(l.overlap_grad_reduce);
  c.mutable_parallel()->set_overlap_param_gather(l.overlap_param_gather);
  c.mutable_parallel()->set_grad_reduce_in_bf16(l.grad_reduce_in_bf16);
  // Small buckets, so that overlapped communication runs several during compute.
  if (l.overlap_grad_reduce || l.overlap_param_gather) {
    c.mutable_parallel()->set_ddp_bucket_size(2000);
  }
  c.mutable_parallel()->set_sequence_parallel(l.sequence_parallel);
  c.mutable_parallel()->set_use_distributed_optimizer(l.distributed_optimizer);
  c.mutable_precision()->set_bf16(l.bf16);
  c.mutable_parallel()->set_device(l.device);
  if (l.documents) {
    c.mutable_data()->set_eod_mask_loss(true);
    c.mutable_data()->set_reset_position_ids(true);
    c.mutable_data()->set_reset_attention_mask(true);
    c.mutable_data()->set_eod_token_id(7);
  }
  c.mutable_training()->set_calculate_per_token_loss(l.per_token_loss);
  absl::StatusOr<Config> resolved = ResolveConfig(c, l.tp * l.cp * l.pp * l.dp);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

bool HasZeroGradient(const std::string& name, int64_t index) {
  // TinyConfig: 4 heads of 8 channels, one per query group, so each group's slice of
  // the fused QKV bias is [query 8 | key 8 | value 8].
  constexpr int64_t kHeadDim = 8;
  // --qk-layernorm's key bias likewise adds one vector to every key.
  if (absl::EndsWith(name, "attention.k_norm.bias")) return true;
  if (name.size() < 18 || name.compare(name.size() - 18, 18, "attention.qkv.bias") != 0) {
    return false;
  }
  const int64_t within_group = index % (3 * kHeadDim);
  return within_group >= kHeadDim && within_group < 2 * kHeadDim;
}

void ExpectCurvesFollow(const LayoutRun& run, const LayoutRun& reference, double loss_tolerance,
                        double norm_tolerance) {
  ASSERT_EQ(run.losses.size(), reference.losses.size());
  for (size_t i = 0; i < reference.losses.size(); ++i) {
    EXPECT_NEAR(run.losses[i], reference.losses[i], loss_tolerance * reference.losses[i])
        << "loss, iteration " << i + 1;
    EXPECT_NEAR(run.grad_norms[i], reference.grad_norms[i],
                norm_tolerance * reference.grad_norms[i])
        << "grad norm, iteration " << i + 1;
  }
}

std::vector<std::string> CompareParams(const GlobalParams& got, const GlobalParams& want) {
  std::vector<std::string> problems;
  if (got.size() != want.size()) {
    problems.push_back(absl::StrFormat("%d tensors, want %d", got.size(), want.size()));
  }
  for (const auto& [name, values] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.size() != values.size()) {
      problems.push_back(name + ": missing or of another size");
      continue;
    }
    int mismatches = 0;
    std::string first;
    for (size_t i = 0; i < values.size(); ++i) {
      if (HasZeroGradient(name, i)) continue;
      const float a = it->second[i], b = values[i];
      if (!(std::fabs(a - b) <= 1e-5f + 1e-4f * std::fabs(b))) {
        if (mismatches++ == 0) first = absl::StrFormat("[%d]: %.9g vs %.9g", i, a, b);
      }
    }
    if (mismatches > 0) {
      problems.push_back(
          absl::StrFormat("%s: %d elements differ, first %s", name, mismatches, first));
    }
  }
  return problems;
}

absl::StatusOr<LayoutRun> RunLayout(const Config& config, const std::string& name,
                                    const TransportFactory& transport) {
  const ParallelConfig& p = config.parallel();
  const int world = p.nproc_per_node();
  const std::string dir = FreshDir(name);
  std::ostringstream errors;
  const int code = LaunchLocalRanks(
      world, [&](const RankEnvironment& env) { return RankMain(config, dir, env, transport); },
      errors);
  if (code != 0) return absl::InternalError("ranks failed: " + errors.str());

  LayoutRun run;
  std::ifstream curve(dir + "/curve");
  double loss, norm;
  while (curve >> loss >> norm) {
    run.losses.push_back(loss);
    run.grad_norms.push_back(norm);
  }
  for (int rank = 0; rank < world; ++rank) {
    std::ifstream memory(absl::StrFormat("%s/memory.%d", dir, rank));
    int64_t activations = -1, total = -1;
    TrainingResult::ModelStateBytes state{-1, -1, -1};
    memory >> activations >> total >> state.weights >> state.grads >> state.optimizer;
    run.peak_activation_bytes.push_back(activations);
    run.peak_total_bytes.push_back(total);
    run.model_state.push_back(state);
    std::ifstream device(absl::StrFormat("%s/device_operations.%d", dir, rank));
    int64_t operations = -1;
    if (device >> operations) run.device_operations.push_back(operations);
    std::ifstream f(absl::StrFormat("%s/params.%d", dir, rank));  // DP rank 0 wrote them
    std::string param;
    int64_t index;
    float value;
    while (f >> param >> index >> value) {
      std::vector<float>& global = run.params[param];
      if (static_cast<int64_t>(global.size()) <= index) global.resize(index + 1, NAN);
      global[index] = value;
    }
  }
  return run;
}

const LayoutRun& ReferenceRun(const Layout& layout) {
  static auto* references = new std::map<std::string, LayoutRun>;
  const Layout one = OneRank(layout);
  const std::string name = LayoutName(one);
  auto it = references->find(name);
  if (it != references->end()) return it->second;
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(one), "reference_" + name);
  EXPECT_TRUE(run.ok()) << run.status();
  return (*references)[name] = run.ok() ? *run : LayoutRun();
}

}  // namespace conveyor::testing_util

// Training the tiny test GPT under a TP x PP x DP layout with real ranks (forked
// processes over gloo), and reading back what the run produced: the loss and gradient
// norm curve and every parameter, assembled into global tensors. Shared by the
// equivalence and the checkpoint tests.
#ifndef CONVEYOR_TESTS_TRAINER_LAYOUT_RUNS_H_
#define CONVEYOR_TESTS_TRAINER_LAYOUT_RUNS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "tests/parallel/fake_device_transport.h"
#include "trainer/training_loop.h"

namespace conveyor::testing_util {

struct Layout {
  int tp = 1;
  int dp = 1;
  int cp = 1;  // --context-parallel-size
  int ep = 1;  // --expert-model-parallel-size (with `moe`)
  int etp = 0;  // --expert-tensor-parallel-size (with `moe`; 0: TP)
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  int pp = 1;
  std::string schedule;  // empty: the default
  int chunks = 1;        // virtual stages per pipeline rank
  int layers = 2;
  int first_stage_layers = 0;  // uneven split
  bool untied = false;
  bool account_for_embedding = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;  // with the distributed optimizer
  bool grad_reduce_in_bf16 = false;
  // A Llama-like model: RoPE, RMSNorm, SwiGLU, 2 query groups for 4 heads, untied
  // output layer, no biases.
  bool llama = false;
  bool qk_layernorm = false;  // --qk-layernorm: a norm over each query and key head
  // With `llama`: DeepSeek-V2's multi-latent attention (--multi-latent-attention): a query
  // latent of 12, a key/value latent of 10, query and key heads of 6 + 4 rotated dims,
  // value heads of 5, the latents' norms (--qk-layernorm).
  bool mla = false;
  bool bf16 = false;           // --bf16 (emulated on the CPU backend)
  std::string device = "cpu";  // --device; "cuda" gives rank r GPU r
  // Document masking: --eod-mask-loss --reset-position-ids with token 7 of the mock
  // data as the eod (--eod-token-id; about one sample in eight holds one).
  bool documents = false;
  bool per_token_loss = false;  // --calculate-per-token-loss
  // A mixture of experts in every layer: 4 experts, top-2, both auxiliary losses and a
  // capacity that drops tokens; no biases.
  bool moe = false;
  // With `moe`: sigmoid scores and auxiliary-loss-free balancing
  // (--moe-router-enable-expert-bias, a rate large enough to change the routing between
  // steps).
  bool expert_bias = false;
  // With `moe`: DeepSeek-V3's routing at toy size: sigmoid scores limited to 1 of 2 groups
  // of 2 experts (--moe-router-num-groups 2 --moe-router-group-topk 1) and a gated shared
  // expert (--moe-shared-expert-intermediate-size 16 --moe-shared-expert-gate).
  bool group_limited = false;
  // With `moe`: --moe-router-load-balancing-type's types, space-separated, each with
  // --moe-aux-loss-coeff 0.01 (Megatron's list form); "": aux_loss alone.
  std::string load_balancing;
  // Megatron's WSD schedule (a minus_sqrt anneal over the last 4 iterations) with the
  // embedding and output layer on --decoupled-lr / --decoupled-min-lr.
  bool wsd_decoupled_lr = false;
  bool squared_relu = false;  // --squared-relu: the MLP's relu(x)^2
  // With `llama`, RoPE of base 100 scaled: "llama3" (--use-rope-scaling, factor 4,
  // original context 64: each of the three frequency bands occurs) or "yarn"
  // (--position-embedding-type yarn, --rotary-scaling-factor 4, original context 64).
  // "": unscaled.
  std::string rope_scaling;
  // --window-size window,0 on every other layer (--window-attn-skip-freq 2); -1: none.
  // Under CP 4 a window of 2 leaves some ring blocks wholly outside.
  int window = -1;
  // --mtp-num-layers: multi-token prediction depths after the last layer (0: none; needs
  // RoPE, so with `llama`).
  int mtp = 0;
  // Recomputation: "" none, "full" (--recompute-granularity full, uniform, 1 layer) or
  // "selective" (the mlp and layernorm modules: an MoE layer rebuilt from its input).
  std::string recompute;
};

Layout TpDp(int tp, int dp, bool sp, bool distributed_optimizer);
Layout Pipeline(int pp, std::string schedule, int chunks, int layers);
// The same model, precision and device as `layout` on one rank: the reference.
Layout OneRank(const Layout& layout);
std::string LayoutName(const Layout& l);

// The tiny GPT (dropout on, clipping engaged) for 10 iterations under `layout`,
// resolved for its world size; tests add checkpoint flags before running it.
Config TinyConfig(const Layout& layout);

// Global parameter values by name (and the MoE layers' expert biases, by theirs).
using GlobalParams = std::map<std::string, std::vector<float>>;

struct LayoutRun {
  std::vector<double> losses;
  std::vector<double> grad_norms;
  GlobalParams params;
  std::vector<int64_t> peak_activation_bytes;  // per global rank, measured
  std::vector<int64_t> peak_total_bytes;       // all categories together
  // Per global rank, after the first step.
  std::vector<TrainingResult::ModelStateBytes> model_state;
  // Per global rank, with a TransportFactory: operations its transport carried.
  std::vector<int64_t> device_operations;
};

// Whether element `index` of parameter `name` of TinyConfig's model has a gradient
// that is zero in exact arithmetic: the key bias and --qk-layernorm's key-norm bias
// (adding a constant to every key of a softmax row changes nothing). Adam turns rounding noise there into updates of size
// ~lr, different in every layout, so comparisons skip these elements.
bool HasZeroGradient(const std::string& name, int64_t index);

// Parameters agree when every element with a gradient matches to 1e-5 absolute plus
// 1e-4 relative; returns one line per mismatching tensor.
std::vector<std::string> CompareParams(const GlobalParams& got, const GlobalParams& want);

// The one-rank run of `layout`'s model (OneRank), run once per model in this process
// and kept: the reference the layout tests compare with.
const LayoutRun& ReferenceRun(const Layout& layout);

// Every iteration's loss and gradient norm of `run` within the given relative
// tolerances of `reference`'s (gtest expectations).
void ExpectCurvesFollow(const LayoutRun& run, const LayoutRun& reference, double loss_tolerance,
                        double norm_tolerance);

// Makes, inside each rank, a device transport to put under its process groups in
// place of the backend's (none on the CPU): a test of the host/device routing.
using TransportFactory = std::function<std::unique_ptr<testing_util::FakeDeviceTransport>()>;

// Trains `config` (resolved) with its world size of ranks, in a scratch folder named
// `name` under the test's temporary directory; with `transport`, each rank's groups
// route tensors through the transport it makes.
absl::StatusOr<LayoutRun> RunLayout(const Config& config, const std::string& name,
                                    const TransportFactory& transport = nullptr);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_LAYOUT_RUNS_H_

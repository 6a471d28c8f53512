#include "trainer/megatron_flags_not_here.h"

#include <map>
#include <string>

namespace conveyor {
namespace {

constexpr char kAlwaysFused[] =
    "Conveyor fuses its kernels without changing the math and has no switch for it; drop the "
    "flag";
constexpr char kNoExternalLogger[] =
    "Conveyor writes no TensorBoard or Weights & Biases logs; --metrics-file FILE writes "
    "every log line's figures as JSON lines; drop the flag";
constexpr char kOneImplementation[] =
    "Conveyor has one model implementation (model/); drop the flag";
constexpr char kOneDatasetFormat[] =
    "Conveyor reads Megatron's mmap .bin/.idx datasets, the only format; drop the flag";
constexpr char kNoLossScaling[] =
    "loss scaling is for fp16, which Conveyor does not train; bf16 (--bf16) needs none; drop "
    "the flag";

const std::map<std::string, std::string, std::less<>>& Explanations() {
  static const auto* explanations = new std::map<std::string, std::string, std::less<>>{
      {"--tensorboard-dir", kNoExternalLogger},
      {"--tensorboard-log-interval", kNoExternalLogger},
      {"--wandb-project", kNoExternalLogger},
      {"--wandb-exp-name", kNoExternalLogger},
      {"--wandb-save-dir", kNoExternalLogger},
      {"--log-throughput",
       "Conveyor always logs throughput (tokens per second, TFLOP/s per GPU); drop the flag"},
      {"--timing-log-level",
       "Conveyor always logs the forward-backward, gradient-reduction and optimizer times "
       "(min, max across ranks); drop the flag"},
      {"--no-masked-softmax-fusion", kAlwaysFused},
      {"--no-bias-gelu-fusion", kAlwaysFused},
      {"--no-bias-dropout-fusion", kAlwaysFused},
      {"--no-bias-swiglu-fusion", kAlwaysFused},
      {"--no-gradient-accumulation-fusion", kAlwaysFused},
      {"--no-persist-layer-norm", kAlwaysFused},
      {"--no-rope-fusion", kAlwaysFused},
      {"--attention-softmax-in-fp32",
       "Conveyor's attention softmax always computes in fp32; drop the flag"},
      {"--accumulate-allreduce-grads-in-fp32",
       "Conveyor always accumulates and reduces gradients in fp32; drop the flag"},
      {"--transformer-impl", kOneImplementation},
      {"--use-mcore-models", kOneImplementation},
      {"--use-legacy-models", kOneImplementation},
      {"--distributed-backend",
       "Conveyor moves host buffers with gloo and GPU buffers with NCCL, chosen per buffer; "
       "drop the flag"},
      {"--data-impl", kOneDatasetFormat},
      {"--dataset-impl", kOneDatasetFormat},
      {"--num-workers",
       "Conveyor builds its batches in the trainer itself, with no worker processes; drop "
       "the flag"},
      {"--ckpt-format",
       "Conveyor writes one format, which reshards to any layout "
       "(trainer/checkpoint/FORMAT.md); drop the flag"},
      {"--use-checkpoint-args",
       "not implemented: pass the model flags again (--load checks them against the "
       "checkpoint's shapes)"},
      {"--rampup-batch-size", "not implemented: the global batch is fixed for the whole run"},
      {"--eod-mask-loss",
       "not implemented: every token's loss counts, as in Megatron without the flag"},
      {"--reset-position-ids",
       "not implemented: positions run over the whole sequence, as in Megatron without the "
       "flag"},
      {"--reset-attention-mask",
       "not implemented: attention spans documents within a sequence, as in Megatron "
       "without the flag"},
      {"--overlap-param-gather",
       "not implemented: the distributed optimizer gathers the parameters after its step "
       "(--overlap-grad-reduce overlaps the gradient reduction); drop the flag"},
      {"--no-position-embedding",
       "positions come from --position-embedding-type alone: rope keeps no learned table "
       "(what Megatron's --position-embedding-type rope --no-position-embedding means); drop "
       "the flag"},
      {"--dataloader-type",
       "Conveyor reads samples in Megatron's default (single) order, shuffled per epoch by "
       "--seed; drop the flag"},
      {"--loss-scale", kNoLossScaling},
      {"--initial-loss-scale", kNoLossScaling},
      {"--fp8-format", "not implemented: Conveyor trains in bf16 (--bf16) or fp32"},
      {"--num-experts",
       "not implemented: Conveyor trains dense GPT models (no mixture of experts)"},
      {"--context-parallel-size",
       "not implemented: split long sequences with --sequence-parallel (over TP) instead"},
      {"--expert-model-parallel-size",
       "not implemented: Conveyor trains dense GPT models (no mixture of experts)"},
  };
  return *explanations;
}

}  // namespace

std::optional<std::string> MegatronFlagNotHere(absl::string_view flag) {
  const auto& explanations = Explanations();
  const auto it = explanations.find(flag);
  if (it == explanations.end()) return std::nullopt;
  return it->second;
}

}  // namespace conveyor

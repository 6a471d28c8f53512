#include "trainer/cli.h"

#include <fstream>
#include <memory>
#include <thread>

#include "absl/strings/str_format.h"
#include "data/mock_dataset.h"
#include "model/gpt_model.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cuda/device.h"
#include "trainer/config_validation.h"
#include "trainer/effective_config.h"
#include "trainer/flags.h"
#include "trainer/flops.h"
#include "trainer/training_loop.h"

namespace conveyor {
namespace {

constexpr char kProgram[] = "trainer";

int UsageError(std::ostream& err, const std::string& message) {
  err << kProgram << ": error: " << message << "\n"
      << kProgram << ": run with --help to list every flag\n";
  return kExitUsage;
}

void PrintPlan(const Config& config, const ModelShape& shape, int world_size,
               std::ostream& out) {
  const ParallelConfig& p = config.parallel();
  const TrainingConfig& t = config.training();
  const int64_t dp = world_size / (p.tensor_model_parallel_size() *
                                   p.pipeline_model_parallel_size());
  GptModel model(shape, t.seed());
  out << absl::StrFormat(
      "plan: world %d = TP %d x PP %d x DP %d\n"
      "plan: global batch %d = M %d micro-batches x DP %d x micro-batch %d\n"
      "plan: %d parameters, padded vocabulary %d, %.3f TFLOP per iteration (Megatron "
      "formula)\n",
      world_size, p.tensor_model_parallel_size(), p.pipeline_model_parallel_size(), dp,
      t.global_batch_size(), t.num_micro_batches(), dp, t.micro_batch_size(),
      model.parameters().NumElements(), shape.padded_vocab,
      MegatronFlopsPerIteration(shape, t.global_batch_size()) / 1e12);
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (WantsHelp(args)) {
    out << FlagHelp();
    return kExitOk;
  }
  absl::StatusOr<Config> parsed = ParseFlags(args);
  if (!parsed.ok()) return UsageError(err, std::string(parsed.status().message()));
  const int world_size = WorldSizeFromEnvironment(*parsed);
  absl::StatusOr<Config> resolved = ResolveConfig(*parsed, world_size);
  if (!resolved.ok()) return UsageError(err, std::string(resolved.status().message()));
  const Config& config = *resolved;

  const GpuInfo gpus = ProbeGpus();
  if (config.parallel().device() == "cuda") {
    return UsageError(err, "--device cuda: training on the CUDA backend is not available "
                           "yet (" + DescribeBackend(gpus) + "); use --device cpu or auto");
  }
  if (world_size > 1) {
    return UsageError(err, absl::StrFormat(
        "world size %d (--nproc-per-node, WORLD_SIZE or SLURM_NTASKS): multi-rank training "
        "is not available yet; run with one rank", world_size));
  }
  out << "conveyor: " << DescribeBackend(gpus)
      << (gpus.count > 0 ? "; training runs on the CPU backend (fp32)" : "") << "\n";
  out << FormatEffectiveConfig(config);

  const ModelShape shape = ModelShapeFromConfig(config, PaddedVocabSize(config));
  if (config.training().dry_run()) {
    PrintPlan(config, shape, world_size, out);
    return kExitOk;
  }
  if (!config.data().mock_data()) {
    return UsageError(err, "--data-path / --train-data-path: reading datasets is not wired "
                           "into training yet; use --mock-data");
  }
  // Ranks share the machine's cores (DESIGN.md, process model).
  cpu::SetBlasThreads(std::max(1u, std::thread::hardware_concurrency() / world_size));
  const MockSampleSource data(config.training().seed(), config.model().vocab_size(),
                              config.model().seq_length());
  GptModel model(shape, config.training().seed());

  std::unique_ptr<std::ofstream> metrics;
  if (!config.logging().metrics_file().empty()) {
    metrics = std::make_unique<std::ofstream>(config.logging().metrics_file());
    if (!*metrics) {
      err << kProgram << ": error: --metrics-file " << config.logging().metrics_file()
          << ": cannot open for writing\n";
      return kExitFailure;
    }
  }
  absl::StatusOr<TrainingResult> result = Train(config, &model, data, {&out, metrics.get()});
  if (!result.ok()) {
    err << kProgram << ": error: " << result.status().message() << "\n";
    return kExitFailure;
  }
  out << absl::StrFormat("conveyor: trained %d iterations, final lm loss %.4f\n",
                         result->losses.size(), result->losses.back());
  return kExitOk;
}

}  // namespace conveyor

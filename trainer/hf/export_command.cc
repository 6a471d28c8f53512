#include "trainer/hf/export_command.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/exit_code.h"
#include "flags/proto_flags.h"
#include "proto/tools.pb.h"
#include "trainer/hf/export.h"

namespace conveyor {
namespace {

using tools::ExportOptions;

// The flags come from ExportOptions (proto/tools.proto).
const FlagSpec& ExportFlags() {
  static const auto* const spec = [] {
    auto* sp = new FlagSpec();
    sp->fields = CollectFlagFields(*ExportOptions::descriptor(), /*grouped=*/false);
    return sp;
  }();
  return *spec;
}

// An export writes whole files into --output; into a folder that already holds a model
// it would overwrite some files and leave others (a longer shard list, a tokenizer) that
// no longer belong, so only a new or empty folder is taken.
std::optional<std::string> OutputFolderProblem(const std::string& output) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(output, ec);
  if (!std::filesystem::exists(status)) return std::nullopt;
  if (!std::filesystem::is_directory(status)) {
    return absl::StrCat("--output ", output, ": exists and is not a folder; name a new folder");
  }
  std::filesystem::directory_iterator entries(output, ec);
  if (ec) return absl::StrCat("--output ", output, ": cannot list the folder (", ec.message(), ")");
  if (entries == std::filesystem::directory_iterator()) return std::nullopt;
  return absl::StrCat("--output ", output, ": the folder is not empty (it holds ",
                      entries->path().filename().string(),
                      "); an export never overwrites files: name a new or empty folder, or "
                      "remove this one first");
}

std::string Usage() {
  std::string out =
      "usage: trainer export --load DIR [--ckpt-step N] --format hf|hf-gpt2 --output DIR "
      "[--architecture CLASS] [--tokenizer-dir DIR] [--max-shard-bytes N] [--bos-token-id ID] "
      "[--eos-token-id ID]\n";
  for (const FlagField& f : ExportFlags().fields) AppendFieldHelp(*f.field, &out);
  AppendHelpEntry("--help, -h", "", "Print this help and exit.", &out);
  return out;
}

// The problems alone, then where the flags are listed: the whole help after them would
// push them off the screen.
int UsageError(const std::vector<std::string>& problems, std::ostream& err) {
  for (const std::string& problem : problems) err << "trainer export: " << problem << "\n";
  err << "trainer export: run with --help to list every flag\n";
  return kExitUsage;
}

}  // namespace

int RunExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (WantsHelp(args)) {
    out << Usage();
    return 0;
  }
  ExportOptions options;
  std::vector<std::string> problems = ParseFlagsInto(ExportFlags(), args, &options);
  if (options.load().empty()) problems.push_back("--load is required");
  if (options.format().empty()) problems.push_back("--format is required");
  if (options.output().empty()) problems.push_back("--output is required");
  if (!options.format().empty() && options.format() != "hf" && options.format() != "hf-gpt2") {
    problems.push_back(absl::StrCat("--format ", options.format(),
                                    " is not supported; the supported formats are hf (the "
                                    "checkpoint's architecture) and hf-gpt2"));
  }
  if (options.dtype() != "fp32" && options.dtype() != "bf16" && options.dtype() != "fp16") {
    problems.push_back(
        absl::StrCat("--dtype ", options.dtype(), " is not one of fp32, bf16, fp16"));
  }
  if (options.max_shard_bytes() <= 0) {
    problems.push_back(
        absl::StrCat("--max-shard-bytes must be positive, not ", options.max_shard_bytes()));
  }
  std::optional<int64_t> step;
  if (options.has_ckpt_step()) {
    if (options.ckpt_step() < 0) {
      problems.push_back(absl::StrCat("--ckpt-step must be a non-negative iteration, not \"",
                                      options.ckpt_step(), "\""));
    } else {
      step = options.ckpt_step();
    }
  }
  if (!options.output().empty()) {
    if (std::optional<std::string> problem = OutputFolderProblem(options.output())) {
      problems.push_back(*std::move(problem));
    }
  }
  if (!problems.empty()) return UsageError(problems, err);

  const std::string& load = options.load();
  const std::string& output = options.output();
  HfExportOptions export_options;
  export_options.gpt2_only = options.format() == "hf-gpt2";
  export_options.architecture = options.architecture();
  export_options.tokenizer_dir = options.tokenizer_dir();
  export_options.max_shard_bytes = options.max_shard_bytes();
  export_options.ids = HfTokenIds{options.bos_token_id(), options.eos_token_id()};
  export_options.dtype = options.dtype() == "bf16"   ? HfDtype::kBF16
                         : options.dtype() == "fp16" ? HfDtype::kF16
                                                     : HfDtype::kF32;
  HfExportSummary summary;
  const absl::Status status = ExportHf(load, step, output, export_options, &summary);
  if (!status.ok()) {
    err << "trainer export: " << status.message() << "\n";
    return ExitCodeFor(status);
  }
  out << "exported iteration " << summary.iteration << " of " << load << " to " << output << " ("
      << summary.architecture << "): " << summary.tensors << " tensors, " << summary.parameters
      << " parameters, " << summary.bytes << " bytes in " << summary.files << " safetensors file"
      << (summary.files == 1 ? "" : "s") << "\n";
  return 0;
}

}  // namespace conveyor

#include "trainer/hf/export_command.h"

#include <cstdint>
#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "trainer/hf/export.h"

namespace conveyor {
namespace {

constexpr char kUsage[] =
    "usage: trainer export --load DIR [--ckpt-step N] --format hf-gpt2 --output DIR\n"
    "  --load DIR       checkpoint folder (the --save folder of a training run)\n"
    "  --ckpt-step N    iteration to export (default: the latest checkpoint)\n"
    "  --format FORMAT  hf-gpt2: a Hugging Face GPT-2 folder (model.safetensors, "
    "config.json)\n"
    "  --output DIR     folder to write (created if missing; files in it are replaced)\n";

int UsageError(const std::vector<std::string>& problems, std::ostream& err) {
  for (const std::string& problem : problems) err << "trainer export: " << problem << "\n";
  err << kUsage;
  return 2;
}

}  // namespace

int RunExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::map<std::string, std::string> values;
  std::vector<std::string> problems;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << kUsage;
      return 0;
    }
    std::string flag = arg, value;
    const size_t equals = arg.find('=');
    const bool inline_value = equals != std::string::npos;
    if (inline_value) {
      flag = arg.substr(0, equals);
      value = arg.substr(equals + 1);
    }
    if (flag != "--load" && flag != "--ckpt-step" && flag != "--format" && flag != "--output") {
      problems.push_back(absl::StrCat("unknown argument ", arg));
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        problems.push_back(absl::StrCat(flag, " needs a value"));
        continue;
      }
      value = args[++i];
    }
    if (values.count(flag) != 0) problems.push_back(absl::StrCat(flag, " given twice"));
    values[flag] = value;
  }
  for (const char* required : {"--load", "--format", "--output"}) {
    const auto it = values.find(required);
    if (it == values.end() || it->second.empty()) {
      problems.push_back(absl::StrCat(required, " is required"));
    }
  }
  const auto format = values.find("--format");
  if (format != values.end() && !format->second.empty() && format->second != "hf-gpt2") {
    problems.push_back(absl::StrCat("--format ", format->second,
                                    " is not supported; the supported format is hf-gpt2"));
  }
  std::optional<int64_t> step;
  if (const auto it = values.find("--ckpt-step"); it != values.end()) {
    int64_t parsed = 0;
    if (!absl::SimpleAtoi(it->second, &parsed) || parsed < 0) {
      problems.push_back(
          absl::StrCat("--ckpt-step must be a non-negative iteration, not \"", it->second, "\""));
    } else {
      step = parsed;
    }
  }
  if (!problems.empty()) return UsageError(problems, err);

  const std::string& load = values["--load"];
  const std::string& output = values["--output"];
  HfExportSummary summary;
  const absl::Status status = ExportHfGpt2(load, step, output, &summary);
  if (!status.ok()) {
    err << "trainer export: " << status.message() << "\n";
    return 1;
  }
  out << "exported iteration " << summary.iteration << " of " << load << " to " << output
      << " (hf-gpt2): " << summary.tensors << " tensors, " << summary.parameters << " parameters, "
      << summary.bytes << " bytes in " << kHfWeightsFile << "\n";
  return 0;
}

}  // namespace conveyor

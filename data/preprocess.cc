#include "data/preprocess.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/indexed_dataset_builder.h"
#include "data/json_lite.h"

namespace conveyor {
namespace {

// Lines handed to the workers at once: large enough to amortise thread
// start-up, small enough to bound memory.
constexpr size_t kBatchLines = 8192;

struct Line {
  int64_t number = 0;  // 1-based, for error messages
  std::string text;
};

// One line's result: a token list per key, or an error.
struct Encoded {
  absl::Status status;
  std::vector<std::vector<int32_t>> tokens;  // [key]
};

Encoded EncodeLine(const Line& line, const PreprocessOptions& options, const Tokenizer& tokenizer) {
  Encoded out;
  auto fail = [&](absl::string_view what) {
    out.status =
        absl::InvalidArgumentError(absl::StrCat(options.input, ":", line.number, ": ", what));
    return out;
  };
  absl::StatusOr<JsonValue> doc = ParseJson(line.text);
  if (!doc.ok()) return fail(doc.status().message());
  if (!doc->is_object()) return fail("not a JSON object");
  for (const std::string& key : options.json_keys) {
    const JsonValue* value = doc->Find(key);
    if (value == nullptr || !value->is_string()) {
      return fail(absl::StrCat("no string field \"", key, "\""));
    }
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Tokenize(value->str());
    if (!ids.ok()) return fail(ids.status().message());
    // As Megatron: eod only closes a document that has tokens.
    if (options.append_eod && !ids->empty()) ids->push_back(tokenizer.eod());
    out.tokens.push_back(*std::move(ids));
  }
  return out;
}

}  // namespace

absl::StatusOr<PreprocessSummary> Preprocess(const PreprocessOptions& options,
                                             const Tokenizer& tokenizer) {
  if (options.json_keys.empty()) return absl::InvalidArgumentError("--json-keys is empty");
  if (options.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers must be >= 1, got ", options.workers));
  }
  std::ifstream in(options.input, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", options.input));

  PreprocessSummary summary;
  summary.dtype = TokenDTypeForVocab(tokenizer.vocab_size());
  std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders;
  for (const std::string& key : options.json_keys) {
    const std::string prefix = absl::StrCat(options.output_prefix, "_", key, "_document");
    absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> b =
        IndexedDatasetBuilder::Create(prefix + ".bin", summary.dtype);
    if (!b.ok()) return b.status();
    builders.push_back(*std::move(b));
    summary.output_prefixes.push_back(prefix);
  }

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double last_log = 0;
  int64_t line_number = 0;
  std::vector<Line> batch;
  std::vector<Encoded> encoded;
  bool eof = false;
  while (!eof) {
    batch.clear();
    std::string text;
    while (batch.size() < kBatchLines) {
      if (!std::getline(in, text)) {
        eof = true;
        break;
      }
      ++line_number;
      summary.input_bytes += int64_t(text.size()) + 1;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
      batch.push_back({line_number, std::move(text)});
    }

    // Workers take interleaved lines; results land in line order.
    encoded.assign(batch.size(), Encoded());
    const int workers = std::min<int>(options.workers, std::max<size_t>(batch.size(), 1));
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        for (size_t i = w; i < batch.size(); i += workers) {
          encoded[i] = EncodeLine(batch[i], options, tokenizer);
        }
      });
    }
    for (std::thread& t : threads) t.join();

    for (Encoded& e : encoded) {
      if (!e.status.ok()) {
        if (!options.skip_bad_lines) return e.status;
        std::fprintf(options.log, "skipping %s\n", std::string(e.status.message()).c_str());
        ++summary.skipped_lines;
        continue;
      }
      for (size_t k = 0; k < builders.size(); ++k) {
        const std::vector<int32_t>& ids = e.tokens[k];
        std::vector<int32_t> lengths;
        if (!ids.empty()) lengths.push_back(int32_t(ids.size()));
        if (absl::Status s = builders[k]->AddDocument(absl::MakeConstSpan(ids), lengths); !s.ok()) {
          return s;
        }
        summary.tokens += int64_t(ids.size());
      }
      ++summary.documents;
    }

    const double now = std::max(elapsed(), 1e-9);
    if (options.log_interval_s > 0 && (now - last_log >= options.log_interval_s || eof)) {
      last_log = now;
      std::fprintf(options.log, "processed %lld documents (%.0f docs/s, %.2f MB/s, %lld tokens)\n",
                   static_cast<long long>(summary.documents), summary.documents / now,
                   summary.input_bytes / now / 1e6, static_cast<long long>(summary.tokens));
      std::fflush(options.log);
    }
  }

  for (size_t k = 0; k < builders.size(); ++k) {
    if (absl::Status s = builders[k]->Finalize(summary.output_prefixes[k] + ".idx"); !s.ok()) {
      return s;
    }
  }
  summary.seconds = elapsed();
  return summary;
}

}  // namespace conveyor

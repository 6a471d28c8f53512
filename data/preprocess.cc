#include "data/preprocess.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/indexed_dataset_builder.h"
#include "data/python_json.h"
#include "data/tokenizers/utf8_text.h"

namespace conveyor {
namespace {

// Lines handed to the workers at once: large enough to amortise thread
// start-up, small enough to bound memory.
constexpr size_t kBatchLines = 8192;

// Any bad line may instead be dropped; every fix for one ends with this.
constexpr absl::string_view kOrSkip = ", or pass --skip-bad-lines to drop such lines";
constexpr absl::string_view kFixLine = "fix the line";

struct Line {
  int64_t number = 0;  // 1-based, for error messages
  std::string text;
};

// One key's document as Megatron's encode() makes it: its token ids and the
// length of each sequence (sentence) they form.
struct Document {
  std::vector<int32_t> ids;
  std::vector<int32_t> lengths;
  int64_t text_bytes = 0;  // of the field's text: no tokens from text blames the tokenizer
};

// Why a line cannot be used. The fix is shown when the line stops the run;
// with --skip-bad-lines only `what` is reported.
struct LineError {
  std::string what;
  std::string fix;
};

// One line's result: a document per key, or why the line is bad.
struct Encoded {
  std::optional<LineError> error;
  std::vector<Document> documents;  // [key]
};

std::string TypeName(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return "a JSON value";
}

// Says which fields a line has, for an error about one it lacks.
std::string FieldNames(const Json& object) {
  constexpr size_t kShown = 8;
  if (object.empty()) return "the line has no fields";
  std::vector<std::string> names;
  for (const auto& member : object.items()) {
    if (names.size() == kShown) break;
    names.push_back(absl::StrCat("\"", member.key(), "\""));
  }
  std::string out = absl::StrCat("the line's fields: ", absl::StrJoin(names, ", "));
  if (object.size() > kShown) absl::StrAppend(&out, ", ... (", object.size(), " in all)");
  return out;
}

// Megatron reads the file as UTF-8 text before json.loads sees a line, so
// these lines fail there too; they get their own fix.
std::optional<LineError> CheckEncoding(absl::string_view text, const std::string& input) {
  if (absl::StartsWith(text, kUtf8Bom)) {
    return LineError{
        "the line starts with a UTF-8 byte-order mark (bytes EF BB BF), which JSON does not "
        "allow (Python's json.loads, which Megatron uses, refuses it too)",
        absl::StrCat("save the file as UTF-8 without the mark (e.g. sed -i 's/^\\xEF\\xBB\\xBF//' ",
                     input, ")", kOrSkip)};
  }
  if (const size_t bad = FindInvalidUtf8(text); bad != absl::string_view::npos) {
    return LineError{
        absl::StrFormat("invalid UTF-8 at byte %d of the line (0x%02X); Megatron stops there with "
                        "a UnicodeDecodeError",
                        bad, static_cast<unsigned char>(text[bad])),
        absl::StrCat("re-encode the input as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8 if it is "
                     "Latin-1)",
                     kOrSkip)};
  }
  return std::nullopt;
}

// Megatron's encode() for one field: a string is one sequence; a list holds
// the document's sentences, one sequence each, those of no tokens dropped;
// --append-eod ends the last sequence, if the document has any.
std::optional<LineError> EncodeField(const Json& doc, const std::string& key,
                                     const PreprocessOptions& options, const Tokenizer& tokenizer,
                                     Document* out) {
  const Json* value = FindMember(doc, key);
  if (value == nullptr) {
    return LineError{absl::StrCat("no field \"", key, "\" (", FieldNames(doc), ")"),
                     absl::StrCat("--json-keys names the fields to read (default: text); name "
                                  "the one that holds the text",
                                  kOrSkip)};
  }
  std::vector<const std::string*> sentences;
  if (value->is_string()) {
    sentences.push_back(&value->get_ref<const std::string&>());
  } else if (value->is_array()) {
    for (size_t i = 0; i < value->size(); ++i) {
      const Json& sentence = (*value)[i];
      if (!sentence.is_string()) {
        return LineError{absl::StrCat("field \"", key, "\" is a list whose element ", i,
                                      " (from 0) is ", TypeName(sentence),
                                      ": a list must hold only strings, the document's sentences"),
                         absl::StrCat(kFixLine, kOrSkip)};
      }
      sentences.push_back(&sentence.get_ref<const std::string&>());
    }
  } else {
    return LineError{absl::StrCat("field \"", key, "\" is ", TypeName(*value),
                                  ": it must be a string, or a list of strings (sentences)"),
                     absl::StrCat(kFixLine, kOrSkip)};
  }
  for (const std::string* sentence : sentences) {
    out->text_bytes += int64_t(sentence->size());
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Tokenize(*sentence);
    if (!ids.ok()) {
      return LineError{absl::StrCat("field \"", key, "\": ", ids.status().message()),
                       absl::StrCat(kFixLine, " or the tokenizer flags", kOrSkip)};
    }
    if (ids->empty()) continue;
    out->lengths.push_back(int32_t(ids->size()));
    if (out->ids.empty()) {
      out->ids = *std::move(ids);
    } else {
      out->ids.insert(out->ids.end(), ids->begin(), ids->end());
    }
  }
  if (options.append_eod && !out->ids.empty()) {
    out->ids.push_back(tokenizer.eod());
    ++out->lengths.back();
  }
  return std::nullopt;
}

Encoded EncodeLine(absl::string_view text, const PreprocessOptions& options,
                   const Tokenizer& tokenizer) {
  Encoded out;
  out.error = CheckEncoding(text, options.input);
  if (out.error) return out;
  auto not_json = [&](std::string what) {
    out.error = LineError{std::move(what),
                          absl::StrCat("each line must hold one JSON object: ", kFixLine, kOrSkip)};
    return out;
  };
  absl::StatusOr<Json> doc = ParseJson(text);
  if (!doc.ok()) return not_json(std::string(doc.status().message()));
  if (!doc->is_object()) {
    return not_json(absl::StrCat("the line is ", TypeName(*doc), ", not a JSON object"));
  }
  out.documents.resize(options.json_keys.size());
  for (size_t k = 0; k < options.json_keys.size() && !out.error; ++k) {
    out.error = EncodeField(*doc, options.json_keys[k], options, tokenizer, &out.documents[k]);
  }
  return out;
}

// Encodes `batch` on up to options.workers threads, which take interleaved
// lines; results land in line order.
void EncodeBatch(const std::vector<Line>& batch, const PreprocessOptions& options,
                 const Tokenizer& tokenizer, std::vector<Encoded>* encoded) {
  encoded->assign(batch.size(), Encoded());
  const int workers = std::min<int>(options.workers, std::max<size_t>(batch.size(), 1));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (size_t i = w; i < batch.size(); i += workers) {
        (*encoded)[i] = EncodeLine(batch[i].text, options, tokenizer);
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// Reads up to kBatchLines non-blank lines into `batch`; false at the end of
// the input.
bool ReadBatch(std::istream& in, std::vector<Line>* batch, PreprocessSummary* summary) {
  batch->clear();
  std::string text;
  while (batch->size() < kBatchLines) {
    if (!std::getline(in, text)) return false;
    ++summary->lines;
    summary->input_bytes += int64_t(text.size()) + 1;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
    batch->push_back({summary->lines, std::move(text)});
  }
  return true;
}

// The output datasets, one per key. They are partial until Finalize; Discard
// removes the files made so far, so that a failed run leaves nothing a
// training run could take for a dataset.
class OutputDatasets {
 public:
  explicit OutputDatasets(const PreprocessOptions& options) {
    for (const std::string& key : options.json_keys) {
      prefixes_.push_back(absl::StrCat(options.output_prefix, "_", key, "_document"));
    }
    tokens_.assign(prefixes_.size(), 0);
    text_bytes_.assign(prefixes_.size(), 0);
  }
  const std::vector<std::string>& prefixes() const { return prefixes_; }

  absl::Status Create(TokenDType dtype) {
    for (const std::string& prefix : prefixes_) {
      ASSIGN_OR_RETURN(std::unique_ptr<IndexedDatasetBuilder> builder,
                       IndexedDatasetBuilder::Create(prefix + ".bin", dtype));
      builders_.push_back(std::move(builder));
    }
    return absl::OkStatus();
  }

  // Adds one line's documents, one per key; counts their tokens in `tokens`.
  absl::Status Add(const std::vector<Document>& documents, int64_t* tokens) {
    for (size_t k = 0; k < builders_.size(); ++k) {
      const Document& doc = documents[k];
      RETURN_IF_ERROR(builders_[k]->AddDocument(absl::MakeConstSpan(doc.ids), doc.lengths));
      tokens_[k] += int64_t(doc.ids.size());
      text_bytes_[k] += doc.text_bytes;
      *tokens += int64_t(doc.ids.size());
    }
    return absl::OkStatus();
  }
  // Tokens written so far, per key, and the bytes of text they came from.
  const std::vector<int64_t>& tokens() const { return tokens_; }
  const std::vector<int64_t>& text_bytes() const { return text_bytes_; }

  absl::Status Finalize() {
    for (size_t k = 0; k < builders_.size(); ++k) {
      RETURN_IF_ERROR(builders_[k]->Finalize(prefixes_[k] + ".idx"));
    }
    return absl::OkStatus();
  }

  void Discard() {
    // Only the files this run created: a .bin it could not create may be
    // someone else's.
    const size_t created = builders_.size();
    builders_.clear();  // closes the .bin files
    for (size_t k = 0; k < created; ++k) {
      std::remove((prefixes_[k] + ".bin").c_str());
      std::remove((prefixes_[k] + ".idx").c_str());
    }
  }

 private:
  std::vector<std::string> prefixes_;
  std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders_;
  std::vector<int64_t> tokens_;
  std::vector<int64_t> text_bytes_;
};

absl::Status CheckOptions(const PreprocessOptions& options) {
  if (options.json_keys.empty()) {
    return absl::InvalidArgumentError(
        "--json-keys is empty: name the fields to read, e.g. --json-keys text");
  }
  absl::flat_hash_set<std::string> keys;
  for (const std::string& key : options.json_keys) {
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--json-keys names \"", key, "\" twice; each key makes one dataset: name it once"));
    }
  }
  if (options.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers must be >= 1, got ", options.workers));
  }
  std::error_code error;
  if (std::filesystem::is_directory(options.input, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input ", options.input,
        " is a directory, not a file: name one JSON-lines file in it (run preprocess once per "
        "file, or concatenate the files first)"));
  }
  return absl::OkStatus();
}

// A run that wrote no document, or no token under some key, made nothing to
// train on (the trainer refuses an empty dataset), so it fails and says why.
absl::Status CheckWroteTokens(const PreprocessOptions& options, const PreprocessSummary& summary,
                              const OutputDatasets& outputs, const Tokenizer& tokenizer) {
  if (summary.documents > 0) {
    for (size_t k = 0; k < options.json_keys.size(); ++k) {
      if (outputs.tokens()[k] > 0) continue;
      if (outputs.text_bytes()[k] > 0) {  // the field has text: the tokenizer made nothing of it
        return absl::InvalidArgumentError(absl::StrCat(
            options.input, ": field \"", options.json_keys[k], "\" holds ", outputs.text_bytes()[k],
            " bytes of text in ", summary.documents,
            " documents, but the tokenizer made no token of any of it: its vocabulary (",
            tokenizer.vocab_size(),
            " ids) is empty or matches none of the text; check the tokenizer files "
            "(--vocab-file and --merge-file, --tokenizer-model) and --tokenizer-type"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          options.input, ": field \"", options.json_keys[k],
          "\" is empty (no tokens) in every document (", summary.documents,
          " in all), so no dataset was written: the trainer refuses an empty dataset; check "
          "that --json-keys names the field that holds the text"));
    }
    return absl::OkStatus();
  }
  std::string why;
  if (summary.lines == 0) {
    why = "the file is empty";
  } else if (summary.skipped_lines == 0) {
    why = absl::StrCat("its ", summary.lines, " lines are all blank");
  } else {
    why = absl::StrCat("every line was bad (", summary.skipped_lines,
                       " skipped, each reported above); fix the lines, or check that --json-keys (",
                       absl::StrJoin(options.json_keys, " "), ") names fields they have");
  }
  return absl::InvalidArgumentError(
      absl::StrCat(options.input, ": no documents to write, so no dataset was written: ", why));
}

void LogProgress(const PreprocessSummary& summary, double seconds, std::FILE* log) {
  seconds = std::max(seconds, 1e-9);
  std::fprintf(log, "processed %lld documents (%.0f docs/s, %.2f MB/s, %lld tokens)\n",
               static_cast<long long>(summary.documents), summary.documents / seconds,
               summary.input_bytes / seconds / 1e6, static_cast<long long>(summary.tokens));
  std::fflush(log);
}

// Reads, encodes and writes every line of `in`.
absl::Status ProcessLines(std::istream& in, const PreprocessOptions& options,
                          const Tokenizer& tokenizer, OutputDatasets* outputs,
                          PreprocessSummary* summary) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<Line> batch;
  std::vector<Encoded> encoded;
  bool more = true;
  while (more) {
    more = ReadBatch(in, &batch, summary);
    EncodeBatch(batch, options, tokenizer, &encoded);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (const std::optional<LineError>& error = encoded[i].error) {
        const std::string where =
            absl::StrCat(options.input, ":", batch[i].number, ": ", error->what);
        if (!options.skip_bad_lines) {
          return absl::InvalidArgumentError(absl::StrCat(where, "; ", error->fix));
        }
        std::fprintf(options.log, "skipping %s\n", where.c_str());
        ++summary->skipped_lines;
        continue;
      }
      RETURN_IF_ERROR(outputs->Add(encoded[i].documents, &summary->tokens));
      ++summary->documents;
      if (options.log_interval > 0 && summary->documents % options.log_interval == 0) {
        LogProgress(*summary, elapsed(), options.log);
      }
    }
  }
  if (in.bad()) {
    // An I/O error, not a damaged input (base/exit_code.h): exit 1.
    return absl::UnavailableError(
        absl::StrCat("reading ", options.input, " failed after line ", summary->lines));
  }
  summary->seconds = elapsed();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PreprocessSummary> Preprocess(const PreprocessOptions& options,
                                             const Tokenizer& tokenizer) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::ifstream in(options.input, std::ios::binary);
  if (!in) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read --input ", options.input));
  }
  PreprocessSummary summary;
  summary.dtype = TokenDTypeForVocab(tokenizer.vocab_size());
  OutputDatasets outputs(options);
  absl::Status status = outputs.Create(summary.dtype);
  if (status.ok()) status = ProcessLines(in, options, tokenizer, &outputs, &summary);
  if (status.ok()) status = CheckWroteTokens(options, summary, outputs, tokenizer);
  if (status.ok()) status = outputs.Finalize();
  if (!status.ok()) {
    outputs.Discard();
    return status;
  }
  summary.output_prefixes = outputs.prefixes();
  return summary;
}

}  // namespace conveyor

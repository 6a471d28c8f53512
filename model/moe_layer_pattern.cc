#include "model/moe_layer_pattern.h"

#include <cctype>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace conveyor {
namespace {

// Recursive descent over the list-expression grammar:
//   sum := product ('+' product)*
//   product := atom ('*' integer)*
//   atom := '[' integer (',' integer)* ']' | '(' sum ')'
class ListExpression {
 public:
  explicit ListExpression(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<int64_t>> Parse() {
    absl::StatusOr<std::vector<int64_t>> list = Sum();
    if (list.ok() && Peek() != '\0') return Error("unexpected text");
    return list;
  }

 private:
  char Peek() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool Take(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "--moe-layer-freq '", text_, "': ", what, " at character ", pos_ + 1,
        "; give an integer N (every N-th layer is MoE) or a list such as '([1]*3+[0]*1)*3'"));
  }

  absl::StatusOr<int64_t> Integer() {
    Peek();
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    int64_t value = 0;
    if (pos_ == start || !absl::SimpleAtoi(text_.substr(start, pos_ - start), &value)) {
      return Error("expected an integer");
    }
    return value;
  }

  absl::StatusOr<std::vector<int64_t>> Atom() {
    if (Take('(')) {
      absl::StatusOr<std::vector<int64_t>> inner = Sum();
      if (inner.ok() && !Take(')')) return Error("expected ')'");
      return inner;
    }
    if (!Take('[')) return Error("expected '[' or '('");
    std::vector<int64_t> list;
    do {
      absl::StatusOr<int64_t> value = Integer();
      if (!value.ok()) return value.status();
      list.push_back(*value);
    } while (Take(','));
    if (!Take(']')) return Error("expected ']'");
    return list;
  }

  absl::StatusOr<std::vector<int64_t>> Product() {
    absl::StatusOr<std::vector<int64_t>> list = Atom();
    while (list.ok() && Take('*')) {
      absl::StatusOr<int64_t> times = Integer();
      if (!times.ok()) return times.status();
      std::vector<int64_t> repeated;
      for (int64_t i = 0; i < *times; ++i) {
        repeated.insert(repeated.end(), list->begin(), list->end());
      }
      *list = std::move(repeated);
    }
    return list;
  }

  absl::StatusOr<std::vector<int64_t>> Sum() {
    absl::StatusOr<std::vector<int64_t>> list = Product();
    while (list.ok() && Take('+')) {
      absl::StatusOr<std::vector<int64_t>> more = Product();
      if (!more.ok()) return more.status();
      list->insert(list->end(), more->begin(), more->end());
    }
    return list;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<bool>> ParseMoeLayerFreq(absl::string_view text, int64_t num_layers) {
  int64_t every = 0;
  if (absl::SimpleAtoi(text, &every)) {
    if (every < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--moe-layer-freq ", text, ": an integer frequency must be at least 1"));
    }
    std::vector<bool> pattern(num_layers);
    for (int64_t i = 0; i < num_layers; ++i) pattern[i] = i % every == 0;
    return pattern;
  }
  absl::StatusOr<std::vector<int64_t>> list = ListExpression(text).Parse();
  if (!list.ok()) return list.status();
  if (static_cast<int64_t>(list->size()) != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("--moe-layer-freq '", text, "' gives ",
                                                   list->size(), " layers but --num-layers is ",
                                                   num_layers, "; give one 0 or 1 per layer"));
  }
  std::vector<bool> pattern;
  for (int64_t v : *list) {
    if (v != 0 && v != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--moe-layer-freq '", text, "': entries are 1 (MoE layer) or 0 (dense), not ", v));
    }
    pattern.push_back(v == 1);
  }
  return pattern;
}

}  // namespace conveyor

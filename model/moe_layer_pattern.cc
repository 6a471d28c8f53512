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
// Repetition stops at `max_entries` (the layer count): an expression such as
// "[0]*3000000000" is refused by its length before a list that long is built. Errors name
// `flag` and end with `hint`.
class ListExpression {
 public:
  ListExpression(absl::string_view text, int64_t max_entries, absl::string_view flag,
                 absl::string_view hint)
      : text_(text), max_entries_(max_entries), flag_(flag), hint_(hint) {}

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
    return absl::InvalidArgumentError(
        absl::StrCat(flag_, " '", text_, "': ", what, " at character ", pos_ + 1, "; ", hint_));
  }

  // `what` would build a list of more entries than layers.
  absl::Status TooLong(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(flag_, " '", text_, "' ", what,
                                                   " (at character ", pos_,
                                                   "): more entries than --num-layers ",
                                                   max_entries_, "; give one 0 or 1 per layer"));
  }
  bool Fits(size_t entries_per_copy, int64_t copies) const {
    return copies == 0 || static_cast<int64_t>(entries_per_copy) <= max_entries_ / copies;
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
      if (!Fits(list->size(), *times)) {
        return TooLong(absl::StrCat("repeats ", list->size(), " entries ", *times, " times"));
      }
      if (list->empty()) continue;  // "([1]*0)*N" repeats nothing
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
      if (!Fits(list->size() + more->size(), 1)) {
        return TooLong(absl::StrCat("joins ", list->size(), " and ", more->size(), " entries"));
      }
      list->insert(list->end(), more->begin(), more->end());
    }
    return list;
  }

  absl::string_view text_;
  int64_t max_entries_;
  absl::string_view flag_, hint_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseLayerListExpression(absl::string_view text,
                                                              int64_t num_layers,
                                                              absl::string_view flag) {
  return ListExpression(text, num_layers, flag,
                        "give an integer N or a list of 0/1 per layer such as '([1]*3+[0]*1)*3'")
      .Parse();
}

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
  absl::StatusOr<std::vector<int64_t>> list =
      ListExpression(text, num_layers, "--moe-layer-freq",
                     "give an integer N (every N-th layer is MoE) or a list such as "
                     "'([1]*3+[0]*1)*3'")
          .Parse();
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

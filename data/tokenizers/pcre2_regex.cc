#include "data/tokenizers/pcre2_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/tokenizers/utf8_text.h"

namespace conveyor {
namespace {

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread match state: the JIT stack grows up to 8 MiB, because patterns
// such as \s+(?!\S) backtrack over whole whitespace runs, which can exceed
// PCRE2's 32 KiB default on long runs.
struct MatchState {
  MatchState()
      : data(pcre2_match_data_create(1, nullptr)),
        context(pcre2_match_context_create(nullptr)),
        jit_stack(pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr)) {
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  pcre2_match_data* data;
  pcre2_match_context* context;
  pcre2_jit_stack* jit_stack;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Pcre2Regex>> Pcre2Regex::Compile(const std::string& pattern,
                                                                bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP (Unicode classes) together with LITERAL, which needs none.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pattern '", pattern, "' does not compile: ", Pcre2Message(error), " at offset ", offset));
  }
  // Without JIT (an unsupported CPU) matching still works, only slower.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<Pcre2Regex>(new Pcre2Regex(pattern, code));
}

Pcre2Regex::~Pcre2Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Pcre2Regex::FindAll(
    absl::string_view text) const {
  thread_local MatchState state;
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<std::pair<size_t, size_t>> matches;
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc =
        pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc == 0: the match data holds fewer groups than the pattern; group 0 is set.
    if (rc < 0) {
      return absl::InternalError(absl::StrCat("pattern '", pattern_, "': ", Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t start = ovector[0], end = ovector[1];
    if (end > start) {
      matches.emplace_back(start, end);
      pos = end;
    } else {
      // An empty match yields no piece; step over one character, as the
      // reference engines do.
      if (start >= text.size()) break;
      pos = start + Utf8CharLength(text, start);
    }
  }
  return matches;
}

}  // namespace conveyor

#include "trainer/config/document_masking.h"

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace {

// The first masking flag set, for messages ("" when none is).
const char* FirstMaskingFlag(const DataConfig& data) {
  if (data.eod_mask_loss()) return "--eod-mask-loss";
  if (data.reset_position_ids()) return "--reset-position-ids";
  if (data.reset_attention_mask()) return "--reset-attention-mask";
  return "";
}

}  // namespace

absl::Status ResolveEodToken(const Tokenizer* tokenizer, Config* config) {
  DataConfig& data = *config->mutable_data();
  if (tokenizer != nullptr) {
    if (data.eod_token_id() >= 0 && data.eod_token_id() != tokenizer->eod()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--eod-token-id ", data.eod_token_id(), " is not the eod of --tokenizer-type ",
          data.tokenizer_type(), " (", tokenizer->eod(),
          "): documents end at the tokenizer's eod, as in Megatron; drop --eod-token-id"));
    }
    data.set_eod_token_id(tokenizer->eod());
  }
  const std::string flag = FirstMaskingFlag(data);
  if (flag.empty()) return absl::OkStatus();
  if (data.eod_token_id() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag,
                     " needs the token that ends a document: pass --tokenizer-type (its eod, as in "
                     "Megatron) or, for data tokenized elsewhere, --eod-token-id"));
  }
  if (data.eod_token_id() >= config->model().vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eod-token-id ", data.eod_token_id(), " is outside the vocabulary (",
                     config->model().vocab_size(), " ids): pass the id the data's eod has"));
  }
  return absl::OkStatus();
}

DocumentMasking DocumentMaskingOf(const Config& config) {
  const DataConfig& data = config.data();
  DocumentMasking masking;
  masking.eod = data.eod_token_id();
  masking.eod_mask_loss = data.eod_mask_loss();
  masking.reset_position_ids = data.reset_position_ids();
  masking.reset_attention_mask = data.reset_attention_mask();
  return masking;
}

}  // namespace conveyor

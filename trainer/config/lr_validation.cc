#include "trainer/config/lr_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "proto/config_choices.h"

namespace conveyor {
namespace {

// WSD's anneal is the last part of the decay, counted as the run counts (iterations, or
// samples under --train-samples); Megatron asserts that the style has its length.
void CheckWsd(const Config& c, std::vector<std::string>* out) {
  const OptimizerConfig& o = c.optimizer();
  const bool by_samples = c.training().train_samples() > 0;
  if (o.lr_wsd_decay_iters() < 0 || o.lr_wsd_decay_samples() < 0) {
    out->push_back(absl::StrCat(
        o.lr_wsd_decay_iters() < 0 ? "--lr-wsd-decay-iters " : "--lr-wsd-decay-samples ",
        std::min<int64_t>(o.lr_wsd_decay_iters(), o.lr_wsd_decay_samples()),
        " must not be negative: give the anneal's length"));
    return;
  }
  if (by_samples && o.lr_wsd_decay_iters() > 0) {
    out->push_back(
        "--lr-wsd-decay-iters counts iterations, but with --train-samples the schedule counts "
        "samples: use --lr-wsd-decay-samples");
  }
  if (!by_samples && o.lr_wsd_decay_samples() > 0) {
    out->push_back(
        "--lr-wsd-decay-samples needs --train-samples: without it the schedule counts "
        "iterations; use --lr-wsd-decay-iters");
  }
  if (ParseChoice<LrDecayStyle>(o.lr_decay_style()) != LrDecayStyle::kWsd) return;
  const char* unit = by_samples ? "samples" : "iters";
  const int64_t wsd = by_samples ? o.lr_wsd_decay_samples() : o.lr_wsd_decay_iters();
  const int64_t decay_flag = by_samples ? o.lr_decay_samples() : o.lr_decay_iters();
  const int64_t length = by_samples ? c.training().train_samples() : c.training().train_iters();
  const int64_t decay = decay_flag > 0 ? decay_flag : length;
  if (wsd <= 0) {
    out->push_back(absl::StrCat("--lr-decay-style WSD needs --lr-wsd-decay-", unit,
                                " N: the anneal to --min-lr over the last N ", unit,
                                " of the decay (Megatron has no default)"));
  } else if (decay > 0 && wsd > decay) {
    out->push_back(absl::StrCat("--lr-wsd-decay-", unit, " ", wsd, " exceeds --lr-decay-", unit,
                                decay_flag > 0 ? " " : " (= the run's length) ", decay,
                                ": the anneal is the end of the decay; set --lr-wsd-decay-", unit,
                                " <= ", decay));
  }
}

bool NonNegativeFinite(double v) { return v >= 0 && std::isfinite(v); }

// Megatron puts the embedding and output layer in a group of their own whose peak is
// --decoupled-lr and floor --decoupled-min-lr (else --min-lr).
void CheckDecoupled(const OptimizerConfig& o, std::vector<std::string>* out) {
  if (!o.has_decoupled_lr()) {
    if (o.has_decoupled_min_lr()) {
      out->push_back(absl::StrCat("--decoupled-min-lr ", o.decoupled_min_lr(),
                                  " applies only with --decoupled-lr (the embedding and output "
                                  "layer's peak): add --decoupled-lr or drop the flag"));
    }
    return;
  }
  if (!NonNegativeFinite(o.decoupled_lr())) {
    out->push_back(absl::StrCat("--decoupled-lr ", o.decoupled_lr(),
                                " must not be negative: set --decoupled-lr >= 0"));
    return;
  }
  const bool own_min = o.has_decoupled_min_lr();
  const double min = own_min ? o.decoupled_min_lr() : o.min_lr();
  if (own_min && !NonNegativeFinite(min)) {
    out->push_back(absl::StrCat("--decoupled-min-lr ", min,
                                " must not be negative: set --decoupled-min-lr >= 0"));
  } else if (min > o.decoupled_lr()) {
    out->push_back(absl::StrCat(
        own_min ? "--decoupled-min-lr " : "--min-lr ", min, " is larger than --decoupled-lr ",
        o.decoupled_lr(), ": the embedding and output layer decay from --decoupled-lr down to ",
        own_min ? "--decoupled-min-lr; set it" : "--min-lr; set --decoupled-min-lr",
        " <= --decoupled-lr"));
  }
}

}  // namespace

std::vector<std::string> WsdAndDecoupledLrProblems(const Config& config) {
  std::vector<std::string> problems;
  CheckWsd(config, &problems);
  CheckDecoupled(config.optimizer(), &problems);
  return problems;
}

}  // namespace conveyor

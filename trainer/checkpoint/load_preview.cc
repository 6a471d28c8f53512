#include "trainer/checkpoint/load_preview.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/checkpoint/checkpoint_reader.h"

namespace conveyor {
namespace {

absl::Status Named(const std::string& load_dir, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("--load ", load_dir, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::string> PreviewLoad(const std::string& load_dir, int64_t ckpt_step) {
  const absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(load_dir);
  if (!survey.ok()) return Named(load_dir, survey.status());
  if (survey->holds_no_checkpoint()) {
    // Whether the run may then start from scratch (--ckpt-step,
    // --exit-on-missing-checkpoint) is the run's own rule, said when it starts.
    return absl::StrCat("plan: --load ", load_dir,
                        survey->exists ? " holds no checkpoint" : " does not exist",
                        ": the run starts from iteration 0 unless --ckpt-step or "
                        "--exit-on-missing-checkpoint asks for one");
  }
  const absl::StatusOr<LoadedCheckpoint> checkpoint = OpenCheckpoint(
      load_dir, ckpt_step > 0 ? std::optional<int64_t>(ckpt_step) : std::nullopt);
  if (!checkpoint.ok()) return Named(load_dir, checkpoint.status());
  return absl::StrCat("plan: --load ", load_dir, ": iteration ", checkpoint->State(0).iteration,
                      " (its manifest and data files open; the tensors are read when the run "
                      "starts)");
}

}  // namespace conveyor

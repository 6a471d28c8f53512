// The training loop's use of checkpoints (--save, --load and friends): which of this
// rank's tensors it writes, what it restores, and where training resumes.
//
// Every element is written exactly once: parameters by data-parallel rank 0 (the
// distributed optimizer's state by each DP rank, its own slice), tensor-parallel
// replicas by TP rank 0, and never the last stage's copy of a tied embedding. Every
// rank loads everything it holds, whatever layout saved it.
#ifndef CONVEYOR_TRAINER_TRAINING_CHECKPOINTS_H_
#define CONVEYOR_TRAINER_TRAINING_CHECKPOINTS_H_

#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gpt_stage.h"
#include "proto/config.pb.h"
#include "trainer/checkpoint/async_saver.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_types.h"
#include "trainer/checkpoint/load_agreement.h"
#include "trainer/checkpoint/save_folder.h"
#include "trainer/config/resolved_config.h"
#include "trainer/host_staging.h"
#include "trainer/optimization/parameter_updater.h"
#include "trainer/rank_context.h"

namespace conveyor {

struct ResumePoint {
  int64_t iteration = 0;  // last completed iteration
  int64_t consumed_samples = 0;
};

class TrainingCheckpoints {
 public:
  // `context` (this rank's place, which decides what it writes) must outlive this.
  TrainingCheckpoints(const ResolvedConfig& config, const RankContext& context, GptStage* stage,
                      ParameterUpdater* updater);
  // Not movable: the commit guard given to the savers refers to this object's lock.
  TrainingCheckpoints(const TrainingCheckpoints&) = delete;
  TrainingCheckpoints& operator=(const TrainingCheckpoints&) = delete;

  // With --load-hf (and no checkpoint in --load): starts from Hugging Face weights.
  // With --load: restores parameters (and, unless --no-load-optim or --finetune, the
  // optimizer) from the latest or --ckpt-step checkpoint, and returns where to resume
  // (iteration 0 with --finetune). Without --load, or when the --load folder is absent
  // or holds no checkpoint at all (a notice goes to `log`; an error with
  // --exit-on-missing-checkpoint), returns {0, 0}.
  //
  // Checkpoint material that cannot be loaded (latest names a missing iteration, a
  // data file is missing or corrupt, --ckpt-step names an absent iteration, ...) is an
  // error that names the file and the fix: never a silent start from scratch, whose
  // saves would overwrite the checkpoints. Loading writes nothing to disk.
  //
  // Every rank must have loaded the same checkpoint, or none: ranks that did not (a
  // --load folder per node, a stale view of shared storage) end the run naming what
  // each loaded, before anything is written.
  //
  // Before anything reads or changes --save, rank 0 (which commits every save) takes
  // its lock (SaveFolderLock, creating the folder when missing) and holds it until
  // this object goes, after the last commit: a run whose --save another run holds
  // stops here. After loading, the ranks that write checkpoints check that --save can
  // hold them, so that a bad --save fails now and not after hours of training, and
  // rank 0 refuses a --save that holds another run's checkpoints (ClaimSaveFolder;
  // --overwrite-save accepts it) and removes what interrupted saves left there.
  // Collective: every rank fails when any rank does, before any step.
  absl::StatusOr<ResumePoint> Load(std::ostream* log);

  // Saves `point` under --save; with --async-save the writing overlaps training and
  // at most one save is in flight.
  absl::Status Save(const ResumePoint& point);
  // Commits an asynchronous save still in flight (at exit).
  absl::Status Finish();

 private:
  // What this rank loaded (compared across ranks) and where it resumes.
  struct LoadOutcome {
    LoadedCheckpointId loaded;  // no iteration: no checkpoint
    ResumePoint resume;
  };
  // Load's work on this rank, without communication.
  absl::StatusOr<LoadOutcome> LoadHere(std::ostream* log);
  // The --load folder holds no checkpoint: start from scratch, unless told otherwise.
  absl::Status StartWithoutCheckpoint(const CheckpointFolderSurvey& survey, std::ostream* log);
  // The iteration to load from a folder that holds checkpoint material.
  absl::StatusOr<int64_t> ChooseIteration(const CheckpointFolderSurvey& survey) const;
  // `error` (from opening or reading the checkpoint of `iteration`), with what to do.
  absl::Status Unloadable(const absl::Status& error, const CheckpointFolderSurvey& survey,
                          std::optional<int64_t> iteration) const;
  // Rank 0, with --save: takes the folder's lock, then puts back what a crash left
  // moved aside in the middle of a replacement (RestoreInterruptedReplacements),
  // naming it on `log`.
  absl::Status LockSaveFolder(std::ostream* log);
  // Every commit's check that this run still owns --save (SaveFolderLock).
  CommitGuard OwnershipGuard() const;
  // --save can hold this rank's files (ranks that write nothing pass); on rank 0 it
  // is this run's to save into (`loaded`: what the ranks agreed they loaded), and
  // interrupted saves' leftovers go, named on `log`.
  absl::Status PrepareSaveFolder(const LoadedCheckpointId& loaded, std::ostream* log);
  // After a commit of `iteration` (none: nothing was committed): with --overwrite-save,
  // the first one removes the earlier run's iterations this run did not replace.
  absl::Status Committed(std::optional<int64_t> iteration);
  // The iteration of the asynchronous save in flight, if any.
  std::optional<int64_t> InFlight() const;
  // A --save error that is the folder's, with the fix.
  absl::Status CannotHoldCheckpoints(const absl::Status& error) const;

  // What a save writes or a load fills, through host copies of device tensors.
  // A parameter's fp32 values on this rank, in host memory: all of its local elements,
  // or a piece [offset, offset + n) of them held in the distributed optimizer's master
  // shard (each DP rank its own pieces).
  struct LocalValues {
    const Parameter* owner;
    int64_t offset;
    int64_t n;
    float* data;
    bool sharded_over_dp;
  };
  std::vector<LocalValues> ValuesOfParameters(HostStaging* staging, bool saving);
  std::vector<TensorShardRef> Tensors(bool saving, HostStaging* staging);
  // --load-hf: parameters from a Hugging Face model folder (trainer/hf/export.h).
  absl::Status LoadHuggingFace(std::ostream* log);
  // Refuses a checkpoint of another model, listing every differing setting.
  absl::Status CheckSameModel(const Config& saved, const std::string& directory) const;
  // Refuses a checkpoint whose padded vocabulary differs, naming the flag that fixes it.
  absl::Status CheckVocabularyPadding(const LoadedCheckpoint& checkpoint) const;
  // Refuses to load optimizer state the checkpoint lacks, naming the flags that skip it.
  absl::Status CheckOptimizerState(const LoadedCheckpoint& checkpoint,
                                   const std::vector<TensorShardRef>& targets) const;
  // A warning on `log` when this run's global batch differs from the checkpoint's.
  void WarnIfGlobalBatchChanged(const CheckpointState& saved, std::ostream* log) const;
  bool Writes(const Parameter& p) const;
  // Whether this rank writes files into --save.
  bool WritesCheckpoints() const;

  Config config_;
  GptStage* stage_;
  ParameterUpdater* updater_;
  const RankContext& context_;
  // Declared before async_, so released after the last asynchronous commit.
  std::optional<SaveFolderLock> save_lock_;
  // Rank 0 with --overwrite-save: the earlier run's iterations still in --save, and the
  // iterations this run has committed (which replaced the earlier run's of that number).
  std::vector<int64_t> overwritten_;
  std::set<int64_t> committed_;
  std::ostream* log_ = nullptr;  // Load's, for notices of later saves
  std::unique_ptr<AsyncCheckpointSaver> async_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_TRAINING_CHECKPOINTS_H_

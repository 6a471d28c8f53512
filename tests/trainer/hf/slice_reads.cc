#include "tests/trainer/hf/slice_reads.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_groups.h"
#include "model/model_shape.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/util/in_process_world.h"

namespace conveyor::testing_util {

int64_t F32DataBytes(const HfTensorMap& weights) {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : weights) bytes += 4 * static_cast<int64_t>(tensor.data.size());
  return bytes;
}

namespace {

// DeepSeek-V3's multi-token prediction depths each store a copy of the embedding
// (embed_tokens) and of the output layer (shared_head.head, the embedding when tied); a
// rank reads the same elements of each copy to compare them with the original's.
int64_t StoredCopies(const ModelShape& shape, const std::string& name) {
  if (name == "embedding.word_embeddings.weight") {
    return shape.mtp_layers * (shape.tied_embeddings ? 2 : 1);
  }
  return name == "output_layer.weight" ? shape.mtp_layers : 0;
}

}  // namespace

int64_t ExpectRankReadsMatchWholeRead(const std::string& dir, const ResolvedConfig& config,
                                      const GlobalTensorMap& whole, const TensorParallel& parallel,
                                      const std::string& rank) {
  const ModelShape& shape = config.model_shape();
  GptModel model(&CpuOps::Get(), shape, /*seed=*/1, &parallel);
  HfElementRequest request;
  int64_t elements = 0;
  for (const Parameter* p : model.parameters().parameters()) {
    request[p->name] = GlobalIndices(*p);
    elements += static_cast<int64_t>(request[p->name].size()) * (1 + StoredCopies(shape, p->name));
  }
  int64_t bytes = 0;
  const absl::StatusOr<HfElementValues> slices = ReadHfSlices(dir, config.config(), request, &bytes);
  EXPECT_TRUE(slices.ok()) << slices.status();
  if (!slices.ok()) return 0;
  for (const auto& [name, indices] : request) {
    const std::vector<float>& got = slices->at(name);
    EXPECT_EQ(got.size(), indices.size()) << name;
    for (size_t i = 0; i < indices.size() && i < got.size(); ++i) {
      EXPECT_EQ(got[i], whole.at(name)[indices[i]]) << name << "[" << indices[i] << "], " << rank;
    }
  }
  EXPECT_EQ(bytes, 4 * elements) << rank;
  return bytes;
}

std::vector<int64_t> ExpectSliceReadsMatchWholeRead(const std::string& dir,
                                                    const ResolvedConfig& config,
                                                    const GlobalTensorMap& whole, int tp) {
  InProcessWorld world(tp);
  std::vector<int64_t> bytes_read;
  for (int rank = 0; rank < tp; ++rank) {
    SingleRankGroups others;
    ModelGroups groups = others.groups();
    groups.tp = groups.etp = &world.rank(rank);  // expert TP as large as TP is the TP group
    const TensorParallel parallel(groups, /*sequence_parallel=*/false);
    bytes_read.push_back(
        ExpectRankReadsMatchWholeRead(dir, config, whole, parallel, "rank " + std::to_string(rank)));
  }
  return bytes_read;
}

void ExpectExpertLayoutReadsMatchWholeRead(const std::string& dir, const ResolvedConfig& config,
                                           const GlobalTensorMap& whole, int64_t file_bytes) {
  InProcessWorld ep(2), tp(2), ep_beside_tp(2);
  for (int rank = 0; rank < 2; ++rank) {
    SingleRankGroups others;
    ModelGroups ep_groups = others.groups();
    ep_groups.ep = &ep.rank(rank);
    ModelGroups tp_groups = others.groups();
    tp_groups.tp = tp_groups.etp = &tp.rank(rank);
    ModelGroups tp_ep_groups = others.groups();  // expert TP of one
    tp_ep_groups.tp = &tp.rank(rank);
    tp_ep_groups.ep = &ep_beside_tp.rank(rank);
    const TensorParallel ep2(ep_groups, false);
    const TensorParallel tp2(tp_groups, false);
    const TensorParallel tp2_ep2(tp_ep_groups, false);
    const std::string r = absl::StrCat(" rank ", rank);
    EXPECT_LT(ExpectRankReadsMatchWholeRead(dir, config, whole, ep2, "EP 2" + r), file_bytes);
    EXPECT_LT(ExpectRankReadsMatchWholeRead(dir, config, whole, tp2, "TP 2 ETP 2" + r),
              file_bytes);
    EXPECT_LT(ExpectRankReadsMatchWholeRead(dir, config, whole, tp2_ep2, "TP 2 ETP 1 EP 2" + r),
              file_bytes);
  }
}

}  // namespace conveyor::testing_util

#include "tests/trainer/hf/slice_reads.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_shape.h"
#include "parallel/self_communicator.h"
#include "tests/util/in_process_world.h"

namespace conveyor::testing_util {

int64_t F32DataBytes(const HfTensorMap& weights) {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : weights) bytes += 4 * static_cast<int64_t>(tensor.data.size());
  return bytes;
}

int64_t ExpectRankReadsMatchWholeRead(const std::string& dir, const ResolvedConfig& config,
                                      const GlobalTensorMap& whole, const TensorParallel& parallel,
                                      const std::string& rank) {
  const ModelShape& shape = config.model_shape();
  GptModel model(shape, /*seed=*/1, &parallel);
  HfElementRequest request;
  int64_t elements = 0;
  for (const Parameter* p : model.parameters().parameters()) {
    request[p->name] = GlobalIndices(*p);
    elements += static_cast<int64_t>(request[p->name].size());
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
    const TensorParallel parallel(&world.rank(rank), /*sequence_parallel=*/false);
    bytes_read.push_back(
        ExpectRankReadsMatchWholeRead(dir, config, whole, parallel, "rank " + std::to_string(rank)));
  }
  return bytes_read;
}

void ExpectExpertLayoutReadsMatchWholeRead(const std::string& dir, const ResolvedConfig& config,
                                           const GlobalTensorMap& whole, int64_t file_bytes) {
  InProcessWorld ep(2), tp(2), ep_beside_tp(2);
  for (int rank = 0; rank < 2; ++rank) {
    SelfCommunicator own("tp"), etp("etp");
    const TensorParallel ep2(&own, false, ExpertGroups{&ep.rank(rank), nullptr});
    const TensorParallel tp2(&tp.rank(rank), false);
    const TensorParallel tp2_ep2(&tp.rank(rank), false,
                                 ExpertGroups{&ep_beside_tp.rank(rank), &etp});
    const std::string r = absl::StrCat(" rank ", rank);
    EXPECT_LT(ExpectRankReadsMatchWholeRead(dir, config, whole, ep2, "EP 2" + r), file_bytes);
    EXPECT_LT(ExpectRankReadsMatchWholeRead(dir, config, whole, tp2, "TP 2 ETP 2" + r),
              file_bytes);
    EXPECT_LT(ExpectRankReadsMatchWholeRead(dir, config, whole, tp2_ep2, "TP 2 ETP 1 EP 2" + r),
              file_bytes);
  }
}

}  // namespace conveyor::testing_util

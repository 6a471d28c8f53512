#include "tests/trainer/checkpoint/checkpoint_test_util.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "parallel/self_communicator.h"
#include "trainer/checkpoint/checkpoint_writer.h"

namespace conveyor {

void PrintTo(const IndexRun& run, std::ostream* os) {
  *os << "{start " << run.start << ", length " << run.length << ", count " << run.count
      << ", stride " << run.stride << "}";
}

namespace testing_util {

std::vector<int64_t> ExpandRuns(const std::vector<IndexRun>& runs) {
  std::vector<int64_t> out;
  ForEachBlock(runs, [&](int64_t start, int64_t length, int64_t) {
    for (int64_t i = 0; i < length; ++i) out.push_back(start + i);
  });
  return out;
}

float GlobalValue(const std::string& name, int64_t g) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  // Integers below 2^24 and quarter steps are exact in fp32.
  return static_cast<float>(h % 1000) * 4096.0f + static_cast<float>(g % 4096) +
         0.25f * static_cast<float>((g / 4096) % 4) - 2000000.0f;
}

TensorShardRef LocalShard::Ref() {
  return {name, global_shape, runs, data.data(), static_cast<int64_t>(data.size())};
}

LocalShard FilledShard(const std::string& name, std::vector<int64_t> shape,
                       std::vector<IndexRun> runs) {
  LocalShard shard{name, std::move(shape), std::move(runs), {}};
  for (int64_t g : ExpandRuns(shard.runs)) shard.data.push_back(GlobalValue(name, g));
  return shard;
}

LocalShard EmptyShard(const std::string& name, std::vector<int64_t> shape,
                      std::vector<IndexRun> runs) {
  LocalShard shard{name, std::move(shape), std::move(runs), {}};
  shard.data.assign(CountElements(shard.runs), std::numeric_limits<float>::quiet_NaN());
  return shard;
}

int64_t CountWrong(const LocalShard& shard) {
  const std::vector<int64_t> globals = ExpandRuns(shard.runs);
  int64_t wrong = 0;
  for (size_t k = 0; k < globals.size(); ++k) {
    const float want = GlobalValue(shard.name, globals[k]);
    if (std::memcmp(&shard.data[k], &want, sizeof(float)) != 0) ++wrong;
  }
  return wrong;
}

std::vector<TensorShardRef> Refs(std::vector<LocalShard>& shards) {
  std::vector<TensorShardRef> refs;
  for (LocalShard& s : shards) refs.push_back(s.Ref());
  return refs;
}

std::vector<IndexRun> BlockRuns(const std::vector<int64_t>& shape, int dim, int parts, int index) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t block = shape[dim] / parts;
  std::vector<IndexRun> runs;
  for (int64_t o = 0; o < outer; ++o) {
    AppendBlock(&runs, (o * shape[dim] + index * block) * inner, block * inner);
  }
  return runs;
}

std::vector<IndexRun> SwigluRuns(const std::vector<int64_t>& shape, int parts, int index) {
  int64_t inner = 1;
  for (size_t i = 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t half = shape[0] / 2, block = half / parts;
  std::vector<IndexRun> runs;
  AppendBlock(&runs, index * block * inner, block * inner);           // gate rows
  AppendBlock(&runs, (half + index * block) * inner, block * inner);  // up rows
  return runs;
}

CheckpointState StateAt(int64_t iteration) {
  CheckpointState state;
  state.iteration = iteration;
  return state;
}

namespace {

std::vector<LocalShard> OneTensor(int64_t iteration, int64_t elements) {
  std::vector<LocalShard> shards = {FilledShard("w", {elements}, ElementRange(0, elements))};
  for (float& v : shards[0].data) v += static_cast<float>(iteration);
  return shards;
}

}  // namespace

absl::Status SaveOneTensorCheckpoint(const std::string& dir, int64_t iteration, int64_t elements,
                                     CommitGuard guard) {
  std::vector<LocalShard> shards = OneTensor(iteration, elements);
  SelfCommunicator world;
  return SaveCheckpoint(dir, StateAt(iteration), Refs(shards), world, std::move(guard));
}

absl::StatusOr<std::string> LeaveInterruptedSave(const std::string& dir, int64_t iteration,
                                                 int64_t elements) {
  std::vector<LocalShard> shards = OneTensor(iteration, elements);
  SelfCommunicator world;
  CheckpointWriter writer(dir);
  if (absl::Status s =
          writer.Snapshot(StateAt(iteration), Refs(shards), world, SnapshotMode::kCopy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = writer.Write(); !s.ok()) return s;
  return writer.temp_dir();
}

}  // namespace testing_util
}  // namespace conveyor

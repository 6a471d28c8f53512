// Save and load bandwidth of the checkpoint format on this machine's disk, for the
// README (issue 7 asks for a model of at least 1 GB of state).
//
//   checkpoint_benchmark DIR [GIB=1] [TENSORS=16]
//
// One rank saves GIB GiB of fp32 in TENSORS square-ish tensors (blocking save: write,
// checksum, fsync, commit), then loads them back in the same layout (direct reads)
// and as TP rank 0 of 2 along columns (strided reads through a buffer). Numbers
// include fsync but not the page cache's state: drop caches before loading for cold
// reads. Ends non-zero if anything fails or a value comes back wrong.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "parallel/self_communicator.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Run(const std::string& dir, double gib, int count) {
  const int64_t total = static_cast<int64_t>(gib * (int64_t{1} << 30) / sizeof(float));
  const int64_t cols = 4096, rows = std::max<int64_t>(1, total / count / cols);
  const double gb = static_cast<double>(rows * cols * count) * sizeof(float) / 1e9;
  std::vector<std::vector<float>> data(count, std::vector<float>(rows * cols));
  std::vector<TensorShardRef> shards;
  for (int t = 0; t < count; ++t) {
    for (int64_t i = 0; i < rows * cols; ++i) data[t][i] = static_cast<float>((i * 7 + t) % 1000);
    shards.push_back({absl::StrCat("layers.", t, ".weight"),
                      {rows, cols},
                      ElementRange(0, rows * cols),
                      data[t].data(),
                      rows * cols});
  }
  RemoveTree(dir).IgnoreError();
  SelfCommunicator world;
  CheckpointState state;
  state.iteration = 1;

  // Two saves: the first allocates its host buffer, the second reuses it, as
  // AsyncCheckpointSaver does from the second save on.
  double snapshot_s[2], write_s[2], commit_s[2];
  std::unique_ptr<float[]> buffer;
  int64_t capacity = 0;
  for (int k = 0; k < 2; ++k) {
    state.iteration = k + 1;
    CheckpointWriter writer(dir);
    writer.AdoptBuffer(std::move(buffer), capacity);
    auto start = std::chrono::steady_clock::now();
    absl::Status status = writer.Snapshot(state, shards, world, SnapshotMode::kCopy);
    snapshot_s[k] = Seconds(start);
    if (status.ok()) status = writer.Write();
    write_s[k] = writer.write_stats().seconds;
    start = std::chrono::steady_clock::now();
    if (status.ok()) status = writer.Commit(world);
    commit_s[k] = Seconds(start);
    if (!status.ok()) {
      std::fprintf(stderr, "save failed: %s\n", status.ToString().c_str());
      return 1;
    }
    buffer = writer.TakeBuffer(&capacity);
  }
  absl::Status status;

  for (auto& d : data) std::fill(d.begin(), d.end(), -1.0f);
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  const double open_s = Seconds(start);
  LoadStats same;
  if (ckpt.ok()) status = LoadTensors(*ckpt, shards, &same);
  if (!ckpt.ok() || !status.ok()) {
    std::fprintf(stderr, "load failed: %s %s\n", ckpt.status().ToString().c_str(),
                 status.ToString().c_str());
    return 1;
  }
  for (int t = 0; t < count; ++t) {
    for (int64_t i = 0; i < rows * cols; i += 4099) {
      if (data[t][i] != static_cast<float>((i * 7 + t) % 1000)) {
        std::fprintf(stderr, "wrong value in tensor %d at %lld\n", t, static_cast<long long>(i));
        return 1;
      }
    }
  }
  // Resharded: the left half of the columns, as TP rank 0 of 2 on a row-parallel layer.
  std::vector<TensorShardRef> halves;
  for (int t = 0; t < count; ++t) {
    halves.push_back({shards[t].name,
                      {rows, cols},
                      {{0, cols / 2, rows, cols}},
                      data[t].data(),
                      rows * cols / 2});
  }
  LoadStats resharded;
  status = LoadTensors(*ckpt, halves, &resharded);
  if (!status.ok()) {
    std::fprintf(stderr, "resharded load failed: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("checkpoint of %.2f GB in %d tensors at %s\n", gb, count, dir.c_str());
  for (int k = 0; k < 2; ++k) {
    std::printf("  save %d: snapshot (%s)  %7.3f s  %6.2f GB/s\n", k + 1,
                k == 0 ? "new buffer   " : "reused buffer", snapshot_s[k], gb / snapshot_s[k]);
    std::printf("          write (crc32c, write, fsync)  %7.3f s  %6.2f GB/s\n", write_s[k],
                gb / write_s[k]);
    std::printf("          commit (manifest, renames)    %7.3f s\n", commit_s[k]);
  }
  std::printf("  open (manifest, index, stat)          %7.3f s\n", open_s);
  std::printf("  load, same layout                     %7.3f s  %6.2f GB/s\n", same.seconds,
              same.bytes_read / 1e9 / same.seconds);
  std::printf(
      "  load, TP2 column half                 %7.3f s  %6.2f GB/s read (%.2f GB for %.2f GB "
      "wanted)\n",
      resharded.seconds, resharded.bytes_read / 1e9 / resharded.seconds, resharded.bytes_read / 1e9,
      gb / 2);
  return 0;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [GIB=1] [TENSORS=16]\n", argv[0]);
    return 2;
  }
  const double gib = argc > 2 ? std::atof(argv[2]) : 1.0;
  const int tensors = argc > 3 ? std::atoi(argv[3]) : 16;
  return conveyor::Run(argv[1], gib, tensors);
}

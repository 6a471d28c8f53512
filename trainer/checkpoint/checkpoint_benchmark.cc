// Save and load bandwidth of the checkpoint format on this machine's disk, for the
// docs/benchmarks.md (a model of at least 1 GB of state).
//
//   checkpoint_benchmark DIR [GIB=1] [TENSORS=16]
//
// One rank saves GIB GiB of fp32 in TENSORS square-ish tensors (blocking save: write,
// checksum, fsync, commit), then loads them back in the same layout (direct reads)
// and as TP rank 0 of 2 along columns (strided reads through a buffer). Numbers
// include fsync but not the page cache's state: drop caches before loading for cold
// reads. Ends non-zero if anything fails or a value comes back wrong.
//
// Disks here are shared and their rate varies several-fold from one minute to the next,
// so the raw disk is measured in the same call, between the saves: the same number of
// bytes appended to one file in 8 MiB pieces and fsynced (what `dd bs=8M conv=fsync`
// does), and each save's write is reported as a fraction of that rate.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "parallel/self_communicator.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

float ExpectedValue(int tensor, int64_t i) { return static_cast<float>((i * 7 + tensor) % 1000); }

// `count` tensors of `rows` x `cols` fp32 values and the shard references a save reads.
struct BenchmarkTensors {
  int64_t rows = 0, cols = 4096;
  double gb = 0;
  std::vector<std::vector<float>> data;
  std::vector<TensorShardRef> shards;
};

BenchmarkTensors MakeTensors(double gib, int count) {
  BenchmarkTensors t;
  const int64_t total = static_cast<int64_t>(gib * (int64_t{1} << 30) / sizeof(float));
  t.rows = std::max<int64_t>(1, total / count / t.cols);
  const int64_t n = t.rows * t.cols;
  t.gb = static_cast<double>(n * count) * sizeof(float) / 1e9;
  t.data.assign(count, std::vector<float>(n));
  for (int k = 0; k < count; ++k) {
    for (int64_t i = 0; i < n; ++i) t.data[k][i] = ExpectedValue(k, i);
    t.shards.push_back({absl::StrCat("layers.", k, ".weight"),
                        {t.rows, t.cols},
                        ElementRange(0, n),
                        t.data[k].data(),
                        n});
  }
  return t;
}

struct SaveTimes {
  double snapshot = 0, write = 0, commit = 0;
  // The raw disk's time for the same bytes: the mean of one write just before this
  // save and one just after it, so that neither side always goes first.
  double raw_write = 0;
};

// Seconds to append `bytes` to a new file in 8 MiB pieces and fsync it; the file is
// removed afterwards.
absl::StatusOr<double> RawWriteSeconds(const std::string& dir, int64_t bytes) {
  constexpr int64_t kPiece = int64_t{8} << 20;
  const std::vector<char> piece(kPiece, 'x');
  const std::string path = JoinPath(dir, "raw_disk_probe.bin");
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(path));
  for (int64_t done = 0; done < bytes; done += kPiece) {
    RETURN_IF_ERROR(file.Append(piece.data(), std::min(kPiece, bytes - done)));
  }
  RETURN_IF_ERROR(file.SyncAndClose());
  const double seconds = Seconds(start);
  RETURN_IF_ERROR(RemoveFile(path));
  return seconds;
}

// Two saves: the first allocates its host buffer, the second reuses it, as
// AsyncCheckpointSaver does from the second save on.
absl::StatusOr<std::array<SaveTimes, 2>> SaveTwice(const std::string& dir,
                                                   const std::vector<TensorShardRef>& shards) {
  SelfCommunicator world;
  CheckpointState state;
  std::array<SaveTimes, 2> times;
  std::unique_ptr<float[]> buffer;
  int64_t capacity = 0;
  int64_t bytes = 0;
  for (const TensorShardRef& shard : shards) bytes += shard.n * int64_t{sizeof(float)};
  ASSIGN_OR_RETURN(double raw_before, RawWriteSeconds(dir, bytes));
  for (int k = 0; k < 2; ++k) {
    state.iteration = k + 1;
    CheckpointWriter writer(dir);
    writer.AdoptBuffer(std::move(buffer), capacity);
    auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(writer.Snapshot(state, shards, world, SnapshotMode::kCopy)) << "save failed";
    times[k].snapshot = Seconds(start);
    RETURN_IF_ERROR(writer.Write()) << "save failed";
    times[k].write = writer.write_stats().seconds;
    start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(writer.Commit(world)) << "save failed";
    times[k].commit = Seconds(start);
    buffer = writer.TakeBuffer(&capacity);
    ASSIGN_OR_RETURN(const double raw_after, RawWriteSeconds(dir, bytes));
    times[k].raw_write = (raw_before + raw_after) / 2;
    raw_before = raw_after;
  }
  return times;
}

// Every 4099th value of every tensor is back.
absl::Status CheckValues(const BenchmarkTensors& t) {
  for (size_t k = 0; k < t.data.size(); ++k) {
    for (int64_t i = 0; i < t.rows * t.cols; i += 4099) {
      if (t.data[k][i] != ExpectedValue(static_cast<int>(k), i)) {
        return absl::DataLossError(absl::StrCat("wrong value in tensor ", k, " at ", i));
      }
    }
  }
  return absl::OkStatus();
}

struct LoadTimes {
  double open = 0;
  LoadStats same, resharded;
};

// Loads in the same layout (checking the values), then the left half of the columns,
// as TP rank 0 of 2 on a row-parallel layer.
absl::StatusOr<LoadTimes> LoadBack(const std::string& dir, BenchmarkTensors& t) {
  for (auto& d : t.data) std::fill(d.begin(), d.end(), -1.0f);
  LoadTimes times;
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const LoadedCheckpoint ckpt, OpenCheckpoint(dir, std::nullopt),
                   _ << "load failed");
  times.open = Seconds(start);
  RETURN_IF_ERROR(LoadTensors(ckpt, t.shards, &times.same)) << "load failed";
  RETURN_IF_ERROR(CheckValues(t));
  std::vector<TensorShardRef> halves;
  for (size_t k = 0; k < t.shards.size(); ++k) {
    halves.push_back({t.shards[k].name,
                      {t.rows, t.cols},
                      {{0, t.cols / 2, t.rows, t.cols}},
                      t.data[k].data(),
                      t.rows * t.cols / 2});
  }
  RETURN_IF_ERROR(LoadTensors(ckpt, halves, &times.resharded)) << "resharded load failed";
  return times;
}

void PrintReport(const std::string& dir, const BenchmarkTensors& t,
                 const std::array<SaveTimes, 2>& saves, const LoadTimes& loads) {
  const double gb = t.gb;
  std::printf("checkpoint of %.2f GB in %zu tensors at %s\n", gb, t.shards.size(), dir.c_str());
  for (int k = 0; k < 2; ++k) {
    std::printf("  save %d: snapshot (%s)  %7.3f s  %6.2f GB/s\n", k + 1,
                k == 0 ? "new buffer   " : "reused buffer", saves[k].snapshot,
                gb / saves[k].snapshot);
    std::printf("          write (crc32c, write, fsync)  %7.3f s  %6.2f GB/s  (%.2f x the raw disk)\n",
                saves[k].write, gb / saves[k].write, saves[k].raw_write / saves[k].write);
    std::printf("          raw disk, same bytes (before/after) %7.3f s  %6.2f GB/s\n",
                saves[k].raw_write, gb / saves[k].raw_write);
    std::printf("          commit (manifest, renames)    %7.3f s\n", saves[k].commit);
  }
  std::printf("  open (manifest, index, stat)          %7.3f s\n", loads.open);
  std::printf("  load, same layout                     %7.3f s  %6.2f GB/s\n", loads.same.seconds,
              loads.same.bytes_read / 1e9 / loads.same.seconds);
  const LoadStats& half = loads.resharded;
  std::printf(
      "  load, TP2 column half                 %7.3f s  %6.2f GB/s read (%.2f GB for %.2f GB "
      "wanted)\n",
      half.seconds, half.bytes_read / 1e9 / half.seconds, half.bytes_read / 1e9, gb / 2);
}

int Run(const std::string& dir, double gib, int count) {
  BenchmarkTensors tensors = MakeTensors(gib, count);
  // A save goes into an existing folder (the writer never creates --save itself).
  RemoveTree(dir).IgnoreError();
  const absl::Status made = MakeDirs(dir);
  absl::StatusOr<std::array<SaveTimes, 2>> saves =
      made.ok() ? SaveTwice(dir, tensors.shards) : absl::StatusOr<std::array<SaveTimes, 2>>(made);
  absl::StatusOr<LoadTimes> loads =
      saves.ok() ? LoadBack(dir, tensors) : absl::StatusOr<LoadTimes>(saves.status());
  if (!loads.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loads.status().message()).c_str());
    return 1;
  }
  PrintReport(dir, tensors, *saves, *loads);
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

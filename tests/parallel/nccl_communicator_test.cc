// The NCCL backend on a GPU machine. CUDA is touched only inside forked ranks (a
// CUDA context does not survive fork), including the probe that decides to skip.
// One GPU: a one-rank NCCL group (NCCL refuses two ranks on one device); two or
// more: a two-rank group as well.
#include "parallel/nccl_communicator.h"

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cuda_runtime.h"
#include "gtest/gtest.h"
#include "parallel/directory_store.h"
#include "parallel/group.h"
#include "parallel/launcher.h"
#include "runtime/dtype.h"
#include "tests/parallel/gpu_count.h"
#include "tests/parallel/multi_rank.h"

namespace conveyor {
namespace {

using testing_util::CountGpusInChild;
using testing_util::Fail;

#define CHECK_OK(expr)                                                        \
  do {                                                                        \
    const absl::Status _s = (expr);                                           \
    if (!_s.ok()) return Fail(env, absl::StrCat(#expr, ": ", _s.ToString())); \
  } while (0)
#define CHECK_CUDA(expr)                                                                        \
  do {                                                                                          \
    const cudaError_t _e = (expr);                                                              \
    if (_e != cudaSuccess) return Fail(env, absl::StrCat(#expr, ": ", cudaGetErrorString(_e))); \
  } while (0)

template <typename T>
Buffer OnDevice(T* data, int64_t n) {
  return MakeBuffer(data, n, MemoryKind::kDevice);
}

int CheckNccl(const RankEnvironment& env) {
  GroupSpec spec;
  for (int r = 0; r < env.world_size; ++r) spec.global_ranks.push_back(r);
  spec.name = GroupName("world", spec.global_ranks);
  spec.rank = env.rank;
  auto comm_or = NcclCommunicator::Create(spec, DirectoryRendezvous(env.run_dir), env.local_rank,
                                          absl::Seconds(60));
  if (!comm_or.ok()) return Fail(env, comm_or.status().ToString());
  Communicator& comm = **comm_or;
  const int s = comm.size(), me = comm.rank();
  const int64_t k = 1000;
  float* d_in = nullptr;
  float* d_out = nullptr;
  CHECK_CUDA(cudaMalloc(&d_in, s * k * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_out, s * k * sizeof(float)));
  std::vector<float> host(s * k), back(s * k);

  // All-reduce of small integers: exact whatever the order.
  for (int64_t i = 0; i < s * k; ++i) host[i] = static_cast<float>((i % 7) + me);
  CHECK_CUDA(cudaMemcpy(d_in, host.data(), s * k * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_OK(comm.AllReduceSum(OnDevice(d_in, s * k)));
  CHECK_CUDA(cudaMemcpy(back.data(), d_in, s * k * sizeof(float), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < s * k; ++i) {
    if (back[i] != s * (i % 7) + s * (s - 1) / 2.0f) return Fail(env, "AllReduceSum wrong");
  }
  // Reduce-scatter then all-gather reproduces the all-reduce.
  for (int64_t i = 0; i < s * k; ++i) host[i] = static_cast<float>((i % 5) + me);
  CHECK_CUDA(cudaMemcpy(d_in, host.data(), s * k * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_OK(comm.ReduceScatterSum(OnDevice(d_in, s * k), OnDevice(d_out + me * k, k)));
  CHECK_OK(comm.AllGather(OnDevice(d_out + me * k, k), OnDevice(d_out, s * k)));
  CHECK_CUDA(cudaMemcpy(back.data(), d_out, s * k * sizeof(float), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < s * k; ++i) {
    if (back[i] != s * (i % 5) + s * (s - 1) / 2.0f) return Fail(env, "RS + AG wrong");
  }
  // Broadcast from the last rank.
  for (int64_t i = 0; i < k; ++i) host[i] = static_cast<float>(me * 1000 + i);
  CHECK_CUDA(cudaMemcpy(d_in, host.data(), k * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_OK(comm.Broadcast(OnDevice(d_in, k), s - 1));
  CHECK_CUDA(cudaMemcpy(back.data(), d_in, k * sizeof(float), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < k; ++i) {
    if (back[i] != (s - 1) * 1000 + i) return Fail(env, "Broadcast wrong");
  }
  // Max in double, a ring of point-to-point messages, and a barrier.
  double* d_max = nullptr;
  CHECK_CUDA(cudaMalloc(&d_max, sizeof(double)));
  const double mine = me + 0.5;
  CHECK_CUDA(cudaMemcpy(d_max, &mine, sizeof(double), cudaMemcpyHostToDevice));
  CHECK_OK(comm.AllReduceMax(OnDevice(d_max, 1)));
  double max = 0;
  CHECK_CUDA(cudaMemcpy(&max, d_max, sizeof(double), cudaMemcpyDeviceToHost));
  if (max != s - 0.5) return Fail(env, "AllReduceMax wrong");
  const int next = (me + 1) % s, prev = (me + s - 1) % s;
  for (int64_t i = 0; i < k; ++i) host[i] = static_cast<float>(me);
  CHECK_CUDA(cudaMemcpy(d_in, host.data(), k * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_OK(
      comm.BatchSendRecv({{true, next, OnDevice(d_in, k)}, {false, prev, OnDevice(d_out, k)}}));
  CHECK_CUDA(cudaMemcpy(back.data(), d_out, k * sizeof(float), cudaMemcpyDeviceToHost));
  if (back[0] != prev || back[k - 1] != prev) return Fail(env, "BatchSendRecv wrong");
  // bf16 as bf16: an in-place reduce-scatter of small integers (exact in bf16's 8
  // bits), then an in-place all-gather, on half the bytes of the fp32 buffers.
  std::vector<BFloat16> half(s * k), half_back(s * k);
  for (int64_t i = 0; i < s * k; ++i) half[i] = ToBFloat16(static_cast<float>((i % 3) + me));
  CHECK_CUDA(cudaMemcpy(d_in, half.data(), s * k * 2, cudaMemcpyHostToDevice));
  BFloat16* d_half = reinterpret_cast<BFloat16*>(d_in);
  CHECK_OK(comm.ReduceScatterSum(OnDevice(d_half, s * k), OnDevice(d_half + me * k, k)));
  CHECK_OK(comm.AllGather(OnDevice(d_half + me * k, k), OnDevice(d_half, s * k)));
  CHECK_CUDA(cudaMemcpy(half_back.data(), d_in, s * k * 2, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < s * k; ++i) {
    if (ToFloat(half_back[i]) != s * (i % 3) + s * (s - 1) / 2.0f) return Fail(env, "bf16 wrong");
  }
  CHECK_OK(comm.Barrier());
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_max);
  std::printf("rank %d: NCCL group of %d passed\n", me, s);
  return 0;
}

TEST(NcclCommunicatorTest, CollectivesOnGpus) {
  std::string why;
  const int devices = CountGpusInChild(&why);
  if (devices == 0) GTEST_SKIP() << "no CUDA device (" << why << "); NCCL needs a GPU";
  for (int nproc : {1, 2}) {
    if (nproc > devices) {
      std::printf("skipping the %d-rank group: only %d CUDA device(s)\n", nproc, devices);
      continue;
    }
    std::ostringstream err;
    EXPECT_EQ(LaunchLocalRanks(nproc, CheckNccl, err), 0) << err.str();
  }
}

}  // namespace
}  // namespace conveyor

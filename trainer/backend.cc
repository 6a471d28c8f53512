#include "trainer/backend.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_format.h"
#include "parallel/nccl_transport.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/bf16_gemm.h"
#include "runtime/cpu/cpu_bf16_ops.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/cuda_optimizer_ops.h"
#include "runtime/cuda/device.h"

namespace conveyor {

namespace {

// Which attention a CUDA run gets, when it is not cuDNN's flash attention: said up front,
// since the built-in kernel (fp32 math on CUDA cores) is several times slower.
std::string BuiltInAttentionNote(const Config& config) {
  if (!config.precision().bf16()) {
    return "; attention in the built-in kernel (cuDNN's flash attention needs --bf16)";
  }
  if (config.model().attention_dropout() > 0) {
    return absl::StrFormat(
        "; attention in the built-in kernel (--attention-dropout %g: cuDNN's flash attention "
        "cannot draw Conveyor's dropout mask; --attention-dropout 0 uses it)",
        config.model().attention_dropout());
  }
  return "";
}

// --bf16 on the CPU: the GEMMs in bf16 on a CPU with AVX-512 BF16 (the binary runs on
// any x86-64 and asks the CPU), else emulated; fp32 master weights and gradients either way.
Backend CpuBf16Backend() {
  if (cpu::HasBf16Gemm()) {
    return {&CpuBf16Ops::Get(), &CpuOptimizerOps::Get(),
            "CPU backend, bf16 (--bf16: GEMMs on the CPU's AVX-512 BF16 with fp32 "
            "accumulation, the other ops on bf16 values in fp32 arithmetic; fp32 master "
            "weights and gradients)"};
  }
  static const Bf16EmulationOps* emulated = new Bf16EmulationOps(&CpuOps::Get());
  return {emulated, &CpuOptimizerOps::Get(),
          "CPU backend, bf16 emulated (--bf16 on a CPU without AVX-512 BF16: bf16 activations "
          "and weight copies, fp32 arithmetic, master weights and gradients)"};
}

}  // namespace

Backend CpuBackend() { return {&CpuOps::Get(), &CpuOptimizerOps::Get(), "CPU backend (fp32)"}; }

absl::StatusOr<Backend> StartBackend(const ResolvedConfig& resolved, int local_rank) {
  const Config& config = resolved.config();
  if (!resolved.on_gpu()) {
    return config.precision().bf16() ? CpuBf16Backend() : CpuBackend();
  }
  if (config.model().num_experts() > 0) {
    return absl::FailedPreconditionError(
        "--num-experts with --device cuda: the mixture of experts' CUDA kernels (token "
        "permutation, runtime/cuda/moe_kernels.cu) have never run on a GPU (cuda_backend_test "
        "checks them when one is there); run it with --device cpu");
  }
  if (resolved.model_shape().mla.enabled) {  // --device auto that found a GPU
    return absl::FailedPreconditionError(
        "--multi-latent-attention on a GPU: the CUDA attention kernels take value heads as "
        "wide as the query and key heads only, and multi-latent attention has not run on a "
        "GPU; run it with --device cpu");
  }
  if (!resolved.model_shape().layer_windows.empty()) {  // --device auto that found a GPU
    return absl::FailedPreconditionError(
        "--window-size on a GPU: the sliding window's CUDA kernels are written and compiled but "
        "have never run on a GPU (cuda_attention_test checks them when one is there); run it "
        "with --device cpu");
  }
  const GpuInfo gpus = ProbeGpus();
  if (gpus.count == 0) {
    return absl::FailedPreconditionError("--device cuda: no usable CUDA device (" + gpus.error +
                                         "); use --device cpu");
  }
  if (local_rank >= gpus.count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--device cuda: local rank %d has no GPU of its own (%d visible); start at most one "
        "rank per GPU",
        local_rank, gpus.count));
  }
  const cudaError_t selected = cudaSetDevice(local_rank);
  if (selected != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("--device cuda: cudaSetDevice(%d): %s", local_rank,
                                               cudaGetErrorString(selected)));
  }
  cuda::InstallDeviceMemory();
  const DType dtype = config.precision().bf16() ? DType::kBFloat16 : DType::kFloat32;
  // One GPU per process: the objects outlive every tensor (a process may train in several
  // settings, e.g. a test comparing them).
  const bool sync = config.parallel().cuda_synchronize_each_op();
  static const CudaOps* ops_by_kind[2][2] = {};  // [bf16][synchronize_each_op]
  const CudaOps*& ops = ops_by_kind[dtype == DType::kBFloat16][sync];
  if (ops == nullptr) ops = new CudaOps(dtype, sync);
  static const CudaOptimizerOps* optimizer = new CudaOptimizerOps();
  static const NcclTransport* transport = new NcclTransport(local_rank);
  return Backend{
      ops, optimizer,
      absl::StrFormat("%s, computing in %s (fp32 master weights and gradients)%s",
                      DescribeBackend(gpus), DTypeName(dtype), BuiltInAttentionNote(config)),
      transport};
}

std::string DeviceMemorySummary(const Backend& backend) {
  if (backend.ops->device() != Device::kCuda) return "";
  const AllocatorStats s = cuda::DeviceMemoryStats();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::StrFormat(
      "GPU memory: peak %.2f GiB in tensors, %.2f GiB reserved; cudaMalloc %d times for %d "
      "allocations",
      s.peak_bytes_in_use / kGiB, s.peak_bytes_reserved / kGiB, s.num_backing_allocations,
      s.num_allocations);
}

}  // namespace conveyor

// The start of every test that needs a CUDA device: where none is usable it skips the
// test with the reason (no driver, no device, ...), so that `bazel test //...` stays
// green on CPU-only machines. A macro because GTEST_SKIP returns from the function it is
// written in (the fixture's SetUp or the test body).
#ifndef CONVEYOR_TESTS_RUNTIME_SKIP_WITHOUT_GPU_H_
#define CONVEYOR_TESTS_RUNTIME_SKIP_WITHOUT_GPU_H_

#include "gtest/gtest.h"
#include "runtime/cuda/device.h"

// `what` names what the skipped test checks, e.g. "the CUDA memory".
#define SKIP_WITHOUT_GPU(what)                                          \
  do {                                                                  \
    const ::conveyor::GpuInfo conveyor_gpus_ = ::conveyor::ProbeGpus(); \
    if (conveyor_gpus_.count == 0) {                                    \
      GTEST_SKIP() << "no usable CUDA device (" << conveyor_gpus_.error \
                   << "); run on a GPU machine to check " << (what);    \
    }                                                                   \
  } while (0)

#endif  // CONVEYOR_TESTS_RUNTIME_SKIP_WITHOUT_GPU_H_

// test/gpu/versions_test.cpp — which driver, CUDA runtime, cuDNN, cuBLAS and NCCL this process actually
// loaded: their versions as the libraries themselves report them (not the headers built against, which are
// printed beside them) and the file each came from (dladdr of one of its functions). One line
//   RESULT versions driver=13000 runtime=13000 cudnn=91400 cublas=13.1.0 nccl=22809 built_against=...
// and one "RESULT loaded lib=NAME path=FILE" per library, to stdout and $HETRAIN_GPU_RESULTS (the first lines
// of scripts/gpu-first-run.sh's summary). Needs no GPU: every query here works without one (driver=0 when no
// driver is installed); a CPU-only build reports itself skipped.
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_util.hpp"

#ifdef HETRAIN_WITH_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <library_types.h>
#include <nccl.h>

namespace {
std::string file_of(const void* fn) {
  Dl_info info{};
  if (dladdr(fn, &info) && info.dli_fname) return info.dli_fname;
  return "?";
}
}  // namespace
#endif

TEST(GpuVersions, LoadedLibraries) {
#ifndef HETRAIN_WITH_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int driver = 0, runtime = 0, nccl = 0, major = 0, minor = 0, patch = 0;
  EXPECT_EQ(cudaRuntimeGetVersion(&runtime), cudaSuccess);
  (void)cudaDriverGetVersion(&driver);  // 0 without a driver
  EXPECT_EQ(ncclGetVersion(&nccl), ncclSuccess);
  EXPECT_EQ(cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetProperty(PATCH_LEVEL, &patch), CUBLAS_STATUS_SUCCESS);
  const size_t cudnn = cudnnGetVersion();
  const size_t cudnn_cudart = cudnnGetCudartVersion();
  gpu_test::emit_result(
      "RESULT versions driver=" + std::to_string(driver) + " runtime=" + std::to_string(runtime) +
      " cudnn=" + std::to_string(cudnn) + " cudnn_cudart=" + std::to_string(cudnn_cudart) + " cublas=" +
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) +
      " nccl=" + std::to_string(nccl) + " built_against=runtime:" + std::to_string(CUDART_VERSION) +
      ",cudnn:" + std::to_string(CUDNN_VERSION) + ",nccl:" + std::to_string(NCCL_VERSION_CODE) +
      " (driver/runtime: 1000*major + 10*minor; cudnn: 10000*major + 100*minor + patch;"
      " nccl: 10000*major + 100*minor + patch)");
  const std::pair<const char*, const void*> libs[] = {
      {"cudart", reinterpret_cast<const void*>(&cudaRuntimeGetVersion)},
      {"cudnn", reinterpret_cast<const void*>(&cudnnGetVersion)},
      {"cublas", reinterpret_cast<const void*>(&cublasGetProperty)},
      {"nccl", reinterpret_cast<const void*>(&ncclGetVersion)},
  };
  for (const auto& [name, fn] : libs)
    gpu_test::emit_result(std::string("RESULT loaded lib=") + name + " path=" + file_of(fn));
  // The driver library (libcuda.so.1) is opened by the runtime itself, at its first call that needs it.
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    void* sym = dlsym(h, "cuDriverGetVersion");
    gpu_test::emit_result(std::string("RESULT loaded lib=driver path=") + (sym ? file_of(sym) : std::string("?")));
    dlclose(h);
  } else {
    gpu_test::emit_result("RESULT loaded lib=driver path=none (libcuda.so.1 is not loaded: no NVIDIA driver here)");
  }
  EXPECT_GT(runtime, 0);
  EXPECT_GT(cudnn, 0u);
#endif
}

// test/gpu/on_host/nccl.cpp — NCCL for a communicator of one rank, on the host, for test_gpu_on_host and
// hetrain-on-host: the reduction of one rank is its own data. A GPU job of one rank (all its ranks on GPUs,
// so NCCL) runs end to end; more ranks need more GPUs, which the host runtime does not have. These
// definitions take the place of libnccl's for the program.
#include <nccl.h>

#include <cstdio>
#include <cstring>

#include "runtime.hpp"

struct ncclComm {
  int rank = 0;
};

extern "C" {

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank, ncclConfig_t*) {
  *comm = nullptr;
  if (nranks != 1 || rank != 0) {
    std::fprintf(stderr, "cuda on host: ncclCommInitRankConfig: %d ranks; the host runtime has one GPU, so one rank\n",
                 nranks);
    return ncclInvalidUsage;
  }
  *comm = new ncclComm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                           ncclComm_t comm, cudaStream_t stream) {
  size_t bytes = 0;
  switch (type) {
    case ncclFloat32: bytes = 4; break;
    case ncclFloat16:
    case ncclBfloat16: bytes = 2; break;
    default: std::fprintf(stderr, "cuda on host: ncclAllReduce: a type hetrain does not reduce\n"); return ncclInvalidArgument;
  }
  bytes *= count;
  if (!comm || !hetrain::on_host::in_device_memory(send, bytes) || !hetrain::on_host::in_device_memory(recv, bytes)) {
    std::fprintf(stderr, "cuda on host: ncclAllReduce: no communicator, or a buffer outside device memory\n");
    return ncclInvalidArgument;
  }
  if (send != recv) std::memmove(recv, send, bytes);  // sum, average, min or max of one rank's data
  hetrain::on_host::note_work(stream);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
}  // extern "C"

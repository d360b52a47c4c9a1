// test/gpu/on_host/nccl.cpp — NCCL for a communicator of one rank, on the host, for test_gpu_on_host and
// hetrain-on-host: the reduction of one rank is its own data. A non-blocking communicator's calls return
// ncclInProgress and ncclCommGetAsyncError reports it once, so the callers' wait loops run. A GPU job of one rank (all its ranks on GPUs,
// so NCCL) runs end to end; more ranks need more GPUs, which the host runtime does not have. These
// definitions take the place of libnccl's for the program.
#include <nccl.h>

#include <cstdio>
#include <cstring>

#include "runtime.hpp"

struct ncclComm {
  bool blocking = true;
  bool in_progress = false;  // a non-blocking call's work, reported once by ncclCommGetAsyncError
};

extern "C" {

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank, ncclConfig_t* config) {
  *comm = nullptr;
  if (nranks != 1 || rank != 0) {
    std::fprintf(stderr, "cuda on host: ncclCommInitRankConfig: %d ranks; the host runtime has one GPU, so one rank\n",
                 nranks);
    return ncclInvalidUsage;
  }
  *comm = new ncclComm;
  // A non-blocking communicator (config.blocking = 0) is still being set up when the call returns, as NCCL's.
  (*comm)->blocking = !config || config->blocking != 0;
  (*comm)->in_progress = !(*comm)->blocking;
  return (*comm)->in_progress ? ncclInProgress : ncclSuccess;
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
  const char *s = static_cast<const char*>(send), *r = static_cast<const char*>(recv);
  if (s != r && s < r + bytes && r < s + bytes) {
    std::fprintf(stderr, "cuda on host: ncclAllReduce: send and receive buffers overlap without being the same\n");
    return ncclInvalidArgument;
  }
  if (!hetrain::on_host::usable_stream(stream, "ncclAllReduce")) return ncclUnhandledCudaError;
  if (s != r) std::memcpy(recv, send, bytes);  // sum, average, min or max of one rank's data
  hetrain::on_host::note_work(stream);
  comm->in_progress = !comm->blocking;
  return comm->in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  *error = comm->in_progress ? ncclInProgress : ncclSuccess;
  comm->in_progress = false;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  comm->in_progress = !comm->blocking;
  return comm->in_progress ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
}  // extern "C"

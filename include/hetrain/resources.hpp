// hetrain/resources.hpp — how much memory and disk space is left, so that a size that cannot fit is refused
// with one line before any work starts, instead of failing (std::bad_alloc, a full disk) or thrashing later.
#pragma once

#include <cstdint>
#include <string>

namespace hetrain {

// Bytes this process can still allocate: the kernel's MemAvailable, lowered to what the address-space
// limit (ulimit -v) leaves above the process's current size when such a limit is set. UINT64_MAX when
// neither can be read.
uint64_t available_memory_bytes();
// This process's bytes in physical memory now (VmRSS) and at the most so far (VmHWM); 0 where /proc
// cannot say. For the metrics' host_mib and host_peak_mib (docs/report.md).
struct ResidentMemory {
  uint64_t now_bytes = 0, peak_bytes = 0;
};
ResidentMemory resident_memory();
// Bytes an unprivileged writer can still put into the file system holding `folder`; UINT64_MAX when it
// cannot be asked (the write itself reports the problem then).
uint64_t free_disk_bytes(const std::string& folder);
// "3.2 GiB", "512 KiB", "17 bytes".
std::string bytes_text(double bytes);

// Throws hetrain::Error "<what> needs about X of memory, but only Y is available" when `bytes` (an
// estimate, a double so that sizes beyond 2^64 compare correctly) exceeds available_memory_bytes().
void check_memory_for(double bytes, const std::string& what);
// The same for disk space in the folder that will hold `path` (a file to be written).
void check_disk_for(double bytes, const std::string& path, const std::string& what);

}  // namespace hetrain

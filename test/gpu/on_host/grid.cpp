// test/gpu/on_host/grid.cpp — a kernel launch on the host (cuda_on_host.hpp): each block's threads are fibers
// (Boost.Context) run by one scheduler on the calling thread. A fiber runs until it finishes or reaches a
// barrier: __syncthreads, where the whole block must meet, or a warp shuffle, where its 32 lanes must. When
// no fiber can run, the scheduler releases a warp whose lanes all wait at a shuffle (handing each lane its
// partner's value) or, failing that, the block if every thread waits at __syncthreads. Anything else is a
// kernel that would hang or misbehave on a GPU, and fails the launch.
//
// Fibers cost a switch per thread, too slow for the element-wise kernels' millions of threads. So only block
// 0 runs as fibers; when none of its threads reached a barrier, the later blocks' threads are plain calls,
// one after another, and a barrier reached there fails the launch (a kernel whose blocks differ in that way
// is not emulated; none of ours does).
#include <boost/context/fiber.hpp>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_on_host.hpp"
#include "runtime.hpp"

namespace hetrain::on_host {

thread_local Index3 thread_idx, block_idx, block_dim, grid_dim;

namespace {
namespace ctx = boost::context;
constexpr int kWarp = 32;
constexpr size_t kFiberStack = 128 * 1024;

enum class Wait { None, Block, Shuffle, Finished };

// Boost.Context's stack allocator interface over a stack of ours, kept between launches.
struct KeptStack {
  char* base;
  ctx::stack_context allocate() {
    ctx::stack_context sc;
    sc.size = kFiberStack;
    sc.sp = base + kFiberStack;  // stacks grow down
    return sc;
  }
  void deallocate(ctx::stack_context&) noexcept {}
};

struct Fiber {
  ctx::fiber resume_at;  // empty once the fiber finished
  void* sanitizer_stack = nullptr;  // AddressSanitizer's record of the stack this fiber left
  Wait wait = Wait::None;
  uint64_t offered = 0, received = 0;  // a shuffle's own value, and its partner's
  int lane_mask = 0;
};

struct Grid {
  const char* kernel = "";
  const std::function<void()>* body = nullptr;
  ctx::fiber scheduler;  // where the running fiber returns to
  void* scheduler_sanitizer_stack = nullptr;
  const void* scheduler_stack_bottom = nullptr;  // the calling thread's stack, as AddressSanitizer reports it
  size_t scheduler_stack_size = 0;
  std::vector<std::unique_ptr<char[]>> stacks;  // kept between launches of this thread (outlive the fibers)
  std::vector<Fiber> fibers;
  int current = -1;
  bool direct = false;  // threads are plain calls (see the file's header)
  bool waited = false;  // some fiber of this launch reached a barrier
  std::string problem;  // the first thing that went wrong, if any
};

thread_local Grid grid_state;

// AddressSanitizer (the build of test_gpu_on_host uses it) must be told of every switch between stacks.
// `save` null: the fiber that leaves is done.
void switching_to(void** save, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(save, bottom, size);
#endif
}
void switched(void* saved, const void** old_bottom, size_t* old_size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(saved, old_bottom, old_size);
#endif
}

ctx::fiber fiber_main(ctx::fiber&& scheduler) {
  Grid& g = grid_state;
  g.scheduler = std::move(scheduler);
  switched(nullptr, &g.scheduler_stack_bottom, &g.scheduler_stack_size);
  (*g.body)();
  g.fibers[size_t(g.current)].wait = Wait::Finished;
  switching_to(nullptr, g.scheduler_stack_bottom, g.scheduler_stack_size);
  return std::move(g.scheduler);
}

// The scheduler's switch into fiber t, until it comes back.
void resume(Grid& g, int t) {
  g.current = t;
  thread_idx = Index3{unsigned(t), 0, 0};
  Fiber& f = g.fibers[size_t(t)];
  switching_to(&g.scheduler_sanitizer_stack, g.stacks[size_t(t)].get(), kFiberStack);
  f.resume_at = std::move(f.resume_at).resume();
  switched(g.scheduler_sanitizer_stack, nullptr, nullptr);
}

// Hands control back to the scheduler until the barrier the fiber waits at is released.
void wait_at(Wait what) {
  Grid& g = grid_state;
  if (g.direct) {
    if (g.problem.empty()) g.problem = "a barrier in a block after block 0, whose threads reached none (not emulated)";
    return;
  }
  g.waited = true;
  Fiber& f = g.fibers[size_t(g.current)];
  f.wait = what;
  switching_to(&f.sanitizer_stack, g.scheduler_stack_bottom, g.scheduler_stack_size);
  g.scheduler = std::move(g.scheduler).resume();
  switched(f.sanitizer_stack, &g.scheduler_stack_bottom, &g.scheduler_stack_size);
}

// Releases every warp whose lanes all wait at a shuffle; false when there was none.
bool release_shuffles(Grid& g, int threads) {
  bool released = false;
  for (int first = 0; first < threads; first += kWarp) {
    const int lanes = std::min(kWarp, threads - first);
    bool all = true;
    for (int l = 0; l < lanes && all; ++l) all = g.fibers[size_t(first + l)].wait == Wait::Shuffle;
    if (!all) continue;
    if (lanes != kWarp && g.problem.empty())
      g.problem = "a full-mask shuffle in a warp of " + std::to_string(lanes) + " threads (block size " +
                  std::to_string(threads) + " is not a multiple of 32)";
    for (int l = 0; l < lanes; ++l) {
      Fiber& f = g.fibers[size_t(first + l)];
      const int partner = l ^ f.lane_mask;
      f.received = partner < lanes ? g.fibers[size_t(first + partner)].offered : f.offered;
    }
    for (int l = 0; l < lanes; ++l) g.fibers[size_t(first + l)].wait = Wait::None;
    released = true;
  }
  return released;
}

// Runs one block's threads as plain calls; false (with g.problem set) when one reached a barrier.
bool run_block_directly(Grid& g, int threads) {
  for (int t = 0; t < threads && g.problem.empty(); ++t) {
    g.current = t;
    thread_idx = Index3{unsigned(t), 0, 0};
    (*g.body)();
  }
  return g.problem.empty();
}

// Runs one block's threads as fibers to their end; false (with g.problem set) when they can no longer all
// proceed.
bool run_block(Grid& g, int threads) {
  for (int t = 0; t < threads; ++t) {
    Fiber& f = g.fibers[size_t(t)];
    f.resume_at = ctx::fiber(std::allocator_arg, KeptStack{g.stacks[size_t(t)].get()}, fiber_main);
    f.wait = Wait::None;
  }
  for (;;) {
    for (int t = 0; t < threads; ++t) {
      if (g.fibers[size_t(t)].wait == Wait::None) resume(g, t);
    }
    if (!g.problem.empty()) return false;
    int finished = 0, at_block = 0;
    for (int t = 0; t < threads; ++t) {
      finished += g.fibers[size_t(t)].wait == Wait::Finished;
      at_block += g.fibers[size_t(t)].wait == Wait::Block;
    }
    if (finished == threads) return true;
    if (release_shuffles(g, threads)) continue;
    if (at_block == threads) {
      for (auto& f : g.fibers) f.wait = Wait::None;
      continue;
    }
    g.problem = at_block > 0 && at_block + finished == threads
                    ? std::to_string(at_block) + " threads wait at __syncthreads that " + std::to_string(finished) +
                          " threads of their block never reach"
                    : "threads wait at a warp shuffle that other lanes of their warp never reach";
    return false;
  }
}
}  // namespace

void sync_threads() { wait_at(Wait::Block); }

void refuse_argument(const char* kernel, int index) {
  std::fprintf(stderr, "cuda on host: kernel %s: argument %d is a pointer outside device memory\n", kernel, index);
  set_last_error(cudaErrorIllegalAddress);
}

uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width) {
  Grid& g = grid_state;
  if ((mask != 0xffffffffu || width != kWarp || lane_mask < 0 || lane_mask >= kWarp) && g.problem.empty())
    g.problem = "a shuffle other than __shfl_xor_sync(0xffffffff, v, 0..31) (not emulated)";
  Fiber& f = g.fibers[size_t(g.current)];
  f.offered = bits;
  f.lane_mask = lane_mask;
  wait_at(Wait::Shuffle);
  return g.fibers[size_t(g.current)].received;
}

void run_grid(const char* kernel, long long grid_size, long long block_size, size_t shared_bytes,
              const std::function<void()>& body) {
  // The device's limits (any GPU since compute capability 3.0): 2^31 − 1 blocks, 1024 threads, 48 KiB of
  // dynamic shared memory without opting in.
  if (grid_size < 1 || grid_size > 0x7fffffffLL || block_size < 1 || block_size > 1024 || shared_bytes > 48 * 1024) {
    std::fprintf(stderr, "cuda on host: kernel %s launched with %lld blocks of %lld threads, %zu shared bytes: "
                 "an invalid configuration\n", kernel, grid_size, block_size, shared_bytes);
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  Grid& g = grid_state;
  if (g.body) {
    std::fprintf(stderr, "cuda on host: kernel %s launched from inside kernel %s\n", kernel, g.kernel);
    set_last_error(cudaErrorLaunchFailure);
    return;
  }
  const int threads = int(block_size);
  g.kernel = kernel;
  g.body = &body;
  g.problem.clear();
  g.direct = g.waited = false;
  // Fibers a failed launch left waiting are never resumed again: kept, not destroyed (destroying one would
  // unwind its stack behind AddressSanitizer's back). Their stacks are reused, which they never notice.
  static auto* abandoned = new std::vector<ctx::fiber>;  // never destroyed: neither at exit
  static std::mutex abandoned_mutex;
  for (Fiber& f : g.fibers)
    if (f.resume_at) {
      std::lock_guard<std::mutex> lock(abandoned_mutex);
      abandoned->push_back(std::move(f.resume_at));
    }
  g.fibers.clear();
  g.fibers.resize(size_t(threads));
  while (g.stacks.size() < size_t(threads)) g.stacks.emplace_back(new char[kFiberStack]);
  block_dim = Index3{unsigned(threads), 1, 1};
  grid_dim = Index3{unsigned(grid_size), 1, 1};
  for (long long b = 0; b < grid_size; ++b) {
    block_idx = Index3{unsigned(b), 0, 0};
    if (!(g.direct ? run_block_directly(g, threads) : run_block(g, threads))) {
      std::fprintf(stderr, "cuda on host: kernel %s, block %lld of %lld (%d threads): %s\n", kernel, b, grid_size,
                   threads, g.problem.c_str());
      set_last_error(cudaErrorLaunchFailure);
      break;
    }
    g.direct = !g.waited;
  }
  g.body = nullptr;
  g.current = -1;
}

}  // namespace hetrain::on_host

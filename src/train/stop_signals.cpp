#include "train/stop_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace hetrain::train {

namespace {
std::atomic<int> g_requests{0};
std::atomic<int> g_last_signal{0};
std::atomic<bool> g_warn_armed{false};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free counter");
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");
// The warning a SIGTERM or SIGINT brings while armed, written before the handler returns (no formatting
// in the handler: write() of a ready text is async-signal-safe).
char g_warning[2][512];
size_t g_warning_size[2] = {0, 0};

void on_stop_signal(int sig) {
  if (g_requests.fetch_add(1) >= 1) {  // the second one: leave now (async-signal-safe calls only)
    const char msg[] = "hetrain: second stop signal: exiting without a checkpoint\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(128 + sig);
  }
  g_last_signal.store(sig);
  const int which = sig == SIGTERM ? 0 : sig == SIGINT ? 1 : -1;
  if (which >= 0 && g_warn_armed.exchange(false) && g_warning_size[which] > 0) {
    ssize_t ignored = ::write(STDERR_FILENO, g_warning[which], g_warning_size[which]);
    (void)ignored;
  }
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
}

int stop_requests() { return g_requests.load(); }

double mpirun_kill_grace_seconds() {
  if (!std::getenv("OMPI_MCA_orte_hnp_uri")) return -1;  // set in the processes mpirun starts
  // mpirun passes its MCA parameters (--mca NAME VALUE or OMPI_MCA_NAME) on to the processes it starts.
  const char* grace = std::getenv("OMPI_MCA_odls_base_sigkill_timeout");
  return grace && *grace ? std::atof(grace) : 1.0;
}
int last_stop_signal() { return g_last_signal.load(); }

void arm_stop_warning(bool writes_checkpoints) {
  const double grace = mpirun_kill_grace_seconds();
  if (!writes_checkpoints || grace < 0) return;  // no checkpoint to lose, or no mpirun to kill the ranks
  const char* names[2] = {"SIGTERM", "Ctrl-C (SIGINT)"};
  for (int i = 0; i < 2; ++i) {
    const int n = std::snprintf(
        g_warning[i], sizeof g_warning[i],
        "warning: %s under mpirun: mpirun kills the ranks %g s after it (Open MPI's odls_base_sigkill_timeout), "
        "and no checkpoint of this run has been timed yet: a large model's stop checkpoint may not finish. "
        "SIGUSR1 to mpirun (kill -USR1 PID) is the safe stop: mpirun passes it on and waits for the checkpoint\n",
        names[i], grace);
    g_warning_size[i] = n > 0 ? std::min(size_t(n), sizeof g_warning[i] - 1) : 0;
  }
  g_warn_armed.store(true);
}

void disarm_stop_warning() { g_warn_armed.store(false); }

}  // namespace hetrain::train

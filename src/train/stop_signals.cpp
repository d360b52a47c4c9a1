#include "train/stop_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>

namespace hetrain::train {

namespace {
std::atomic<int> g_requests{0};
std::atomic<int> g_last_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free counter");

void on_stop_signal(int sig) {
  if (g_requests.fetch_add(1) >= 1) {  // the second one: leave now (async-signal-safe calls only)
    const char msg[] = "hetrain: second stop signal: exiting without a checkpoint\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(128 + sig);
  }
  g_last_signal.store(sig);
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

}  // namespace hetrain::train

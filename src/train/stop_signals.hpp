// Preemption: SIGTERM, SIGUSR1 and SIGINT ask the run to stop at the next step boundary with a checkpoint
// (Slurm's --signal=USR1@120, scancel, mpirun forwarding ^C). A second signal ends the process at once.
// The handler only counts; the trainer reads the count and all ranks agree on it in the step's agreement.
#pragma once

namespace hetrain::train {

// Installs the handlers (idempotent). Until then the signals keep their default action.
void install_stop_handlers();
// Stop signals received so far, and the last one's number (0 when none).
int stop_requests();
int last_stop_signal();

// Under Open MPI's mpirun, a SIGTERM or SIGINT to mpirun aborts the job: the ranks are killed this many
// seconds later (odls_base_sigkill_timeout, default 1), checkpoint written or not, and their output may be
// cut before. SIGUSR1 is passed on without a kill. Negative when mpirun did not start this process.
double mpirun_kill_grace_seconds();

// Rank 0, at start-up: a SIGTERM or SIGINT that comes under mpirun before any checkpoint of this run was
// timed prints one warning that the stop checkpoint may be lost to mpirun's kill, naming SIGUSR1 (once a
// checkpoint has been timed, the checkpointer says so only when it was slower than the grace). Nothing
// without checkpoints or without mpirun.
void arm_stop_warning(bool writes_checkpoints);
void disarm_stop_warning();

}  // namespace hetrain::train

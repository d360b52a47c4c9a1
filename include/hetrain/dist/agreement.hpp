// hetrain/dist/agreement.hpp — turning one rank's failure into an error every rank throws.
//
// An error found by some ranks only (a file one node cannot read, a disk that fills up on rank 0) must not
// leave the others waiting in the next collective. These helpers run a piece of work, then agree on its
// outcome in one small collective: when it failed anywhere, every rank throws hetrain::AgreedError with the
// message of the lowest failing rank, so rank 0 prints one line and every rank exits cleanly.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace hetrain::dist {

// Collective: every rank runs `work`; if it threw hetrain::Error on any rank, all throw AgreedError with
// the lowest failing rank's message (prefixed "rank R: " when that rank is not 0).
void agree_on(MPI_Comm comm, const std::function<void()>& work);

// Collective: only rank 0 runs `work` (e.g. writing a file); the others learn whether it failed.
void agree_on_root(MPI_Comm comm, const std::function<void()>& work);

// The two halves, for callers that meet in between (a checkpoint's watched wait): runs `work` and returns
// its hetrain::Error's message ("" when it succeeded)...
std::string capture_problem(const std::function<void()>& work);
// ...and, collective, every rank passes its problem ("" = fine): all throw AgreedError when any has one.
void agree_problem(MPI_Comm comm, const std::string& problem);

}  // namespace hetrain::dist

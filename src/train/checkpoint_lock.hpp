// One live job per checkpoint folder (docs/checkpoint-format.md, "Files in the checkpoint folder"). Two jobs writing into one
// folder would prune and resume each other's checkpoints; rank 0 of each job therefore holds an fcntl lock
// on DIR/.hetrain.lock for the whole run. The kernel drops the lock when the process ends, however it
// ends, so a job that was killed never blocks the next one; the file keeps the holder's host and pid so
// that a refusal can name it, and a lock left by a job that is gone is taken over with a notice.
#pragma once

#include <string>

namespace hetrain::train {

class CheckpointLock {
 public:
  // Takes the lock of `dir` (which exists). Throws naming --checkpoint-dir and the job that holds it.
  // `taken_over` is set to the holder a job that is gone left in the file ("" when none).
  CheckpointLock(const std::string& dir, std::string& taken_over);
  ~CheckpointLock();  // empties the file (the next job has no holder to mention) and drops the lock
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hetrain::train

// hetrain/dist/powersgd.hpp — low-rank gradient compression with error feedback (--compress powersgd:R;
// Vogels, Karimireddy and Jaggi, "PowerSGD", NeurIPS 2019; docs/architecture.md, "PowerSGD").
//
// Each matrix-shaped gradient (a weight [rows, cols...] reshaped to rows × Π cols, when R·(rows + cols) is
// less than half of rows·cols) crosses between ranks as two thin factors instead of itself: with M_r this
// rank's weighted gradient b_r/B·g_r plus its error e_r,
//   P = Σ_r M_r·Q          (allreduce; Q is last step's, identical on every rank: the warm start)
//   P̂ = orthonormal columns of P (Gram–Schmidt, the same on every rank)
//   Q = Σ_r M_rᵀ·P̂         (allreduce)
//   A = P̂·Qᵀ              (the rank-R approximation of Σ_r M_r: the reduced gradient, same on every rank)
//   e_r ← M_r − b_r/B·A    (error feedback: what the approximation missed, Σ_r e_r = Σ_r M_r − A, is sent later;
//                           each rank keeps its share's part, so its error stays as large as its gradient)
// Every other parameter (biases, batch-norm scales) travels whole in the first allreduce. Both sums are
// linear in M_r, so the weights b_r/B applied before compression keep the weighted reduction the exact
// weighted mean of what is sent. Host memory only (CPU ranks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/dist/buckets.hpp"
#include "hetrain/dist/communicator.hpp"

namespace hetrain::dist {

// "none" → 0; "powersgd:R" → R (1 ≤ R ≤ 1024); throws naming --compress.
int parse_compress_rank(const std::string& text);

class PowerSgd {
 public:
  // One parameter of the flat gradient buffer: its first float and its shape.
  struct Param {
    int64_t offset = 0;
    std::vector<int64_t> shape;
  };
  // params lie in [0, count) of the buffer without overlapping; the floats between them (padding) are zero
  // in every rank's gradient and are neither sent nor written. seed draws the first Q (the same on every rank).
  // The step travels as one bucket, the whole buffer, until use_buckets() cuts it.
  PowerSgd(const std::vector<Param>& params, int64_t count, int rank, uint64_t seed);

  // The messages follow the buckets of plan_buckets (whole parameters, in the order backward finishes
  // them): each bucket's P's and whole parameters, then its Q's, cross as soon as its gradients are final.
  // The same on every rank; changes no result bit with two ranks (the sums are the same sums; with more,
  // MPI may add a smaller message's terms in another order) and nothing of the state a checkpoint keeps.
  void use_buckets(const std::vector<Bucket>& buckets);

  // Collective over comm (every rank, same step): grads (host, count floats) ← the reduced gradient of
  // this step, the same on every rank; the sums cross on `wire`. weight = b_r/B as for weighted_allreduce
  // (the weights of all ranks sum to 1). One communicator: every bucket's P's, then every Q.
  void reduce(Communicator& comm, float* grads, double weight, Wire wire = Wire::FP32);

  // The same step overlapped with backward: begin() before it, grads_final() as it finishes gradients (as
  // BucketedReduction's), progress() between layers, start_rest() after it (a rank with b_r = 0 runs
  // none), finish() to wait and write the result. P's cross on `first` and Q's on `second`, which must be
  // two communicators (each then sees its collectives in bucket order on every rank, as MPI requires,
  // though each rank starts a bucket's Q when its own P's have come back). Nothing else may start
  // reductions on them until finish() returns.
  void begin(Communicator& first, Communicator& second, float* grads, double weight, Wire wire = Wire::FP32);
  void grads_final(int64_t first_final);
  void progress();
  void start_rest() { grads_final(0); }
  void finish();

  int rank() const { return rank_; }
  int64_t count() const { return count_; }            // floats of the gradient buffer, padding included
  int64_t parameters() const { return parameters_; }  // floats of the parameters: what a whole step sends
  int64_t compressed_matrices() const { return int64_t(matrices_.size()); }
  int64_t compressed_floats() const;  // parameters that travel as factors
  int64_t floats_sent() const;        // what one step's two allreduces carry, against parameters() uncompressed
  int64_t buckets() const { return int64_t(groups_.size()); }

  // State for checkpoints: the factors Q (the warm start, the same on every rank) and this rank's error
  // (count floats, zero outside compressed matrices). A checkpoint keeps every rank's error; Σ_r error is
  // what the next step owes, so a resume on another rank count may hand the sum to one rank
  // (train/setup.cpp, restore_compression).
  const std::vector<float>& q() const { return q_; }
  std::vector<float>& q() { return q_; }
  const std::vector<float>& error() const { return error_; }
  std::vector<float>& error() { return error_; }

 private:
  struct Matrix {
    int64_t offset, rows, cols, rank;
    int64_t p_at, q_at;  // into first_ (its bucket's message) and into q_ / second_
  };
  struct Range {
    int64_t begin, end;  // [begin, end) floats of the gradient buffer, sent whole
    int64_t at;          // where they travel in first_
  };
  // One bucket's part of the step, and how far this step has taken it.
  struct Group {
    int64_t begin = 0, end = 0;           // the bucket: [begin, end) of the gradient buffer
    std::vector<Range> whole;             // its uncompressed parameters
    std::vector<size_t> matrices;         // its compressed ones (indices into matrices_)
    int64_t first_at = 0, first_n = 0;    // its first message in first_: [whole ranges | P's]
    int64_t second_at = 0, second_n = 0;  // its second in second_: its Q's (contiguous in q_)
    int64_t first_ticket = -1, second_ticket = -1;  // its reductions' places on their communicators
  };
  // A communicator and how many reductions this step started on it.
  struct Lane {
    Communicator* comm = nullptr;
    int64_t started = 0;
    int64_t start(float* data, int64_t n, Wire wire);
    bool done(int64_t ticket) const;
    void wait(int64_t ticket);
  };
  void plan(const std::vector<Bucket>& buckets);
  void send_p(Group& g);  // M = b_r/B·g_r + e_r, P = M·Q; starts the first message
  void send_q(Group& g);  // the whole ranges back, P̂, Qᵀ = P̂ᵀ·M; starts the second message
  void apply(Group& g);   // A = P̂·Qᵀ, e_r = M_r − b_r/B·A, the buffer gets A
  void end_step();
  static void orthonormalize(float* p, int64_t rows, int64_t rank);
  static int64_t block_rows(int64_t cols);
  int rank_;
  int64_t count_, parameters_ = 0;
  std::vector<Param> params_;  // sorted by offset
  std::vector<Matrix> matrices_;
  std::vector<Group> groups_;  // in the order backward finishes them
  std::vector<float> q_, error_;
  std::vector<float> first_, second_;  // the messages of every bucket
  // This step: the buffer, the weight, the wire, the lanes, and the next bucket to send P, Q, or apply.
  float* grads_ = nullptr;
  double weight_ = 0;
  Wire wire_ = Wire::FP32;
  Lane first_lane_, second_lane_;
  bool one_lane_ = false;  // reduce(): P's and Q's on one communicator, Q's only once every P is back
  size_t next_p_ = 0, next_q_ = 0, next_apply_ = 0;
};

}  // namespace hetrain::dist

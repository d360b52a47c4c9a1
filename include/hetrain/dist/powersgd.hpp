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
  PowerSgd(const std::vector<Param>& params, int64_t count, int rank, uint64_t seed);

  // Collective over comm (every rank, same step): grads (host, count floats) ← the reduced gradient of
  // this step, the same on every rank; the sums cross on `wire`. weight = b_r/B as for weighted_allreduce
  // (the weights of all ranks sum to 1).
  void reduce(Communicator& comm, float* grads, double weight, Wire wire = Wire::FP32);

  int rank() const { return rank_; }
  int64_t count() const { return count_; }            // floats of the gradient buffer, padding included
  int64_t parameters() const { return parameters_; }  // floats of the parameters: what a whole step sends
  int64_t compressed_matrices() const { return int64_t(matrices_.size()); }
  int64_t compressed_floats() const;  // parameters that travel as factors
  int64_t floats_sent() const;        // what one step's two allreduces carry, against parameters() uncompressed

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
    int64_t p_at, q_at;  // into the P part of the first message and into q_
  };
  static void orthonormalize(float* p, int64_t rows, int64_t rank);
  static int64_t block_rows(int64_t cols);
  int rank_;
  int64_t count_, parameters_ = 0;
  std::vector<Matrix> matrices_;
  std::vector<std::pair<int64_t, int64_t>> whole_;  // [begin, end) ranges sent uncompressed
  int64_t whole_floats_ = 0, p_floats_ = 0;
  std::vector<float> q_, error_;
  std::vector<float> first_, second_;  // the two messages: [whole ranges | P's], [Q's]
};

}  // namespace hetrain::dist

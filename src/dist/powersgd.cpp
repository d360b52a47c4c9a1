// PowerSGD (docs/architecture.md, "PowerSGD"): the plan of which parameters travel as factors, and one
// step of compression, reduction and error feedback. The products are the dense layer's (ops::cpu::linear_*),
// whose GEMMs the CPU backend already tunes.
#include "hetrain/dist/powersgd.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::dist {

int parse_compress_rank(const std::string& text) {
  if (text == "none") return 0;
  const std::string prefix = "powersgd:";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    const std::string digits = text.substr(prefix.size());
    if (!digits.empty() && digits.size() <= 4 && std::all_of(digits.begin(), digits.end(), ::isdigit)) {
      const int r = std::stoi(digits);
      if (r >= 1 && r <= 1024) return r;
    }
  }
  HT_THROW("--compress must be none or powersgd:R with a rank R from 1 to 1024 (e.g. powersgd:4), got ",
           quoted(text));
}

PowerSgd::PowerSgd(const std::vector<Param>& params, int64_t count, int rank, uint64_t seed)
    : rank_(rank), count_(count) {
  HT_CHECK(rank >= 1, "PowerSGD: rank must be at least 1, got ", rank);
  std::vector<Param> sorted = params;
  std::sort(sorted.begin(), sorted.end(), [](const Param& a, const Param& b) { return a.offset < b.offset; });
  int64_t q_floats = 0, covered = 0;
  for (const Param& p : sorted) {
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    // Gaps between parameters are the buffer's zero padding (nn::ParamBuffer): never sent, left zero.
    HT_CHECK(p.offset >= covered, "internal: PowerSGD parameters overlap in the gradient buffer at ", p.offset);
    covered = p.offset + numel;
    parameters_ += numel;
    const int64_t rows = p.shape.size() >= 2 ? p.shape[0] : 0, cols = rows > 0 ? numel / rows : 0;
    const int64_t r = std::min<int64_t>(rank, std::min(rows, cols));
    // As PyTorch DDP's hook: compress only what shrinks at least twofold.
    if (rows > 0 && 2 * r * (rows + cols) < rows * cols) {
      matrices_.push_back(Matrix{p.offset, rows, cols, r, p_floats_, q_floats});
      p_floats_ += rows * r;
      q_floats += cols * r;
    } else if (numel > 0) {
      if (!whole_.empty() && whole_.back().second == p.offset)
        whole_.back().second += numel;
      else
        whole_.push_back({p.offset, p.offset + numel});
      whole_floats_ += numel;
    }
  }
  HT_CHECK(covered <= count, "internal: PowerSGD parameters reach float ", covered, " of ", count);
  // The first Q: standard normal values from the run's seed, the same on every rank.
  q_.resize(size_t(q_floats));
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : q_) v = normal(rng);
  error_.assign(size_t(count), 0.0f);
  first_.resize(size_t(whole_floats_ + p_floats_));
  second_.resize(size_t(q_floats));
}

int64_t PowerSgd::compressed_floats() const {
  int64_t n = 0;
  for (const Matrix& m : matrices_) n += m.rows * m.cols;
  return n;
}

int64_t PowerSgd::floats_sent() const { return int64_t(first_.size() + second_.size()); }

// Gram–Schmidt on the columns of p [rows, rank] (row-major), in double and with each projection taken
// twice: when P is nearly rank-deficient (a gradient of lower rank than R) one pass in float leaves a
// remainder whose rounding noise is as large as itself and points back along the earlier columns, which
// inflates the approximation. A zero column stays zero (the tiny epsilon in the norm, as PyTorch's hook).
void PowerSgd::orthonormalize(float* p, int64_t rows, int64_t rank) {
  std::vector<double> col(size_t(rows * rank));  // column-major copy
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < rank; ++j) col[size_t(j * rows + i)] = p[i * rank + j];
  for (int64_t j = 0; j < rank; ++j) {
    double* c = col.data() + j * rows;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        const double* b = col.data() + k * rows;
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot += b[i] * c[i];
        for (int64_t i = 0; i < rows; ++i) c[i] -= dot * b[i];
      }
    double norm2 = 0;
    for (int64_t i = 0; i < rows; ++i) norm2 += c[i] * c[i];
    const double inv = 1.0 / (std::sqrt(norm2) + 1e-8);
    for (int64_t i = 0; i < rows; ++i) c[i] *= inv;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < rank; ++j) p[i * rank + j] = float(col[size_t(j * rows + i)]);
}

// Rows of a matrix handled together by the fused passes below: about 64 K floats, so that a block of M, its
// error and its approximation stay in cache between the product and the element-wise work on them.
int64_t PowerSgd::block_rows(int64_t cols) { return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, cols)); }

// Memory-bound work: each pass over M costs as much as a pass over the whole gradient. Per matrix: M += e
// fused with P = M·Q (3 passes), Qᵀ = P̂ᵀ·M (1), and A = P̂·Qᵀ fused with e = M − (b_r/B)·A, M = A (3): 7
// passes where the unfused steps took 10.
//
// The error is kept in the units of what this rank sends, b_r/B·g_r: e_r = M_r − (b_r/B)·A, this rank's share
// of the approximation. Every rank's share sums to A, so Σ_r e_r = Σ_r M_r − A is owed as before, and a
// rank that sends the whole sum's b_r/B back keeps a bounded error whatever its share: taking A/ranks from
// each rank instead leaves a rank with a larger share owed (b_r/B − 1/ranks)·G more each step, the other
// rank as much less, two errors that grow without bound and cancel (a zero-sample rank's by −G/ranks), so
// their sum loses its precision in float and on a 16-bit wire (docs/architecture.md, "PowerSGD").
void PowerSgd::reduce(Communicator& comm, float* grads, double weight, Wire wire) {
  apply_weight(grads, count_, weight);
  // M_r = b_r/B·g_r + e_r, in place in the gradient buffer; P = M·Q after the whole ranges in message one.
  float* out = first_.data();
  for (const auto& [begin, end] : whole_) {
    std::memcpy(out, grads + begin, size_t(end - begin) * sizeof(float));
    out += end - begin;
  }
  for (const Matrix& m : matrices_) {
    const int64_t rb = block_rows(m.cols), blocks = (m.rows + rb - 1) / rb;
#pragma omp parallel for schedule(static) if (m.rows * m.cols > (1 << 16))
    for (int64_t k = 0; k < blocks; ++k) {
      const int64_t r0 = k * rb, nr = std::min(rb, m.rows - r0);
      float* M = grads + m.offset + r0 * m.cols;
      const float* e = error_.data() + m.offset + r0 * m.cols;
      for (int64_t i = 0; i < nr * m.cols; ++i) M[i] += e[i];
      // P [rows, r] = M [rows, cols] · Qt [r, cols]ᵀ (q_ holds Q transposed: r rows of cols)
      ops::cpu::linear_forward<float>(out + m.p_at + r0 * m.rank, M, q_.data() + m.q_at, nullptr, int(nr), int(m.cols),
                                      int(m.rank));
    }
  }
  comm.weighted_allreduce(first_.data(), int64_t(first_.size()), 1.0, wire);
  const float* in = first_.data();
  for (const auto& [begin, end] : whole_) {
    std::memcpy(grads + begin, in, size_t(end - begin) * sizeof(float));
    in += end - begin;
  }
  // Qt [r, cols] = P̂ᵀ [r, rows] · M [rows, cols], then summed over ranks.
  for (const Matrix& m : matrices_) {
    float* p = first_.data() + whole_floats_ + m.p_at;
    orthonormalize(p, m.rows, m.rank);
    float* qt = second_.data() + m.q_at;
    std::fill(qt, qt + m.rank * m.cols, 0.0f);
    ops::cpu::linear_backward<float>(nullptr, qt, nullptr, p, grads + m.offset, qt, int(m.rows), int(m.cols), int(m.rank));
  }
  comm.weighted_allreduce(second_.data(), int64_t(second_.size()), 1.0, wire);
  // A [rows, cols] = P̂ [rows, r] · Qt [r, cols]; e_r = M_r − share·A; the buffer gets A. Block by block.
  const float share = float(weight);
  for (const Matrix& m : matrices_) {
    const int64_t rb = block_rows(m.cols), blocks = (m.rows + rb - 1) / rb;
    const float* p = first_.data() + whole_floats_ + m.p_at;
    const float* qt = second_.data() + m.q_at;
#pragma omp parallel for schedule(static) if (m.rows * m.cols > (1 << 16))
    for (int64_t k = 0; k < blocks; ++k) {
      thread_local std::vector<float> approx;
      const int64_t r0 = k * rb, nr = std::min(rb, m.rows - r0);
      approx.resize(size_t(nr * m.cols));
      ops::cpu::linear_backward<float>(approx.data(), nullptr, nullptr, p + r0 * m.rank, nullptr, qt, int(nr),
                                       int(m.cols), int(m.rank));
      float* M = grads + m.offset + r0 * m.cols;
      float* e = error_.data() + m.offset + r0 * m.cols;
      const float* a = approx.data();
      for (int64_t i = 0; i < nr * m.cols; ++i) {
        e[i] = M[i] - a[i] * share;
        M[i] = a[i];
      }
    }
  }
  q_.assign(second_.begin(), second_.end());  // the warm start of the next step
}

}  // namespace hetrain::dist

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
    : rank_(rank), count_(count), params_(params) {
  HT_CHECK(rank >= 1, "PowerSGD: rank must be at least 1, got ", rank);
  std::sort(params_.begin(), params_.end(), [](const Param& a, const Param& b) { return a.offset < b.offset; });
  int64_t q_floats = 0, covered = 0;
  for (const Param& p : params_) {
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
      matrices_.push_back(Matrix{p.offset, rows, cols, r, 0, q_floats});
      q_floats += cols * r;
    }
  }
  HT_CHECK(covered <= count, "internal: PowerSGD parameters reach float ", covered, " of ", count);
  // The first Q: standard normal values from the run's seed, the same on every rank.
  q_.resize(size_t(q_floats));
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : q_) v = normal(rng);
  error_.assign(size_t(count), 0.0f);
  second_.resize(size_t(q_floats));
  plan({Bucket{0, count}});
}

void PowerSgd::use_buckets(const std::vector<Bucket>& buckets) { plan(buckets); }

// Each bucket's first message holds its whole parameters, then its P's; its Q's are one stretch of q_
// (the matrices are in offset order and a bucket is one stretch of the buffer).
void PowerSgd::plan(const std::vector<Bucket>& buckets) {
  HT_CHECK(next_p_ == 0, "internal: PowerSGD buckets changed inside a step");
  groups_.clear();
  int64_t at = 0, placed = 0;
  for (const Bucket& b : buckets) {
    Group g;
    g.begin = b.begin, g.end = b.end, g.first_at = at;
    size_t m = 0;
    for (const Param& p : params_) {
      int64_t numel = 1;
      for (int64_t d : p.shape) numel *= d;
      while (m < matrices_.size() && matrices_[m].offset < p.offset) ++m;
      if (p.offset < b.begin || p.offset >= b.end || numel == 0) continue;
      HT_CHECK(p.offset + numel <= b.end, "internal: a PowerSGD bucket [", b.begin, ", ", b.end,
               ") cuts the parameter at ", p.offset);
      ++placed;
      if (m < matrices_.size() && matrices_[m].offset == p.offset) {
        g.matrices.push_back(m);
      } else if (!g.whole.empty() && g.whole.back().end == p.offset) {
        g.whole.back().end += numel;
      } else {
        g.whole.push_back(Range{p.offset, p.offset + numel, 0});
      }
    }
    for (Range& r : g.whole) {
      r.at = at;
      at += r.end - r.begin;
    }
    g.second_at = g.matrices.empty() ? 0 : matrices_[g.matrices.front()].q_at;
    for (size_t i : g.matrices) {
      Matrix& mx = matrices_[i];
      mx.p_at = at;
      at += mx.rows * mx.rank;
      g.second_n += mx.cols * mx.rank;
    }
    g.first_n = at - g.first_at;
    groups_.push_back(std::move(g));
  }
  int64_t nonempty = 0;
  for (const Param& p : params_) {
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    nonempty += numel > 0;
  }
  HT_CHECK(placed == nonempty, "internal: PowerSGD buckets hold ", placed, " of ", nonempty, " parameters");
  first_.assign(size_t(at), 0.0f);
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

int64_t PowerSgd::Lane::start(float* data, int64_t n, Wire wire) {
  comm->start_weighted_allreduce(data, n, 1.0, wire);
  return started++;
}
bool PowerSgd::Lane::done(int64_t ticket) const { return comm->finished() > ticket; }
void PowerSgd::Lane::wait(int64_t ticket) {
  if (ticket >= 0) comm->wait_first(ticket + 1);
}

void PowerSgd::reduce(Communicator& comm, float* grads, double weight, Wire wire) {
  begin(comm, comm, grads, weight, wire);  // one communicator: one lane
  finish();
}

void PowerSgd::begin(Communicator& first, Communicator& second, float* grads, double weight, Wire wire) {
  HT_CHECK(next_p_ == 0, "internal: a PowerSGD step begins while the last one is unfinished");
  HT_CHECK(weight >= 0.0 && weight <= 1.0, "PowerSGD: weight ", weight, " outside [0, 1]");
  grads_ = grads, weight_ = weight, wire_ = wire;
  one_lane_ = &first == &second;
  first_lane_ = Lane{&first, 0};
  second_lane_ = Lane{&second, 0};
}

// Buckets become final in plan order on every rank; each one's P's start at once.
void PowerSgd::grads_final(int64_t first_final) {
  while (next_p_ < groups_.size() && groups_[next_p_].begin >= first_final) send_p(groups_[next_p_++]);
}

// A bucket whose P's are back sends its Q's, in bucket order; one whose Q's are back is applied. On one
// communicator the Q's wait for finish(): every rank must start that communicator's reductions in one order.
void PowerSgd::progress() {
  if (!grads_) return;  // no step begun
  first_lane_.comm->progress();
  if (one_lane_) return;
  second_lane_.comm->progress();
  while (next_q_ < next_p_ && first_lane_.done(groups_[next_q_].first_ticket)) send_q(groups_[next_q_++]);
  while (next_apply_ < next_q_ && second_lane_.done(groups_[next_apply_].second_ticket)) apply(groups_[next_apply_++]);
}

void PowerSgd::finish() {
  start_rest();
  while (next_q_ < groups_.size()) {
    first_lane_.wait(groups_[next_q_].first_ticket);
    send_q(groups_[next_q_++]);
    if (!one_lane_)  // apply what has come back meanwhile
      while (next_apply_ < next_q_ && second_lane_.done(groups_[next_apply_].second_ticket))
        apply(groups_[next_apply_++]);
  }
  while (next_apply_ < groups_.size()) {
    (one_lane_ ? first_lane_ : second_lane_).wait(groups_[next_apply_].second_ticket);
    apply(groups_[next_apply_++]);
  }
  end_step();
}

// A lane's tickets count the reductions started on its communicator this step; on one communicator the
// Q's follow every P. A message of no floats (a bucket without matrices has no Q's) starts nothing.
void PowerSgd::send_p(Group& g) {
  apply_weight(grads_ + g.begin, g.end - g.begin, weight_);
  // M_r = b_r/B·g_r + e_r, in place in the gradient buffer; P = M·Q after the whole ranges.
  for (const Range& r : g.whole) std::memcpy(first_.data() + r.at, grads_ + r.begin, size_t(r.end - r.begin) * sizeof(float));
  for (size_t i : g.matrices) {
    const Matrix& m = matrices_[i];
    const int64_t rb = block_rows(m.cols), blocks = (m.rows + rb - 1) / rb;
#pragma omp parallel for schedule(static) if (m.rows * m.cols > (1 << 16))
    for (int64_t k = 0; k < blocks; ++k) {
      const int64_t r0 = k * rb, nr = std::min(rb, m.rows - r0);
      float* M = grads_ + m.offset + r0 * m.cols;
      const float* e = error_.data() + m.offset + r0 * m.cols;
      for (int64_t j = 0; j < nr * m.cols; ++j) M[j] += e[j];
      // P [rows, r] = M [rows, cols] · Qt [r, cols]ᵀ (q_ holds Q transposed: r rows of cols)
      ops::cpu::linear_forward<float>(first_.data() + m.p_at + r0 * m.rank, M, q_.data() + m.q_at, nullptr, int(nr),
                                      int(m.cols), int(m.rank));
    }
  }
  g.first_ticket = g.first_n > 0 ? first_lane_.start(first_.data() + g.first_at, g.first_n, wire_) : -1;
}

void PowerSgd::send_q(Group& g) {
  for (const Range& r : g.whole) std::memcpy(grads_ + r.begin, first_.data() + r.at, size_t(r.end - r.begin) * sizeof(float));
  // Qt [r, cols] = P̂ᵀ [r, rows] · M [rows, cols], then summed over ranks.
  for (size_t i : g.matrices) {
    const Matrix& m = matrices_[i];
    float* p = first_.data() + m.p_at;
    orthonormalize(p, m.rows, m.rank);
    float* qt = second_.data() + m.q_at;
    std::fill(qt, qt + m.rank * m.cols, 0.0f);
    ops::cpu::linear_backward<float>(nullptr, qt, nullptr, p, grads_ + m.offset, qt, int(m.rows), int(m.cols), int(m.rank));
  }
  Lane& lane = one_lane_ ? first_lane_ : second_lane_;
  g.second_ticket = g.second_n > 0 ? lane.start(second_.data() + g.second_at, g.second_n, wire_) : -1;
}

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
void PowerSgd::apply(Group& g) {
  // A [rows, cols] = P̂ [rows, r] · Qt [r, cols]; e_r = M_r − share·A; the buffer gets A. Block by block.
  const float share = float(weight_);
  for (size_t i : g.matrices) {
    const Matrix& m = matrices_[i];
    const int64_t rb = block_rows(m.cols), blocks = (m.rows + rb - 1) / rb;
    const float* p = first_.data() + m.p_at;
    const float* qt = second_.data() + m.q_at;
#pragma omp parallel for schedule(static) if (m.rows * m.cols > (1 << 16))
    for (int64_t k = 0; k < blocks; ++k) {
      thread_local std::vector<float> approx;
      const int64_t r0 = k * rb, nr = std::min(rb, m.rows - r0);
      approx.resize(size_t(nr * m.cols));
      ops::cpu::linear_backward<float>(approx.data(), nullptr, nullptr, p + r0 * m.rank, nullptr, qt, int(nr),
                                       int(m.cols), int(m.rank));
      float* M = grads_ + m.offset + r0 * m.cols;
      float* e = error_.data() + m.offset + r0 * m.cols;
      const float* a = approx.data();
      for (int64_t j = 0; j < nr * m.cols; ++j) {
        e[j] = M[j] - a[j] * share;
        M[j] = a[j];
      }
    }
  }
}

void PowerSgd::end_step() {
  first_lane_.comm->wait_all();
  if (!one_lane_) second_lane_.comm->wait_all();
  q_.assign(second_.begin(), second_.end());  // the warm start of the next step
  next_p_ = next_q_ = next_apply_ = 0;
  grads_ = nullptr;
}

}  // namespace hetrain::dist

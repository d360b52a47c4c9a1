#include "train/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"
#include "train/detection.hpp"

namespace hetrain::train {

int64_t topk_correct(const float* logits, const int32_t* labels, int64_t N, int K, int k) {
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float* row = logits + i * K;
    const float mine = row[labels[i]];
    int above = 0;  // classes that beat the label, or tie it from a lower index (argmax takes the first)
    for (int c = 0; c < K; ++c) above += row[c] > mine || (row[c] == mine && c < labels[i]);
    correct += above < k;
  }
  return correct;
}

std::string EvalTotals::score_text() const {
  char text[96];
  if (detection())
    std::snprintf(text, sizeof text, "mAP@0.5 %.4f, mAP@0.5:0.95 %.4f", map50, map50_95);
  else
    std::snprintf(text, sizeof text, "accuracy %.2f%%", 100.0 * top1 / std::max(1.0, count));
  return text;
}

double EvalTotals::headline() const { return detection() ? map50 : top1 / std::max(1.0, count); }

int64_t for_each_eval_batch(nn::Model& model, BatchSource& source, DeviceInput* input, MPI_Comm comm,
                            int64_t chunk,
                            const std::function<void(const data::Batch& batch, const Tensor& images,
                                                     const Tensor& host_outputs)>& use) {
  int rank = 0, ranks = 1;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  const int64_t n = source.info().num_samples;
  const int64_t begin = n * rank / ranks, end = n * (rank + 1) / ranks;
  const data::BatchForm form = input ? data::BatchForm::Raw : data::BatchForm::Float;
  // Non-finite outputs: how many values, in how many samples, and the first such sample (n if none).
  int64_t bad[3] = {0, 0, n};
  for (int64_t start = begin; start < end; start += chunk) {
    std::vector<int64_t> idx;
    for (int64_t i = start; i < std::min(end, start + chunk); ++i) idx.push_back(i);
    source.submit(idx, false, 0, form);
    const data::Batch batch = source.next();
    const Tensor images = input ? input->upload(batch).images : batch.images;
    const Tensor outputs = model.forward(images, /*training=*/false).to(Device::CPU);
    const int64_t per_sample = outputs.numel() / std::max<int64_t>(1, int64_t(idx.size()));
    int64_t bad_here = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const float* row = outputs.data() + int64_t(k) * per_sample;
      const int64_t values = per_sample - std::count_if(row, row + per_sample, [](float v) { return std::isfinite(v); });
      if (values == 0) continue;
      bad_here += values, bad[1] += 1;
      bad[2] = std::min(bad[2], idx[k]);
    }
    bad[0] += bad_here;
    if (bad_here == 0 && bad[0] == 0) use(batch, images, outputs);
  }
  int64_t all[3];
  HT_MPI_CHECK(MPI_Allreduce(bad, all, 2, MPI_INT64_T, MPI_SUM, comm));
  HT_MPI_CHECK(MPI_Allreduce(&bad[2], &all[2], 1, MPI_INT64_T, MPI_MIN, comm));
  if (all[0] > 0)
    throw AgreedError("evaluation: the model's outputs hold " + std::to_string(all[0]) + " NaN/Inf values in " +
                          std::to_string(all[1]) + " of " + std::to_string(n) + " samples (the first: sample " +
                          std::to_string(all[2]) +
                          "): its weights are not finite or its forward pass overflows; no metric is computed",
                      __FILE__, __LINE__);
  return end - begin;
}

EvalTotals evaluate(nn::Model& model, BatchSource& source, DeviceInput* input, MPI_Comm comm, int64_t chunk,
                    const FirstBatchHook& first_batch) {
  if (model.detect_head()) {
    const DetectionTotals d = evaluate_detection(model, source, input, comm, chunk, first_batch);
    EvalTotals t;
    t.loss_sum = d.loss_sum, t.count = d.count, t.map50 = d.map.map50, t.map50_95 = d.map.map50_95;
    return t;
  }
  int rank = 0;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const int K = source.info().num_classes;
  EvalTotals t;
  bool first = rank == 0 && first_batch;
  for_each_eval_batch(model, source, input, comm, chunk, [&](const data::Batch& batch, const Tensor& images,
                                                             const Tensor& logits) {
    const int64_t b = logits.dim(0);
    Tensor probs({b, K});
    t.loss_sum += double(ops::cpu::softmax_xent_forward(probs.data(), logits.data(), batch.labels.data(), int(b), K,
                                                   0.0f)) * double(b);
    t.top1 += double(ops::cpu::top1_correct(logits.data(), batch.labels.data(), int(b), K));
    t.top5 += double(topk_correct(logits.data(), batch.labels.data(), b, K, 5));
    t.count += double(b);
    if (first) {
      first_batch(images.to(Device::CPU), batch.labels, logits);
      first = false;
    }
  });
  double v[4] = {t.loss_sum, t.top1, t.top5, t.count};
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_SUM, comm));
  return {v[0], v[1], v[2], v[3]};
}

void print_validation(int64_t samples_done, int64_t samples_per_epoch, double train_seconds, const EvalTotals& e) {
  std::printf("validation at sample %lld (epoch %.2f) after %.2f s of training: loss %.4f, %s (%lld samples)\n",
              (long long)samples_done, double(samples_done) / double(std::max<int64_t>(1, samples_per_epoch)),
              train_seconds, e.loss_sum / std::max(1.0, e.count), e.score_text().c_str(), (long long)e.count);
  std::fflush(stdout);
}

}  // namespace hetrain::train

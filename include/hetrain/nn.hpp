// hetrain/nn.hpp — parameters in one flat buffer, layers, the model zoo.
//
// All parameters of a model live in ONE contiguous float buffer and all gradients in another, so the
// distributed layer reduces and checkpoints them in one piece. Each parameter is a named view into those
// buffers (torchvision's names for the ResNets: "layer1.0.conv1.weight"). Batch-norm running statistics are
// not parameters: they live in a second flat "state" buffer (running_mean, running_var) with their own names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hetrain/precision.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain::nn {

// What a parameter is, for weight decay policy and initialisation.
enum class ParamKind { ConvWeight, LinearWeight, Bias, BnWeight, BnBias };

struct ParamSpec {
  std::string name;
  Shape shape;
  ParamKind kind;
  int64_t offset = 0;  // into the flat buffer, in floats
  int64_t numel() const { return shape_numel(shape); }
};

// Two-phase: layers declare() their parameters (names, shapes), then finalize() allocates the flat buffers
// and layers fetch their views by the index declare() returned.
class ParamBuffer {
 public:
  int declare(const std::string& name, Shape shape, ParamKind kind);
  int declare_state(const std::string& name, Shape shape, float initial_value);
  void finalize();
  bool finalized() const { return finalized_; }

  Tensor param(int index) const;  // view into values()
  Tensor grad(int index) const;   // view into grads()
  Tensor state(int index) const;  // view into states()
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const std::vector<ParamSpec>& state_specs() const { return state_specs_; }
  int find(const std::string& name) const;  // -1 when absent
  int find_state(const std::string& name) const;  // -1 when absent
  void reset_states();  // every state back to its declared initial value (done by finalize())
  // Moves values, gradients and states to `device` (copying their contents); views handed out earlier
  // point at the old memory, so layers fetch theirs by index at every call.
  void to(Device device);
  Device device() const { return values_.device(); }

  // values(), grads(): count() floats, each parameter at its spec's offset, a multiple of kParamAlignment;
  // the floats between parameters are zero in both and stay zero (no layer writes them; the optimizer,
  // the reductions and the moving average keep zeros zero).
  static constexpr int64_t kParamAlignment = 64;
  Tensor& values() { return values_; }  // [count()]
  Tensor& grads() { return grads_; }    // [count()]
  Tensor& states() { return states_; }  // [state_count()]
  const Tensor& values() const { return values_; }
  const Tensor& grads() const { return grads_; }
  const Tensor& states() const { return states_; }
  int64_t count() const { return count_; }            // floats in values() and grads(), padding included
  int64_t parameters() const { return parameters_; }  // the model's parameters: the sum of specs' numel()
  int64_t state_count() const { return state_count_; }

 private:
  std::vector<ParamSpec> specs_, state_specs_;
  std::vector<float> state_init_;
  Tensor values_, grads_, states_;
  int64_t count_ = 0, parameters_ = 0, state_count_ = 0;
  bool finalized_ = false;
};

// The first tensor of `specs` whose values in `flat` (laid out at the specs' offsets) hold NaN or ±Inf, as
// "conv1.weight (3 of 150 values are NaN/Inf, the first at element 12)"; empty when every value is finite.
// Names what was non-finite in a checkpoint, a loaded file or an exchanged copy of the parameters.
std::string describe_nonfinite(const std::vector<ParamSpec>& specs, const float* flat);

struct ModelConfig {
  // mlp | lenet | resnet20 | resnet18 | resnet50, or the path of a model file ending in ".yaml" (YOLOv5's
  // format, docs/models.md). For a file: num_classes > 0 overrides its `nc` (0 takes the file's); its `ch`,
  // when present, must equal in_channels (in_channels 0 takes the file's `ch`, else 3).
  std::string name = "resnet20";
  int in_channels = 3;
  int height = 32;
  int width = 32;
  int num_classes = 10;
};

// Called between consecutive layers of every Sequential's forward and backward when set (empty: nothing).
// The training loops poll MPI there, so that communication aimed at this rank progresses while it computes:
// one-sided operations in the asynchronous modes (dist::RmaProgress), the gradient buckets already started
// in the synchronous mode (docs/architecture.md, "Gradient reduction"). Process-wide; the training loop sets
// and clears it.
void set_between_layers_hook(std::function<void()> hook);

// Told during backward, after each top-level layer: every gradient at flat offsets [first_final, count())
// is final (no later layer of this backward writes it), so it may be reduced while backward goes on.
// Offsets only decrease within one backward; the last call says 0.
using GradsFinal = std::function<void(int64_t first_final)>;

// The output layout of a detector's Detect head: rows [N, A, 5 + num_classes], A = Σ over levels of
// anchors_per_level · (image_h / stride) · (image_w / stride), ordered level, anchor, grid row, column
// (docs/detection.md, "Loss and targets"). Anchors in pixels, (w, h) pairs, level 0's first.
struct DetectHeadLayout {
  int num_classes = 0;
  int anchors_per_level = 3;
  std::vector<int> strides;
  std::vector<float> anchors;
  int image_h = 0, image_w = 0;
};

// ---------------------------------------------------------------- batch statistics (--bn)
// Where the batch-norm layers of a model in training mode take their statistics from (docs/architecture.md,
// "Batch norm"):
//   Local  the rank's own local batch (DDP without SyncBN): the statistics change with the split;
//   Sync   the whole global batch: each layer adds its per-channel sums up over the ranks (sum_over_ranks),
//          in forward and in backward, so any split trains what one process at batch B trains;
//   Ghost  groups of `ghost_group` consecutive samples of the local batch; the balancer gives every rank a
//          multiple of the group, so the groups are the global batch's and no split changes them.
struct BatchNormMode {
  enum class Kind { Local, Sync, Ghost };
  Kind kind = Kind::Local;
  int64_t ghost_group = 0;
  // Sync: adds `n` doubles up over the ranks that share the global batch, in place. Collective: those ranks
  // call it in the same order, once per batch-norm layer in forward and once in backward.
  std::function<void(double* values, int n)> sum_over_ranks;
  // Sync, set by the trainer before each training step:
  bool no_samples = false;     // the rank has no samples: it runs one zero sample that contributes nothing,
                               // so that it joins every sum of the step
  double gradient_weight = 1;  // the rank's factor in the gradient reduction (b_r/B over its loss scale)
};
// "local", "sync" or "ghost:G" (G >= 2); throws hetrain::Error naming --bn otherwise.
BatchNormMode parse_batch_norm_mode(const std::string& text);
std::string batch_norm_mode_name(const BatchNormMode& mode);  // as parsed: "local", "sync", "ghost:8"

class Model {
 public:
  virtual ~Model() = default;
  // Builds the named model; throws hetrain::Error naming the model and the problem for an unknown name or
  // an input the model cannot take (e.g. smaller than its minimum size).
  static std::unique_ptr<Model> create(const ModelConfig& config);
  static std::vector<std::string> names();

  const ModelConfig& config() const { return config_; }
  ParamBuffer& params() { return params_; }
  const ParamBuffer& params() const { return params_; }
  int64_t param_count() const { return params_.parameters(); }

  // Deterministic initialisation from a seed (Kaiming as torchvision does); identical on every rank.
  virtual void init(uint64_t seed) = 0;
  // x [N, C, H, W] → logits [N, classes]. training=true uses batch statistics in BN and keeps what
  // backward needs; training=false uses running statistics.
  // The model keeps a handle on x (conv1's weight gradient needs it): leave x unchanged until backward().
  // The returned logits live in the model's own buffer and are overwritten by the next forward().
  virtual Tensor forward(const Tensor& x, bool training) = 0;
  // Accumulates parameter gradients into params().grads() (caller zeroes them once per step).
  // `grads_final`, when set, hears which gradients are final as backward walks down the layers.
  virtual void backward(const Tensor& dlogits, const GradsFinal& grads_final) = 0;
  void backward(const Tensor& dlogits) { backward(dlogits, GradsFinal()); }
  // True when some layer couples the samples of a batch (batch norm in training mode).
  virtual bool has_batch_coupling() const = 0;
  // Where training-mode batch norm takes its statistics from (null: Local). The model keeps the pointer;
  // the caller keeps the mode alive and may change its per-step fields between steps.
  virtual void set_batch_norm(const BatchNormMode* mode) = 0;
  // Moves the parameters and the model's buffers to `device`; forward() then takes inputs there and
  // returns logits there. On CUDA the layers run cuDNN/cuBLAS/our kernels on the legacy default stream;
  // `precision` is how convolutions and dense layers multiply on a GPU (hetrain/precision.hpp); parameters,
  // gradients and activations stay FP32 tensors at every precision. A CPU model computes in FP32.
  virtual void to(Device device, Precision precision = Precision::FP32) = 0;
  Device device() const { return params_.device(); }
  // Detectors: the layout of what forward() returns (rows, not logits); null for a classifier.
  virtual const DetectHeadLayout* detect_head() const { return nullptr; }
  // Floats held by the model's activation/gradient pool after the last step (memory planning and tests).
  virtual int64_t pooled_floats() const = 0;
  // Bytes each further sample of a local batch adds to the activation and gradient buffers of a training
  // step on the model's device. Measured, not modelled: one step at batch 2 and one at batch 4 on zero
  // inputs, each from an empty pool. Leaves running statistics as they were and gradients zero.
  virtual int64_t activation_bytes_per_sample() = 0;

 protected:
  explicit Model(const ModelConfig& config) : config_(config) {}
  ModelConfig config_;
  ParamBuffer params_;
};

// ---------------------------------------------------------------- models from YAML files (docs/models.md)

// `hetrain models --show FILE.yaml`: a table of the model's layers (index, from, n, params, module, args as
// built, output shape per sample) and its totals, for `config`'s input size, channels and classes (see
// ModelConfig: num_classes 0 and in_channels 0 take the file's). Throws hetrain::Error as Model::create.
std::string describe_graph_model(const std::string& yaml_path, const ModelConfig& config);

}  // namespace hetrain::nn

// `hetrain eval`: a checkpoint's model over a dataset on any number of ranks (hetrain/train.hpp).
#include <cstdio>
#include <mutex>
#include <optional>

#include "data/h5util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/threading.hpp"
#include "hetrain/train.hpp"
#include "train/checkpoint.hpp"
#include "train/coco_results.hpp"
#include "train/detection.hpp"
#include "train/evaluate.hpp"
#include "train/init_weights.hpp"
#include "train/outputs.hpp"
#include "train/resume.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

namespace {

// The model a checkpoint describes, as rank 0 read it; broadcast to every rank.
struct ModelFacts {
  std::string name;
  int64_t shape[3] = {0, 0, 0};
  int64_t classes = 0;
};

void broadcast(MPI_Comm comm, ModelFacts& m) {
  int len = int(m.name.size());
  HT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
  m.name.resize(size_t(len));
  HT_MPI_CHECK(MPI_Bcast(m.name.data(), len, MPI_CHAR, 0, comm));
  HT_MPI_CHECK(MPI_Bcast(m.shape, 3, MPI_INT64_T, 0, comm));
  HT_MPI_CHECK(MPI_Bcast(&m.classes, 1, MPI_INT64_T, 0, comm));
}

void write_dump(const std::string& path, const Tensor& inputs, const std::vector<int32_t>& labels,
                const Tensor& logits) {
  namespace h5 = data::h5;
  const std::string tmp = path + ".tmp";
  {
    std::lock_guard<std::mutex> lock(data::hdf5_mutex());
    h5::quiet();
    h5::Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(file.valid(), "--dump-batch ", path, ": cannot create: ", h5::last_error());
    auto put = [&](const char* name, const Shape& shape, hid_t file_type, hid_t mem_type, const void* data) {
      std::vector<hsize_t> dims(shape.begin(), shape.end());
      h5::Id space(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
      h5::Id d(H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      HT_CHECK(d.valid() && H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "--dump-batch ", path,
               ": cannot write /", name, ": ", h5::last_error());
    };
    put("inputs", inputs.shape(), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, inputs.data());
    put("labels", {int64_t(labels.size())}, H5T_STD_I32LE, H5T_NATIVE_INT32, labels.data());
    put("logits", logits.shape(), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, logits.data());
  }
  HT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "--dump-batch ", path, ": cannot rename ", tmp);
}

// The options checked, and the model facts of the checkpoint (rank 0 reads it), on every rank.
ModelFacts checkpoint_facts(const EvalConfig& cfg, const dist::World& world,
                            std::optional<LoadedCheckpoint>& loaded) {
  ModelFacts facts;
  dist::agree_on(world.comm(), [&] {
    HT_CHECK(cfg.checkpoint.empty() != cfg.weights.empty(),
             "give --checkpoint FILE (a checkpoint written by hetrain train) or --weights FILE with --model");
    HT_CHECK(cfg.weights.empty() || (!cfg.model.empty() && !cfg.data_path.empty()),
             "--weights needs --model (what the weights are of) and --data (the input shape and classes)");
    HT_CHECK(cfg.model.empty() || !cfg.weights.empty(), "--model is for --weights (a checkpoint names its model)");
    HT_CHECK(cfg.synthetic >= 0, "--synthetic must be a positive number of samples, got ", cfg.synthetic);
    HT_CHECK((cfg.synthetic > 0) != !cfg.data_path.empty(),
             cfg.synthetic > 0 ? "give either --data or --synthetic, not both" : "no data: give --data FILE or --synthetic N");
    HT_CHECK(cfg.batch >= 1, "--batch must be at least 1, got ", cfg.batch);
    HT_CHECK(cfg.threads >= 1, "--threads must be at least 1, got ", cfg.threads);
    if (world.rank() != 0) return;
    check_eval_outputs(cfg);  // before anything is read: no output may replace an input or a device node
    if (!cfg.weights.empty()) {  // the model as given, shaped by the data
      const data::DatasetInfo d = open_dataset_source(cfg.data_path, SourceOptions())->info();
      facts.name = cfg.model;
      facts.shape[0] = d.channels, facts.shape[1] = d.height, facts.shape[2] = d.width;
      facts.classes = d.num_classes;
      if (!cfg.dump_batch.empty()) check_output_path(cfg.dump_batch, "--dump-batch");
      if (!cfg.save_json.empty()) check_output_path(cfg.save_json, "--save-json");
      return;
    }
    LoadedCheckpoint c;
    c.path = cfg.checkpoint;
    c.info = read_checkpoint_info(cfg.checkpoint);
    facts.name = c.info.model;
    for (int i = 0; i < 3; ++i) facts.shape[i] = c.info.input_shape[size_t(i)];
    facts.classes = c.info.num_classes;
    loaded = std::move(c);
    if (!cfg.dump_batch.empty()) check_output_path(cfg.dump_batch, "--dump-batch");
    if (!cfg.save_json.empty()) check_output_path(cfg.save_json, "--save-json");
  });
  broadcast(world.comm(), facts);
  return facts;
}

// The parts of a training set-up that evaluation shares: device, data (checked against the checkpoint's
// model), model; rank 0 reads the checkpoint's tensors into `loaded`.
Setup evaluation_setup(const EvalConfig& cfg, dist::World& world, const ModelFacts& facts,
                       std::optional<LoadedCheckpoint>& loaded) {
  Setup s;
  dist::agree_on(world.comm(), [&] {
    set_num_threads(cfg.threads);
    HT_CHECK(cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda",
             "--device must be auto, cpu or cuda, got ", quoted(cfg.device));
    resolve_device(cfg.device, cfg.threads, cfg.quiet, world, s);
    SourceOptions so;
    so.threads = cfg.threads;
    so.prefetch_depth = 1;
    s.val = cfg.synthetic > 0 ? make_synthetic_source(cfg.synthetic, int(facts.shape[0]), int(facts.shape[1]),
                                                      int(facts.shape[2]), int(facts.classes), cfg.seed, 0, so)
                              : open_dataset_source(cfg.data_path, so);
    const data::DatasetInfo& d = s.val->info();
    HT_CHECK(d.channels == facts.shape[0] && d.height == facts.shape[1] && d.width == facts.shape[2] &&
                 d.num_classes == facts.classes,
             d.path, ": ", d.channels, "x", d.height, "x", d.width, " images with ", d.num_classes,
             " classes, but the checkpoint's ", facts.name, " was trained on ", facts.shape[0], "x", facts.shape[1],
             "x", facts.shape[2], " with ", facts.classes, " classes");
    nn::ModelConfig mc;
    mc.name = facts.name;
    mc.in_channels = int(facts.shape[0]);
    mc.height = int(facts.shape[1]);
    mc.width = int(facts.shape[2]);
    mc.num_classes = int(facts.classes);
    s.model = nn::Model::create(mc);
    if (s.model->detect_head()) {
      data::require_detection(d, "model " + facts.name);
      scale_detector_inputs(*s.val);
    } else if (!cfg.save_json.empty()) {
      HT_THROW("--save-json writes a detector's detections; model ", facts.name, " is a classifier");
    } else {
      data::require_classification(d, "model " + facts.name);
    }
    if (loaded) loaded->tensors = read_checkpoint_tensors(cfg.checkpoint, s.model->params());
  });
  return s;
}

EvalResult result_of(const EvalTotals& t, int64_t classes) {
  EvalResult r;
  r.samples = int64_t(t.count);
  r.loss = t.loss_sum / std::max(1.0, t.count);
  if (t.detection()) {
    r.top1 = -1, r.map50 = t.map50, r.map50_95 = t.map50_95;
  } else {
    r.top1 = t.top1 / std::max(1.0, t.count);
    if (classes >= 5) r.top5 = t.top5 / std::max(1.0, t.count);
  }
  return r;
}

// --weights: rank 0 reads them (every tensor of the model must be there) into a checkpoint's host layout.
CheckpointTensors weights_as_tensors(const EvalConfig& cfg, const dist::World& world, const nn::ParamBuffer& params) {
  CheckpointTensors t;
  dist::agree_on_root(world.comm(), [&] {
    InitialWeights w = read_initial_weights(cfg.weights, params);
    HT_CHECK(w.kept.empty(), cfg.weights, ": has no tensor ", w.kept.front(), w.kept.size() > 1 ? " (and " +
             std::to_string(w.kept.size() - 1) + " more)" : "", " of ", cfg.model, " in its shape");
    t.values = std::move(w.values), t.states = std::move(w.states);
    t.momentum.assign(t.values.size(), 0.0f);
  });
  return t;
}

// Rank 0's lines.
void print_evaluation(const EvalConfig& cfg, const ModelFacts& facts, int64_t step, bool averaged, const Setup& s,
                      int ranks, const EvalResult& r) {
  if (!cfg.quiet)
    std::printf("eval: %s (%s, %s%s) on %s, %d rank(s)\n", cfg.weights.empty() ? cfg.checkpoint.c_str() : cfg.weights.c_str(),
                facts.name.c_str(), cfg.weights.empty() ? ("step " + std::to_string(step)).c_str() : "weights file",
                averaged ? ", moving average of the weights" : "", s.val->info().path.c_str(), ranks);
  if (r.map50 >= 0) {  // a detector
    std::printf("samples %lld  loss %.4f  mAP@0.5 %.4f  mAP@0.5:0.95 %.4f", (long long)r.samples, r.loss, r.map50,
                r.map50_95);
  } else {
    std::printf("samples %lld  loss %.4f  top-1 %.2f%%", (long long)r.samples, r.loss, 100.0 * r.top1);
    if (r.top5 >= 0) std::printf("  top-5 %.2f%%", 100.0 * r.top5);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

EvalResult run_evaluation(const EvalConfig& cfg) {
  dist::World& world = dist::World::get();
  std::optional<LoadedCheckpoint> loaded;
  const ModelFacts facts = checkpoint_facts(cfg, world, loaded);
  Setup s = evaluation_setup(cfg, world, facts, loaded);
  CheckpointTensors tensors;
  int64_t step = 0;
  if (!cfg.weights.empty()) tensors = weights_as_tensors(cfg, world, s.model->params());
  if (loaded) tensors = std::move(loaded->tensors), step = loaded->info.global_step;
  broadcast_checkpoint(world.comm(), world.rank() == 0, tensors, step, s.model->params());
  // A --ema-decay run's checkpoint is evaluated with its moving average, which its validation used too.
  const bool averaged = tensors.has_ema();
  if (averaged) tensors.values = std::move(tensors.ema_values), tensors.states = std::move(tensors.ema_states);
  apply_checkpoint(tensors, s.model->params(), nullptr);

  std::unique_ptr<DeviceInput> input;
  if (s.device_kind == Device::CUDA) {
    s.model->to(Device::CUDA);
    input = std::make_unique<DeviceInput>(s.val->info());
  }
  std::string dump_error;
  FirstBatchHook hook;
  if (!cfg.dump_batch.empty())
    hook = [&](const Tensor& x, const std::vector<int32_t>& labels, const Tensor& logits) {
      try {
        write_dump(cfg.dump_batch, x, labels, logits);
      } catch (const Error& e) {
        dump_error = e.message();
      }
    };
  std::optional<CocoResults> coco;  // --save-json, rank 0
  dist::agree_on_root(world.comm(), [&] {
    if (!cfg.save_json.empty())
      coco.emplace(data::read_image_origins(s.val->info()), s.val->info().height, s.val->info().num_samples);
  });
  EvalTotals t;
  if (!cfg.save_json.empty()) {  // a detector (checked at set-up); rank 0 holds `coco`
    const DetectionTotals d = evaluate_detection(*s.model, *s.val, input.get(), world.comm(), cfg.batch, hook,
                                                 [&](int64_t image, const std::vector<detect::Detection>& dets) {
                                                   if (coco) coco->add_image(image, dets);
                                                 });
    t.loss_sum = d.loss_sum, t.count = d.count, t.map50 = d.map.map50, t.map50_95 = d.map.map50_95;
  } else {
    t = evaluate(*s.model, *s.val, input.get(), world.comm(), cfg.batch, hook);
  }
  dist::agree_on_root(world.comm(), [&] {
    HT_CHECK(dump_error.empty(), dump_error);
    if (!coco) return;
    coco->write(cfg.save_json);
  });

  const EvalResult r = result_of(t, facts.classes);
  if (world.rank() == 0) print_evaluation(cfg, facts, step, averaged, s, world.size(), r);
  if (coco && !cfg.quiet)
    std::printf("detections: %lld written to %s as COCO results (%s)\n", (long long)coco->detections(),
                cfg.save_json.c_str(), coco->mapped() ? "boxes in the original images' pixels"
                : "the dataset records no image origins: image ids are its indices, boxes in its letterboxed images");
  return r;
}

}  // namespace hetrain::train

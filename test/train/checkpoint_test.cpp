// Checkpoint files (src/train/checkpoint.cpp) and the evaluation's top-k count, without MPI: a round trip
// keeps every tensor and field bit for bit, a changed tensor fails the checksum, the folder keeps the
// newest K files and removes only dead writers' temporaries.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"

using namespace hetrain;
using namespace hetrain::train;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/hetrain-ckpt-test.XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::unique_ptr<nn::Model> resnet20() {
  nn::ModelConfig mc;
  mc.name = "resnet20", mc.height = mc.width = 8, mc.num_classes = 5;
  auto m = nn::Model::create(mc);
  m->init(7);
  return m;
}

CheckpointTensors tensors_of(const nn::Model& m) {
  CheckpointTensors t;
  const auto& p = m.params();
  t.values.assign(p.values().data(), p.values().data() + p.count());
  t.states.assign(p.states().data(), p.states().data() + p.state_count());
  for (size_t i = 0; i < t.states.size(); ++i) t.states[i] += 0.25f * float(i % 7);  // not the initial values
  t.momentum.assign(t.values.size(), 0.0f);  // zero between parameters, as the optimizer keeps it
  for (const nn::ParamSpec& s : p.specs())
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) t.momentum[size_t(i)] = 1e-3f * float(i % 101) - 0.05f;
  t.num_batches_tracked = 123;
  return t;
}

CheckpointInfo info_of() {
  CheckpointInfo c;
  c.model = "resnet20";
  c.input_shape = {3, 8, 8};
  c.num_classes = 5;
  c.global_step = 123, c.epoch = 2, c.step_in_epoch = 3, c.samples_in_epoch = 96;
  c.steps_per_epoch = 60, c.global_batch = 32, c.num_samples = 1920;
  c.seed = 0xfedcba9876543210ull;
  c.world_size = 3;
  c.schedule.base_lr = 0.1f, c.schedule.warmup_steps = 10, c.schedule.decay = "step";
  c.schedule.milestones = {60, 120}, c.schedule.gamma = 0.5f;
  c.schedule.warmup_bias_lr = 0.1f, c.schedule.warmup_momentum = 0.8f;
  c.peak_lr = 0.1f, c.total_steps = 180;
  c.sgd.momentum = 0.9f, c.sgd.nesterov = true, c.sgd.weight_decay = 5e-4f, c.sgd.decay_bn_and_bias = false;
  c.loss_scale = 8192, c.loss_scale_good_steps = 1234;
  c.config_text = "model=resnet20\nlr=0.1\n";
  c.split = {10, 0, 22};
  c.alpha = {0.01, 0, 0.02};
  c.beta = {1e-3, 0, 2e-3};
  return c;
}

}  // namespace

TEST(Checkpoint, RoundTripKeepsEveryBit) {
  TempDir dir;
  auto m = resnet20();
  const CheckpointTensors t = tensors_of(*m);
  const std::string path = checkpoint_path(dir.path.string(), 123);
  EXPECT_EQ(fs::path(path).filename(), "checkpoint-00000123.h5");
  write_checkpoint(path, info_of(), m->params(), t);

  const CheckpointInfo c = read_checkpoint_info(path);
  const CheckpointInfo want = info_of();
  EXPECT_EQ(c.model, want.model);
  EXPECT_EQ(c.input_shape, want.input_shape);
  EXPECT_EQ(c.num_classes, want.num_classes);
  EXPECT_EQ(c.global_step, 123);
  EXPECT_EQ(c.epoch, 2);
  EXPECT_EQ(c.step_in_epoch, 3);
  EXPECT_EQ(c.samples_in_epoch, 96);
  EXPECT_EQ(c.steps_per_epoch, 60);
  EXPECT_EQ(c.global_batch, 32);
  EXPECT_EQ(c.num_samples, 1920);
  EXPECT_EQ(c.seed, want.seed);
  EXPECT_EQ(c.world_size, 3);
  EXPECT_EQ(c.schedule.decay, "step");
  EXPECT_EQ(c.schedule.milestones, want.schedule.milestones);
  EXPECT_EQ(c.schedule.warmup_steps, 10);
  EXPECT_FLOAT_EQ(c.schedule.warmup_bias_lr, 0.1f);
  EXPECT_FLOAT_EQ(c.schedule.warmup_momentum, 0.8f);
  EXPECT_FLOAT_EQ(c.schedule.gamma, 0.5f);
  EXPECT_EQ(c.total_steps, 180);
  EXPECT_TRUE(c.sgd.nesterov);
  EXPECT_FALSE(c.sgd.decay_bn_and_bias);
  EXPECT_FLOAT_EQ(c.sgd.momentum, 0.9f);
  EXPECT_EQ(c.loss_scale, 8192);
  EXPECT_EQ(c.loss_scale_good_steps, 1234);
  EXPECT_EQ(c.config_text, want.config_text);
  EXPECT_EQ(c.split, want.split);
  EXPECT_EQ(c.beta, want.beta);

  const CheckpointTensors back = read_checkpoint_tensors(path, m->params());
  EXPECT_EQ(back.values, t.values);
  EXPECT_EQ(back.states, t.states);
  EXPECT_EQ(back.momentum, t.momentum);
  EXPECT_EQ(back.num_batches_tracked, 123);
  EXPECT_FALSE(back.has_ema());
  // Nothing but the file itself is left in the folder (no temporary).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);

  // A run at another precision has no loss scale, and its checkpoint none either.
  CheckpointInfo fp32 = info_of();
  fp32.loss_scale = 0;
  const std::string path2 = checkpoint_path(dir.path.string(), 124);
  write_checkpoint(path2, fp32, m->params(), t);
  EXPECT_EQ(read_checkpoint_info(path2).loss_scale, 0);
}

// --ema-decay: the moving average travels beside the model, in its own group, covered by the checksum.
TEST(Checkpoint, MovingAverageRoundTrips) {
  TempDir dir;
  auto m = resnet20();
  CheckpointTensors t = tensors_of(*m);
  t.ema_values = t.values, t.ema_states = t.states;
  for (float& v : t.ema_values) v *= 0.5f;
  for (float& v : t.ema_states) v += 1.0f;
  t.ema_updates = 77;
  const std::string path = checkpoint_path(dir.path.string(), 5);
  write_checkpoint(path, info_of(), m->params(), t);
  const CheckpointTensors back = read_checkpoint_tensors(path, m->params());
  ASSERT_TRUE(back.has_ema());
  EXPECT_EQ(back.ema_values, t.ema_values);
  EXPECT_EQ(back.ema_states, t.ema_states);
  EXPECT_EQ(back.ema_updates, 77);
  EXPECT_EQ(back.values, t.values);
  {  // one averaged value changed in place: the checksum notices
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t d = H5Dopen2(file, "ema/parameters/fc.bias", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    const float values[5] = {1, 2, 3, 4, 5};
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    H5Dclose(d), H5Fclose(file);
  }
  EXPECT_THROW(read_checkpoint_tensors(path, m->params()), Error);
}

TEST(Checkpoint, ChangedTensorFailsTheChecksum) {
  TempDir dir;
  auto m = resnet20();
  const CheckpointTensors t = tensors_of(*m);
  const std::string path = checkpoint_path(dir.path.string(), 1);
  write_checkpoint(path, info_of(), m->params(), t);
  EXPECT_NO_THROW(read_checkpoint_tensors(path, m->params()));
  // One momentum value changed in place, as a flipped bit on disk would: the file still opens.
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t d = H5Dopen2(file, "optimizer/momentum_buffer/layer2.1.conv1.weight", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    const hid_t space = H5Dget_space(d);
    hsize_t start[4] = {3, 2, 1, 0}, count[4] = {1, 1, 1, 1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t one = H5Screate_simple(4, count, nullptr);
    const float value = 42.0f;
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, one, space, H5P_DEFAULT, &value), 0);
    H5Sclose(one), H5Sclose(space), H5Dclose(d), H5Fclose(file);
  }
  try {
    read_checkpoint_tensors(path, m->params());
    ADD_FAILURE() << "a changed tensor value was not noticed";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("checksum mismatch"), std::string::npos) << e.message();
  }
}

// No checkpoint holds a non-finite value: the writer refuses, naming the tensor, and leaves the folder as
// it was (the newest checkpoint stays the last good one); in every group it writes.
TEST(Checkpoint, WriterRefusesANonFiniteTensorAndLeavesNothing) {
  TempDir dir;
  auto m = resnet20();
  const CheckpointTensors good = tensors_of(*m);
  const std::string earlier = checkpoint_path(dir.path.string(), 1);
  write_checkpoint(earlier, info_of(), m->params(), good);
  const nn::ParamSpec& spec = m->params().specs()[3];
  struct Case {
    const char* group;
    std::vector<float> CheckpointTensors::*field;
    int64_t at;
    float value;
  } cases[] = {{"/parameters/", &CheckpointTensors::values, spec.offset + 2, NAN},
               {"/optimizer/momentum_buffer/", &CheckpointTensors::momentum, spec.offset, INFINITY},
               {"/buffers/", &CheckpointTensors::states, 0, -INFINITY}};
  for (const Case& c : cases) {
    CheckpointTensors bad = good;
    (bad.*c.field)[size_t(c.at)] = c.value;
    const std::string path = checkpoint_path(dir.path.string(), 2);
    try {
      write_checkpoint(path, info_of(), m->params(), bad);
      ADD_FAILURE() << "a checkpoint with a non-finite value in " << c.group << " was written";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(std::string("refusing to write the checkpoint ") + path + ": its tensor " + c.group),
                std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find("1 of "), std::string::npos) << e.message();
    }
    EXPECT_EQ(list_checkpoints(dir.path.string()), std::vector<std::string>{earlier}) << c.group;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);  // no temporary either
}

TEST(Checkpoint, FolderPrunesOnlyItsOwnAndRemovesOnlyDeadWritersTemporaries) {
  TempDir dir;
  const std::string d = dir.path.string();
  for (int64_t step : {5, 40, 100, 7}) std::ofstream(checkpoint_path(d, step)) << "x";
  std::ofstream(d + "/notes.txt") << "not a checkpoint";
  std::ofstream(d + "/checkpoint-12.h5x") << "not one either";
  const auto listed = list_checkpoints(d);
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_EQ(fs::path(listed[0]).filename(), "checkpoint-00000100.h5");
  EXPECT_EQ(fs::path(listed[3]).filename(), "checkpoint-00000005.h5");
  EXPECT_EQ(checkpoint_step(listed[0]), 100);
  EXPECT_EQ(checkpoint_step(d + "/notes.txt"), -1);
  // Pruning keeps the newest of the files it may prune and touches no other: here the run may prune 5, 7
  // and 40 (100 is another run's, or damaged): 40 and 7 stay, 5 goes, 100 stays.
  std::vector<std::string> prunable = {checkpoint_path(d, 7), checkpoint_path(d, 5), checkpoint_path(d, 40)};
  const auto removed = prune_checkpoints(prunable, 2);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], checkpoint_path(d, 5));
  EXPECT_EQ(prunable, (std::vector<std::string>{checkpoint_path(d, 40), checkpoint_path(d, 7)}));
  EXPECT_EQ(list_checkpoints(d).size(), 3u);
  EXPECT_TRUE(fs::exists(checkpoint_path(d, 100)));
  EXPECT_TRUE(fs::exists(checkpoint_path(d, 7)));
  EXPECT_FALSE(fs::exists(checkpoint_path(d, 5)));

  // A temporary of this (live) process stays; one of a PID that cannot exist goes.
  const std::string mine = checkpoint_path(d, 200) + ".tmp-" + std::to_string(::getpid());
  const std::string dead = checkpoint_path(d, 201) + ".tmp-2147483646";
  std::ofstream(mine) << "x";
  std::ofstream(dead) << "x";
  const auto gone = remove_stale_temporaries(d);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], dead);
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(d + "/notes.txt"));
}

TEST(Checkpoint, WritableFolderCheck) {
  TempDir dir;
  EXPECT_NO_THROW(check_writable_folder((dir.path / "new").string(), "--checkpoint-dir"));
  EXPECT_TRUE(fs::is_directory(dir.path / "new"));
  std::ofstream((dir.path / "file").string()) << "x";
  EXPECT_THROW(check_writable_folder((dir.path / "file").string(), "--checkpoint-dir"), Error);
  EXPECT_THROW(check_writable_folder((dir.path / "file" / "sub").string(), "--checkpoint-dir"), Error);
}

TEST(Evaluate, TopKCountsTiesAgainstTheLabel) {
  // 3 samples, 6 classes.
  const float logits[] = {
      0.1f, 0.9f, 0.3f, 0.2f, 0.5f, 0.4f,  // label 1 is the largest: top-1
      0.6f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f,  // label 4 is 5th: top-5 but not top-1
      0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,  // all tied: label 5 comes after 5 lower indices, label 0 first
  };
  const int32_t labels_a[] = {1, 4, 5};
  EXPECT_EQ(topk_correct(logits, labels_a, 3, 6, 1), 1);
  EXPECT_EQ(topk_correct(logits, labels_a, 3, 6, 5), 2);
  const int32_t labels_b[] = {0, 5, 0};
  EXPECT_EQ(topk_correct(logits, labels_b, 3, 6, 1), 1);  // only the all-tied row, where 0 wins the tie
  EXPECT_EQ(topk_correct(logits, labels_b, 3, 6, 5), 1);  // label 0 of row 0 is the smallest; label 5 of row 1 is 6th
}

// --init-from FILE: a new run that starts from other weights, with a fresh schedule, optimizer and sample
// order (docs/checkpoint-format.md, "Starting from other weights"): a hetrain checkpoint (its moving average
// of the weights when it holds one, as YOLOv5 fine-tunes from its EMA) or a weights file written by
// data_tools/torch_to_hetrain.py (a PyTorch state_dict, e.g. YOLOv5's yolov5s.pt). Tensors are matched by
// name and shape; the model's tensors the file does not have in that shape keep their initialisation
// (a detector fine-tuned to another class count: its Detect convs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/nn.hpp"

namespace hetrain::train {

struct InitialWeights {
  std::vector<float> values, states;  // the model's layout: the file's tensors over the model's own
  int64_t loaded = 0;                 // tensors taken from the file
  std::vector<std::string> kept;      // the model's tensors the file lacks, or has in another shape
  std::string what;                   // "checkpoint step 120, moving average" / "weights (source)"
};

// Reads `path` against `params`, starting from the model's current values. Throws, naming the file, when
// it is not a hetrain checkpoint or weights file, fails its checksum, or has no tensor the model can take.
InitialWeights read_initial_weights(const std::string& path, const nn::ParamBuffer& params);

// The note rank 0 prints: what was loaded, and which tensors kept their initialisation.
std::string initial_weights_note(const std::string& path, const InitialWeights& w);

}  // namespace hetrain::train

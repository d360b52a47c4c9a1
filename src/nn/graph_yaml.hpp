// nn/graph_yaml.hpp — reading a model file in YOLOv5's YAML format (docs/models.md) into plain structs.
//
// The reader checks the file's structure only: top-level keys and their types, and that every entry of
// `backbone` and `head` is [from, number, module, args] with `from` pointing at earlier layers. What a
// module's args mean, channels and spatial sizes are the graph builder's business (nn/graph_model.cpp).
// Every error is one hetrain::Error line that names the file and, for an entry, where it sits:
//   "models/x.yaml: head[3] (layer 13): from 14 points forward (a layer takes earlier outputs only)".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::nn {

// What a model file may ask for (docs/models.md, "Limits"): far above any published network, low enough
// that reading, building or describing a model stays quick and no size it implies can overflow.
constexpr int kMaxRepeats = 1000;             // `number`, as written and after depth_multiple
constexpr double kMaxMultiple = 100;          // depth_multiple, width_multiple
constexpr int kMaxModelInt = 65536;           // nc, ch, and every integer argument (channels, widths, kernels...)
constexpr int kMaxChannels = 65536;           // a module's channels after width_multiple
constexpr int kMaxAnchorsPerLevel = 256;      // w,h pairs per level
constexpr int64_t kMaxLayerValues = int64_t(1) << 31;  // values per sample of one layer's output

// One argument of a module, as written in the file (YAML scalar types as YOLOv5 reads them).
struct GraphArg {
  enum class Kind { Int, Float, Bool, None, String, List };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;               // String: the text ('nearest', 'nc', 'anchors', ...)
  std::vector<GraphArg> list;  // List: the items
  std::string text() const;    // as Python would print it: 64, 0.5, True, None, 'nearest', [1, 2]
};

struct GraphEntry {
  std::string section;    // "backbone" or "head"
  int section_index = 0;  // position in its section
  int index = 0;          // layer index over both sections (YOLOv5's i, "model.<i>")
  std::vector<int> from_written;  // as written (-1, absolute index, negative = relative)
  std::vector<int> from;          // resolved: absolute layer indices < index; -1 = the model's input
  int number = 1;                 // repeats as written (before depth_multiple)
  std::string module;             // as written, e.g. "Conv", "nn.Upsample"
  std::vector<GraphArg> args;
  std::string where;  // "<path>: head[3] (layer 13)" — the prefix of every error about this entry
};

struct GraphFile {
  std::string path;
  int nc = 0;
  double depth_multiple = 1.0, width_multiple = 1.0;
  // anchors[level] = w, h pairs in pixels (the list form); empty when the file has no `anchors`.
  std::vector<std::vector<double>> anchors;
  int anchors_count_only = 0;  // `anchors: 3` (per level, values left to AutoAnchor): rejected by Detect
  int ch = 0;                  // 0: not in the file
  std::vector<GraphEntry> layers;  // backbone then head
};

// Reads and checks `path`; throws hetrain::Error ("<path>: ...") on any problem.
GraphFile read_graph_file(const std::string& path);
// The same from YAML text; `path` only names it in messages (tests).
GraphFile parse_graph_text(const std::string& text, const std::string& path);

}  // namespace hetrain::nn

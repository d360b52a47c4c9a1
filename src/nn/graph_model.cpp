// nn/graph_model.cpp — building a graph model from a YAML file (YOLOv5's parse_model), running it, and
// describing it (`hetrain models --show`).
#include "nn/graph_model.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "hetrain/error.hpp"
#include "hetrain/resources.hpp"
#include "nn/init.hpp"
#include "nn/linear.hpp"
#include "nn/pooling.hpp"
#include "nn/unary_layer.hpp"
#include "nn/residual.hpp"
#include "ops/add/add.hpp"
#include "ops/relu/relu.hpp"
#include "ops/silu/silu.hpp"

namespace hetrain::nn {

namespace {

// ---------------------------------------------------------------- arguments

// A module's argument list, checked against its signature, e.g. Conv [c2, k=1, s=1, p=None, g=1, act=True].
class Args {
 public:
  Args(const std::string& where, const std::string& module, const std::vector<GraphArg>& args,
       std::vector<std::string> names, size_t required)
      : where_(where), module_(module), args_(args), names_(std::move(names)) {
    std::string sig;
    for (size_t k = 0; k < names_.size(); ++k) sig += (k ? ", " : "") + names_[k];
    signature_ = module_ + " [" + sig + "]";
    HT_CHECK(args_.size() >= required && args_.size() <= names_.size(), where_, ": ", signature_, " takes ",
             required == names_.size() ? std::to_string(required)
                                       : std::to_string(required) + " to " + std::to_string(names_.size()),
             " args, got ", args_.size());
  }
  size_t size() const { return args_.size(); }
  bool given(size_t k) const { return k < args_.size() && args_[k].kind != GraphArg::Kind::None; }
  const GraphArg& at(size_t k) const { return args_[k]; }
  std::string name(size_t k) const {
    const std::string& n = names_[k];
    return n.substr(0, n.find('='));
  }
  [[noreturn]] void bad(size_t k, const std::string& want) const {
    HT_THROW(where_, ": ", module_, " arg ", k, " (", name(k), ") must be ", want, ", got ",
             k < args_.size() ? args_[k].text() : std::string("nothing"));
  }
  int integer(size_t k, int def, int lo = INT_MIN) const {
    if (!given(k)) return def;
    const GraphArg& a = args_[k];
    int64_t v = 0;
    if (a.kind == GraphArg::Kind::Int) {
      v = a.i;
    } else if (a.kind == GraphArg::Kind::Float && a.f == std::floor(a.f) && std::fabs(a.f) < 1e9) {
      v = int64_t(a.f);
    } else {
      bad(k, lo == INT_MIN ? std::string("an integer") : "an integer >= " + std::to_string(lo));
    }
    if (v < lo) bad(k, "an integer >= " + std::to_string(lo));
    if (v > kMaxModelInt) bad(k, "at most " + std::to_string(kMaxModelInt) + " (out of range for a model file)");
    return int(v);
  }
  bool flag(size_t k, bool def) const {
    if (!given(k)) return def;
    if (args_[k].kind != GraphArg::Kind::Bool) bad(k, "True or False");
    return args_[k].b;
  }
  double number(size_t k, double def) const {
    if (!given(k)) return def;
    const GraphArg& a = args_[k];
    if (a.kind == GraphArg::Kind::Int) return double(a.i);
    if (a.kind != GraphArg::Kind::Float) bad(k, "a number");
    return a.f;
  }
  // The written args from k on, as text ("" when none), for the printed argument list.
  std::string rest(size_t k) const {
    std::string t;
    for (size_t j = k; j < args_.size(); ++j) t += ", " + args_[j].text();
    return t;
  }

 private:
  std::string where_, module_;
  const std::vector<GraphArg>& args_;
  std::vector<std::string> names_;
  std::string signature_;
};

std::string hw_str(const Shape& s) { return std::to_string(s[1]) + "×" + std::to_string(s[2]); }

std::string list_str(const std::vector<int>& v) {
  if (v.size() == 1) return std::to_string(v[0]);
  std::string t = "[";
  for (size_t k = 0; k < v.size(); ++k) t += (k ? ", " : "") + std::to_string(v[k]);
  return t + "]";
}

std::string layer_name(int j) { return j < 0 ? std::string("the input") : "layer " + std::to_string(j); }

// ---------------------------------------------------------------- building one entry

struct Ctx {
  const GraphFile& file;
  const GraphEntry& e;
  std::vector<Shape> in;  // per input (without N)
  std::vector<GraphArg> args;  // 'nc' and 'anchors' resolved
  int n = 1;                   // repeats after depth_multiple
  int nc = 0, no = 0;          // no: the Detect width na·(5 + nc), exempt from width scaling
  int image_h = 0, image_w = 0;
  ParamBuffer& pb;
  Workspace* ws;
  const std::string& where() const { return e.where; }
  // YOLOv5's make_divisible(c2·gw, 8), unless c2 is the Detect width.
  int width(int c2) const {
    if (c2 == no) return c2;
    const double w = std::ceil(c2 * file.width_multiple / 8.0) * 8;  // c2 and the multiple are bounded
    HT_CHECK(w <= kMaxChannels, where(), ": ", c2, " channels × width_multiple ", file.width_multiple, " = ", w,
             " channels, out of range (at most ", kMaxChannels, ")");
    return int(w);
  }
  void need_image(const std::string& module, const Shape& s, int input = 0) const {
    HT_CHECK(s.size() == 3, where(), ": ", module, " needs an image input [C, H, W], but ",
             layer_name(e.from[input]), " gives flat features ", shape_str(s));
  }
};

// Output of a k×k window with stride s and padding p, or an error naming the module.
Shape window_out(const Ctx& c, const std::string& module, const Shape& in, int channels, int k, int s, int p) {
  c.need_image(module, in);
  const int64_t h = in[1] + 2 * p - k, w = in[2] + 2 * p - k;
  HT_CHECK(h >= 0 && w >= 0, c.where(), ": input ", hw_str(in), " is too small for ", module, " (", k, "×", k,
           " window, stride ", s, ", padding ", p, ")");
  return {channels, h / s + 1, w / s + 1};
}

// A one-input module: builds one copy (prefix = its parameter names' prefix) for input `in`, returns its
// output shape; `args_text` gets the printed argument list (YOLOv5's: [c1, c2, ...] for the scaled ones).
using SingleFn = Shape (*)(const Ctx&, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                           std::string* args_text);
struct MultiBuilt {
  std::unique_ptr<MultiInputLayer> layer;
  Shape out;
  std::string args_text;
  std::optional<DetectHeadLayout> head;
};
using MultiFn = MultiBuilt (*)(const Ctx&, const std::string& prefix);

Shape build_conv(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                 std::string* text) {
  Args a(c.where(), "Conv", c.args, {"c2", "k=1", "s=1", "p=None", "g=1", "act=True"}, 1);
  c.need_image("Conv", in);
  const int c1 = int(in[0]), c2 = c.width(a.integer(0, 0, 1));
  const int k = a.integer(1, 1, 1), s = a.integer(2, 1, 1), p = a.integer(3, k / 2, 0);
  if (a.integer(4, 1) != 1) a.bad(4, "1 (grouped convolutions are not supported)");
  const bool act = a.flag(5, true);
  const Shape out = window_out(c, "Conv", in, c2, k, s, p);
  *layer = std::make_unique<YoloConv>(c.pb, prefix, c1, c2, k, s, p, act, c.ws);
  *text = "[" + std::to_string(c1) + ", " + std::to_string(c2) + a.rest(1) + "]";
  return out;
}

// The arguments Bottleneck and C3 share, [c2, shortcut=True, g=1, e=0.5], checked; c2 after width_multiple.
struct BottleneckArgs {
  int c1, c2;
  bool shortcut;
  double e;
};
BottleneckArgs bottleneck_args(const Ctx& c, const Args& a, const char* module, const Shape& in) {
  c.need_image(module, in);
  BottleneckArgs r;
  r.c1 = int(in[0]), r.c2 = c.width(a.integer(0, 0, 1));
  r.shortcut = a.flag(1, true);
  if (a.integer(2, 1) != 1) a.bad(2, "1 (grouped convolutions are not supported)");
  r.e = a.number(3, 0.5);
  if (!(r.e > 0) || int(r.c2 * r.e) < 1) a.bad(3, "a positive fraction leaving at least 1 hidden channel");
  return r;
}

Shape build_bottleneck(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                       std::string* text) {
  Args a(c.where(), "Bottleneck", c.args, {"c2", "shortcut=True", "g=1", "e=0.5"}, 1);
  const BottleneckArgs b = bottleneck_args(c, a, "Bottleneck", in);
  *layer = std::make_unique<YoloBottleneck>(c.pb, prefix, b.c1, b.c2, b.shortcut, b.e, c.ws);
  *text = "[" + std::to_string(b.c1) + ", " + std::to_string(b.c2) + a.rest(1) + "]";
  return {b.c2, in[1], in[2]};
}

// C3 takes the repeats itself (YOLOv5 inserts n into its args): the caller builds it once.
Shape build_c3(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
               std::string* text) {
  Args a(c.where(), "C3", c.args, {"c2", "shortcut=True", "g=1", "e=0.5"}, 1);
  const BottleneckArgs b = bottleneck_args(c, a, "C3", in);
  *layer = std::make_unique<C3>(c.pb, prefix, b.c1, b.c2, c.n, b.shortcut, b.e, c.ws);
  *text = "[" + std::to_string(b.c1) + ", " + std::to_string(b.c2) + ", " + std::to_string(c.n) + a.rest(1) + "]";
  return {b.c2, in[1], in[2]};
}

Shape build_sppf(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                 std::string* text) {
  Args a(c.where(), "SPPF", c.args, {"c2", "k=5"}, 1);
  c.need_image("SPPF", in);
  const int c1 = int(in[0]), c2 = c.width(a.integer(0, 0, 1));
  const int k = a.integer(1, 5, 1);
  if (k % 2 == 0) a.bad(1, "odd (the pools keep the size)");
  HT_CHECK(c1 >= 2, c.where(), ": SPPF needs at least 2 input channels (cv1 halves them), got ", c1);
  *layer = std::make_unique<SPPF>(c.pb, prefix, c1, c2, k, c.ws);
  *text = "[" + std::to_string(c1) + ", " + std::to_string(c2) + a.rest(1) + "]";
  return {c2, in[1], in[2]};
}

Shape build_upsample(const Ctx& c, const std::string&, const Shape& in, std::unique_ptr<Layer>* layer,
                     std::string* text) {
  Args a(c.where(), "Upsample", c.args, {"size=None", "scale_factor", "mode='nearest'"}, 2);
  if (a.given(0)) a.bad(0, "None (upsampling to a fixed size is not supported: give a scale factor)");
  const int f = a.integer(1, 0, 1);
  if (a.size() > 2 && !(a.at(2).kind == GraphArg::Kind::String && a.at(2).s == "nearest"))
    a.bad(2, "'nearest' (the only mode supported)");
  c.need_image("Upsample", in);
  *layer = std::make_unique<UpsampleNearest>(f);
  *text = "[" + a.rest(0).substr(a.size() ? 2 : 0) + "]";
  return {in[0], in[1] * f, in[2] * f};
}

Shape build_conv2d(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                   std::string* text) {
  Args a(c.where(), "Conv2d", c.args, {"c2", "k=1", "s=1", "p=0", "bias=True"}, 1);
  c.need_image("Conv2d", in);
  const int c1 = int(in[0]), c2 = a.integer(0, 0, 1);
  const int k = a.integer(1, 1, 1), s = a.integer(2, 1, 1), p = a.integer(3, 0, 0);
  const bool bias = a.flag(4, true);
  const Shape out = window_out(c, "Conv2d", in, c2, k, s, p);
  *layer = std::make_unique<Conv2d>(c.pb, prefix, c1, c2, k, s, p, bias, c.ws);
  *text = "[" + std::to_string(c1) + ", " + std::to_string(c2) + a.rest(1) + "]";
  return out;
}

Shape build_batchnorm(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                      std::string* text) {
  Args a(c.where(), "BatchNorm2d", c.args, {"eps=1e-05", "momentum=0.1"}, 0);
  c.need_image("BatchNorm2d", in);
  const double eps = a.number(0, 1e-5), momentum = a.number(1, 0.1);
  if (!(eps > 0)) a.bad(0, "positive");
  if (!(momentum >= 0 && momentum <= 1)) a.bad(1, "in [0, 1]");
  *layer = std::make_unique<BatchNorm2d>(c.pb, prefix, int(in[0]), float(momentum), float(eps));
  *text = "[" + std::to_string(in[0]) + a.rest(0) + "]";
  return in;
}

// An element-wise module over its op (ops/common/unary.hpp); PyTorch's `inplace` is accepted and ignored
// (outputs are never written in place here).
template <const ops::UnaryOp& kOp, const char* kModule>
Shape build_unary(const Ctx& c, const std::string&, const Shape& in, std::unique_ptr<Layer>* layer,
                  std::string* text) {
  Args a(c.where(), kModule, c.args, {"inplace=False"}, 0);
  a.flag(0, false);
  *layer = std::make_unique<UnaryLayer>(kOp, kModule);
  *text = "[]";
  return in;
}
constexpr char kReLU[] = "ReLU", kSiLU[] = "SiLU";

template <bool kMax>
Shape build_pool(const Ctx& c, const std::string&, const Shape& in, std::unique_ptr<Layer>* layer,
                 std::string* text) {
  const char* name = kMax ? "MaxPool2d" : "AvgPool2d";
  Args a(c.where(), name, c.args, {"k", "s=k", "p=0"}, 1);
  const int k = a.integer(0, 0, 1), s = a.integer(1, k, 1), p = a.integer(2, 0, 0);
  if (2 * p > k) a.bad(2, "at most half the window (" + std::to_string(k / 2) + ")");
  const Shape out = window_out(c, name, in, int(in.size() == 3 ? in[0] : 0), k, s, p);
  if (kMax)
    *layer = std::make_unique<MaxPool2d>(k, s, p);
  else
    *layer = std::make_unique<AvgPool2d>(k, s, p);
  *text = "[" + a.rest(0).substr(2) + "]";
  return out;
}

Shape build_global_avgpool(const Ctx& c, const std::string&, const Shape& in, std::unique_ptr<Layer>* layer,
                           std::string* text) {
  Args a(c.where(), "GlobalAvgPool", c.args, {}, 0);
  c.need_image("GlobalAvgPool", in);
  *layer = std::make_unique<GlobalAvgPool>();
  *text = "[]";
  return {in[0]};
}

Shape build_flatten(const Ctx& c, const std::string&, const Shape& in, std::unique_ptr<Layer>* layer,
                    std::string* text) {
  Args a(c.where(), "Flatten", c.args, {}, 0);
  *layer = std::make_unique<Flatten>();
  *text = "[]";
  return {shape_numel(in)};
}

Shape build_linear(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                   std::string* text) {
  Args a(c.where(), "Linear", c.args, {"out_features"}, 1);
  HT_CHECK(in.size() == 1, c.where(), ": Linear needs flat features, but ", layer_name(c.e.from[0]), " gives ",
           shape_str(in), " (put Flatten or GlobalAvgPool before it)");
  const int out = a.integer(0, 0, 1);
  *layer = std::make_unique<Linear>(c.pb, prefix, int(in[0]), out);
  *text = "[" + std::to_string(in[0]) + ", " + std::to_string(out) + "]";
  return {out};
}

template <typename Block>
Shape build_resblock(const Ctx& c, const std::string& prefix, const Shape& in, std::unique_ptr<Layer>* layer,
                     std::string* text) {
  const char* name = Block::kExpansion == 1 ? "BasicBlock" : "ResBottleneck";
  Args a(c.where(), name, c.args, {"planes", "s=1"}, 1);
  c.need_image(name, in);
  const int planes = a.integer(0, 0, 1), s = a.integer(1, 1, 1);
  const Shape out = window_out(c, name, in, planes * Block::kExpansion, 3, s, 1);
  *layer = std::make_unique<Block>(c.pb, prefix, int(in[0]), planes, s, c.ws);
  *text = "[" + std::to_string(in[0]) + ", " + std::to_string(planes) + a.rest(1) + "]";
  return out;
}

MultiBuilt build_concat(const Ctx& c, const std::string&) {
  Args a(c.where(), "Concat", c.args, {"dimension=1"}, 0);
  if (a.given(0) && a.integer(0, 1) != 1) a.bad(0, "1 (channels: the only dimension supported)");
  int64_t channels = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    c.need_image("Concat", c.in[k], int(k));
    HT_CHECK(c.in[k][1] == c.in[0][1] && c.in[k][2] == c.in[0][2], c.where(), ": Concat inputs have ",
             hw_str(c.in[0]), " and ", hw_str(c.in[k]), " spatial sizes (", layer_name(c.e.from[0]), " and ",
             layer_name(c.e.from[k]), ")");
    channels += c.in[k][0];
  }
  MultiBuilt b;
  b.layer = std::make_unique<ConcatChannels>();
  b.out = {channels, c.in[0][1], c.in[0][2]};
  b.args_text = "[" + a.rest(0).substr(a.size() ? 2 : 0) + "]";
  return b;
}

MultiBuilt build_add(const Ctx& c, const std::string&) {
  Args a(c.where(), "Add", c.args, {}, 0);
  HT_CHECK(c.in.size() >= 2, c.where(), ": Add needs at least two inputs (from [-1, j]), got ", c.in.size());
  for (size_t k = 1; k < c.in.size(); ++k)
    HT_CHECK(c.in[k] == c.in[0], c.where(), ": Add inputs have shapes ", shape_str(c.in[0]), " and ",
             shape_str(c.in[k]), " (", layer_name(c.e.from[0]), " and ", layer_name(c.e.from[k]), ")");
  MultiBuilt b;
  b.layer = std::make_unique<AddInputs>();
  b.out = c.in[0];
  b.args_text = "[]";
  return b;
}

// A = Σ over levels of na·(image_h / stride)·(image_w / stride).
int64_t head_rows(const DetectHeadLayout& h) {
  int64_t rows = 0;
  for (const int s : h.strides) rows += int64_t(h.anchors_per_level) * (h.image_h / s) * (h.image_w / s);
  return rows;
}

MultiBuilt build_detect(const Ctx& c, const std::string& prefix) {
  Args a(c.where(), "Detect", c.args, {"nc", "anchors"}, 2);
  const int nc = a.integer(0, 0, 1);
  HT_CHECK(nc == c.nc, c.where(), ": Detect has nc ", nc, " but the model has ", c.nc,
           " classes (write 'nc' to take the model's)");
  const GraphArg& an = a.at(1);
  HT_CHECK(an.kind != GraphArg::Kind::Int, c.where(), ": Detect anchors given as a count (", an.i,
           " per level): hetrain does not compute anchors (no AutoAnchor): write them as lists of w,h pixel pairs, "
           "one list per level");
  if (an.kind != GraphArg::Kind::List || an.list.empty()) a.bad(1, "a list per level of w,h pairs in pixels");
  std::vector<std::vector<double>> anchors;
  for (const GraphArg& level : an.list) {
    std::vector<double> v;
    if (level.kind != GraphArg::Kind::List || level.list.empty() || level.list.size() % 2)
      a.bad(1, "w,h pairs per level");
    for (const GraphArg& x : level.list) {
      double d = x.kind == GraphArg::Kind::Int ? double(x.i) : x.kind == GraphArg::Kind::Float ? x.f : -1;
      if (!(d > 0)) a.bad(1, "positive anchor sizes");
      v.push_back(d);
    }
    if (!anchors.empty() && v.size() != anchors[0].size()) a.bad(1, "the same number of anchors on every level");
    anchors.push_back(std::move(v));
  }
  HT_CHECK(anchors.size() == c.in.size(), c.where(), ": Detect has ", anchors.size(), " anchor levels but ",
           c.in.size(), " inputs (from ", list_str(c.e.from_written), ")");
  const int na = int(anchors[0].size() / 2);
  HT_CHECK(c.no == 0 || na * (nc + 5) == c.no, c.where(), ": Detect has ", na,
           " anchors per level but the file's top-level anchors have ", c.no / (nc + 5));
  DetectHeadLayout head;
  head.num_classes = nc, head.anchors_per_level = na, head.image_h = c.image_h, head.image_w = c.image_w;
  std::vector<int> in_channels;
  std::string chs;
  for (size_t l = 0; l < c.in.size(); ++l) {
    c.need_image("Detect", c.in[l], int(l));
    const int gh = int(c.in[l][1]), gw = int(c.in[l][2]);
    HT_CHECK(c.image_h % gh == 0 && c.image_w % gw == 0 && c.image_h / gh == c.image_w / gw, c.where(),
             ": Detect input ", l, " (", layer_name(c.e.from[l]), ") is ", gh, "×", gw, " for a ", c.image_h, "×",
             c.image_w, " image: the image size must be a multiple of every level's stride");
    head.strides.push_back(c.image_h / gh);
    for (double v : anchors[l]) head.anchors.push_back(float(v));
    in_channels.push_back(int(c.in[l][0]));
    chs += (l ? ", " : "") + std::to_string(c.in[l][0]);
  }
  MultiBuilt b;
  b.layer = std::make_unique<Detect>(c.pb, prefix, nc, na, in_channels, c.ws);
  b.out = {head_rows(head), nc + 5};
  b.args_text = "[" + std::to_string(nc) + ", " + an.text() + ", [" + chs + "]]";
  b.head = std::move(head);
  return b;
}

struct ModuleKind {
  const char* name;
  bool torch;        // also accepted as "nn.<name>"
  bool absorbs_n;    // takes the repeats itself (C3)
  SingleFn single;   // one input...
  MultiFn multi;     // ...or several
};

const ModuleKind kModules[] = {
    {"Conv", false, false, build_conv, nullptr},
    {"Bottleneck", false, false, build_bottleneck, nullptr},
    {"C3", false, true, build_c3, nullptr},
    {"SPPF", false, false, build_sppf, nullptr},
    {"Upsample", true, false, build_upsample, nullptr},
    {"Concat", false, false, nullptr, build_concat},
    {"Detect", false, false, nullptr, build_detect},
    {"Conv2d", true, false, build_conv2d, nullptr},
    {"BatchNorm2d", true, false, build_batchnorm, nullptr},
    {"ReLU", true, false, build_unary<ops::relu_op, kReLU>, nullptr},
    {"SiLU", true, false, build_unary<ops::silu_op, kSiLU>, nullptr},
    {"MaxPool2d", true, false, build_pool<true>, nullptr},
    {"AvgPool2d", true, false, build_pool<false>, nullptr},
    {"GlobalAvgPool", false, false, build_global_avgpool, nullptr},
    {"Flatten", true, false, build_flatten, nullptr},
    {"Linear", true, false, build_linear, nullptr},
    {"Add", false, false, nullptr, build_add},
    {"BasicBlock", false, false, build_resblock<BasicBlock>, nullptr},
    {"ResBottleneck", false, false, build_resblock<Bottleneck>, nullptr},
};

const ModuleKind* find_module(const std::string& written) {
  for (const ModuleKind& m : kModules) {
    if (written == m.name) return &m;
    if (m.torch && written == std::string("nn.") + m.name) return &m;
  }
  return nullptr;
}

std::string known_modules() {
  std::string t;
  for (const ModuleKind& m : kModules) t += (t.empty() ? "" : ", ") + std::string(m.name);
  return t;
}

// ---------------------------------------------------------------- the whole graph

struct Built {
  std::vector<GraphLayerInfo> info;
  std::vector<std::unique_ptr<MultiInputLayer>> nodes;
  std::optional<DetectHeadLayout> head;
  int detect_layer = -1;
};

struct Resolved {
  int nc = 0, ch = 0;
};

Resolved resolve(const GraphFile& f, const ModelConfig& cfg) {
  Resolved r;
  r.nc = cfg.num_classes > 0 ? cfg.num_classes : f.nc;
  if (cfg.in_channels > 0) {
    HT_CHECK(f.ch == 0 || f.ch == cfg.in_channels, f.path, ": the file says ch ", f.ch, " but the input has ",
             cfg.in_channels, " channel", cfg.in_channels == 1 ? "" : "s");
    r.ch = cfg.in_channels;
  } else {
    r.ch = f.ch > 0 ? f.ch : 3;
  }
  HT_CHECK(cfg.height >= 1 && cfg.width >= 1, f.path, ": input size must be at least 1×1, got ", cfg.height, "×",
           cfg.width);
  return r;
}

// The repeats of YOLOv5: n = max(round(n·gd), 1) when n > 1, Python's round (halves to even).
int scaled_repeats(int n, double gd) {
  if (n <= 1) return n;
  return std::max(int(std::nearbyint(n * gd)), 1);
}

// A module's output, refused when one sample of it holds more than kMaxLayerValues values. Every input is
// checked so, and every factor a file gives is at most kMaxModelInt: no dimension computed from them
// overflows.
const Shape& bounded(const GraphEntry& e, const Shape& out) {
  double values = 1;  // in floating point: the product of two checked factors may pass 2^63
  for (const int64_t d : out) values *= double(d);
  HT_CHECK(values <= double(kMaxLayerValues), e.where, ": output ", shape_str(out), " holds ", values,
           " values per sample, more than hetrain handles (", kMaxLayerValues, ")");
  return out;
}

// An entry's args with 'nc' and 'anchors' replaced by the file's top-level values.
std::vector<GraphArg> resolve_args(const GraphFile& f, const GraphEntry& e, int nc) {
  std::vector<GraphArg> args;
  for (const GraphArg& a : e.args) {
    if (a.kind == GraphArg::Kind::String && a.s == "nc") {
      GraphArg v;
      v.kind = GraphArg::Kind::Int, v.i = nc;
      args.push_back(v);
    } else if (a.kind == GraphArg::Kind::String && a.s == "anchors") {
      HT_CHECK(!f.anchors.empty() || f.anchors_count_only > 0, e.where,
               ": args name 'anchors' but the file has no top-level anchors");
      GraphArg v;
      if (f.anchors.empty()) {
        v.kind = GraphArg::Kind::Int, v.i = f.anchors_count_only;
      } else {
        v.kind = GraphArg::Kind::List;
        for (const auto& level : f.anchors) {
          GraphArg l;
          l.kind = GraphArg::Kind::List;
          for (double x : level) {
            GraphArg n;
            if (x == std::floor(x))
              n.kind = GraphArg::Kind::Int, n.i = int64_t(x);
            else
              n.kind = GraphArg::Kind::Float, n.f = x;
            l.list.push_back(n);
          }
          v.list.push_back(l);
        }
      }
      args.push_back(v);
    } else {
      args.push_back(a);
    }
  }
  return args;
}

// A module of one input: one layer, or YOLOv5's nn.Sequential of n copies (names model.<i>.<j>.*; copy
// j > 0 takes copy j−1's output). Sets info's args text and output shape.
std::unique_ptr<Layer> build_single(const ModuleKind& kind, const Ctx& c, const std::string& prefix,
                                    GraphLayerInfo& info) {
  const GraphEntry& e = c.e;
  Shape s = c.in[0];
  const int copies = kind.absorbs_n ? 1 : c.n;
  std::unique_ptr<Layer> layer;
  if (copies == 1) {
    s = bounded(e, kind.single(c, prefix, s, &layer, &info.args));
  } else {
    auto chain = std::make_unique<LayerChain>();
    for (int j = 0; j < copies; ++j) {
      std::unique_ptr<Layer> one;
      std::string text;
      s = bounded(e, kind.single(c, prefix + "." + std::to_string(j), s, &one, &text));
      if (j == 0) info.args = text;
      chain->add(std::move(one));
    }
    layer = std::move(chain);
  }
  info.out_shape = s;
  return layer;
}

Built build_graph(const GraphFile& f, const Resolved& r, int image_h, int image_w, ParamBuffer& pb, Workspace* ws) {
  Built out;
  const int na = f.anchors.empty() ? f.anchors_count_only : int(f.anchors[0].size() / 2);
  const int no = na * (r.nc + 5);
  std::vector<Shape> shapes;  // per layer, without N
  for (const GraphEntry& e : f.layers) {
    const ModuleKind* kind = find_module(e.module);
    HT_CHECK(kind, e.where, ": unknown module ", quoted(e.module), " (known: ", known_modules(), ")");
    const int repeats = scaled_repeats(e.number, f.depth_multiple);
    HT_CHECK(repeats <= kMaxRepeats, e.where, ": number ", e.number, " × depth_multiple ", f.depth_multiple, " = ",
             repeats, " repeats, out of range (at most ", kMaxRepeats, ")");
    Ctx c{f, e, {}, {}, repeats, r.nc, no, image_h, image_w, pb, ws};
    for (const int j : e.from) c.in.push_back(j < 0 ? Shape{r.ch, image_h, image_w} : shapes[size_t(j)]);
    c.args = resolve_args(f, e, r.nc);
    GraphLayerInfo info;
    info.entry = e;
    info.module = kind->name;
    info.repeats = c.n;
    info.param_begin = pb.count();
    const int64_t parameters_before = pb.parameters();
    const std::string prefix = "model." + std::to_string(e.index);
    if (kind->multi) {
      HT_CHECK(c.n == 1, e.where, ": ", kind->name, " cannot repeat (number ", e.number, "): write it once");
      MultiBuilt b = kind->multi(c, prefix);
      info.out_shape = bounded(e, b.out);
      info.args = b.args_text;
      out.nodes.push_back(std::move(b.layer));
      if (b.head) {
        HT_CHECK(out.detect_layer < 0, e.where, ": a second Detect (layer ", out.detect_layer, " is one)");
        out.head = std::move(b.head);
        out.detect_layer = e.index;
      }
    } else {
      HT_CHECK(c.in.size() == 1, e.where, ": ", kind->name, " takes one input, from ", list_str(e.from_written),
               " gives ", c.in.size());
      std::unique_ptr<Layer> layer = build_single(*kind, c, prefix, info);
      out.nodes.push_back(std::make_unique<LayerNode>(std::move(layer)));
    }
    info.param_count = pb.parameters() - parameters_before;
    shapes.push_back(info.out_shape);
    out.info.push_back(std::move(info));
  }
  if (out.detect_layer >= 0)
    HT_CHECK(out.detect_layer == int(f.layers.size()) - 1, f.layers[size_t(out.detect_layer)].where,
             ": Detect must be the last layer (its output is the model's)");
  return out;
}

}  // namespace

// ---------------------------------------------------------------- free functions


std::unique_ptr<Model> create_graph_model(const ModelConfig& config) {
  return std::make_unique<GraphModel>(config);
}

// ---------------------------------------------------------------- GraphModel

GraphModel::GraphModel(const ModelConfig& config) : GraphModel(read_graph_file(config.name), config) {}

GraphModel::GraphModel(const GraphFile& file, const ModelConfig& config) : Model(config), path_(file.path) {
  build(file);
}

void GraphModel::build(const GraphFile& file) {
  const Resolved r = resolve(file, config_);
  config_.num_classes = r.nc;
  config_.in_channels = r.ch;
  Built b = build_graph(file, r, config_.height, config_.width, params_, &ws_);
  // Before anything is allocated: the parameters, their gradients and the optimizer's momentum (3 floats a
  // parameter), the batch-norm statistics, and one sample's layer outputs (kept for backward) must fit.
  double outputs = 0;
  for (const GraphLayerInfo& l : b.info) outputs += double(shape_numel(l.out_shape)) * sizeof(float);
  const double need = (3.0 * double(params_.count()) + double(params_.state_count())) * sizeof(float) + outputs;
  check_memory_for(need, path_ + ": the model (" + std::to_string(params_.parameters()) + " parameters, " +
                             bytes_text(outputs) + " of layer outputs per sample)");
  info_ = std::move(b.info);
  nodes_ = std::move(b.nodes);
  head_ = std::move(b.head);
  detect_layer_ = b.detect_layer;
  const size_t L = nodes_.size();
  last_use_.assign(L, -1);
  for (size_t i = 0; i < L; ++i)
    for (const int j : info_[i].entry.from)
      if (j >= 0) last_use_[size_t(j)] = int(i);
  for (size_t i = 0; i < L; ++i) {
    bool only_input = true;  // nobody needs the gradient of the input images
    for (const int j : info_[i].entry.from) only_input &= j < 0;
    if (only_input) nodes_[i]->set_need_input_grad(false);
    nodes_[i]->set_buffer_pool(&ws_);
  }
  params_.finalize();
}

void GraphModel::init(uint64_t seed) {
  HT_CHECK(device() == Device::CPU, path_, ": init() runs on the CPU, before to()");
  // A detector starts as YOLOv5's does (PyTorch's default convolutions); a classifier file as the zoo's
  // model of the same layout, so the two stay interchangeable (docs/detection.md, "Initialisation").
  init_parameters(params_, seed, head_ ? ConvInit::PyTorchDefault : ConvInit::KaimingNormalFanOut);
  if (!head_) return;
  // YOLOv5's Detect._initialize_biases: about 8 objects per 640×640 image, classes near 0.6 / nc.
  const DetectHeadLayout& h = *head_;
  const int no = h.num_classes + 5;
  for (size_t l = 0; l < h.strides.size(); ++l) {
    const std::string name = "model." + std::to_string(detect_layer_) + ".m." + std::to_string(l) + ".bias";
    const int idx = params_.find(name);
    HT_CHECK(idx >= 0, path_, ": no parameter ", name);
    float* b = params_.param(idx).data();
    const double s = h.strides[size_t(l)];  // YOLOv5 takes 640 whatever the input size
    const float obj = float(std::log(8.0 / ((640.0 / s) * (640.0 / s))));
    const float cls = float(std::log(0.6 / (h.num_classes - 0.99999)));
    for (int a = 0; a < h.anchors_per_level; ++a) {
      b[a * no + 4] += obj;
      for (int k = 0; k < h.num_classes; ++k) b[a * no + 5 + k] += cls;
    }
  }
}

Tensor GraphModel::forward(const Tensor& x, bool training) {
  const ModelConfig& c = config_;
  HT_CHECK(x.ndim() == 4 && x.dim(0) >= 1 && x.dim(1) == c.in_channels && x.dim(2) == c.height &&
               x.dim(3) == c.width,
           path_, ": expected input [N, ", c.in_channels, ", ", c.height, ", ", c.width, "] with N >= 1, got ",
           shape_str(x.shape()));
  HT_CHECK(x.device() == device(), path_, ": input on ", device_name(x.device()), ", model on ",
           device_name(device()));
  const size_t L = nodes_.size();
  outs_.assign(L, Tensor());
  if (training) ws_.begin_step();
  std::vector<Tensor> xs;
  for (size_t i = 0; i < L; ++i) {
    const std::vector<int>& from = info_[i].entry.from;
    xs.clear();
    for (const int j : from) xs.push_back(j < 0 ? x : outs_[size_t(j)]);
    outs_[i] = nodes_[i]->forward(xs, training);
    xs.clear();
    for (const int j : from)  // outputs no later layer reads go back to the pool (or stay with their reader)
      if (j >= 0 && last_use_[size_t(j)] == int(i)) outs_[size_t(j)] = Tensor();
  }
  Tensor y = outs_.back();
  outs_.assign(L, Tensor());
  forward_batch_ = x.dim(0);
  return y;
}

void GraphModel::backward(const Tensor& dout, const GradsFinal& grads_final) {
  HT_CHECK(forward_batch_ > 0, path_, ": backward() before forward()");
  Shape expected = output_shape();
  expected.insert(expected.begin(), forward_batch_);
  HT_CHECK(dout.shape() == expected, path_, ": expected an output gradient ", shape_str(expected), ", got ",
           shape_str(dout.shape()));
  const size_t L = nodes_.size();
  grads_.assign(L, Tensor());
  grad_owned_.assign(L, 0);
  grads_[L - 1] = dout;
  for (size_t i = L; i-- > 0;) {
    if (grads_[i].defined()) {  // else no later layer used its output: nothing flows back
      std::vector<Tensor> dxs = nodes_[i]->backward(grads_[i]);
      grads_[i] = Tensor();
      const std::vector<int>& from = info_[i].entry.from;
      for (size_t k = 0; k < from.size(); ++k) {
        const int j = from[k];
        if (j < 0 || k >= dxs.size() || !dxs[k].defined()) continue;
        Tensor& g = grads_[size_t(j)];
        if (!g.defined()) {  // the first reader's gradient: held as it is (it may alias another)
          g = dxs[k];
        } else if (grad_owned_[size_t(j)]) {
          ops::accumulate(g, dxs[k]);
        } else {  // a second reader: the sum goes into a buffer of our own
          Tensor sum = ws_.acquire(g.shape(), g.device());
          ops::add(sum, g, dxs[k]);
          g = sum;
          grad_owned_[size_t(j)] = 1;
        }
      }
    }
    if (grads_final) grads_final(info_[i].param_begin);
  }
  grads_.assign(L, Tensor());
}

bool GraphModel::has_batch_coupling() const {
  for (const auto& n : nodes_)
    if (n->has_batch_coupling()) return true;
  return false;
}

void GraphModel::to(Device device, Precision precision) {
  params_.to(device);
  ws_.release_all();  // pooled buffers of the old device
  ws_.precision = precision;
}

int64_t GraphModel::activation_bytes_per_sample() { return measure_activation_bytes_per_sample(*this, ws_); }

// ---------------------------------------------------------------- describe

std::string describe_graph_model(const std::string& yaml_path, const ModelConfig& config) {
  const GraphFile f = read_graph_file(yaml_path);
  const Resolved r = resolve(f, config);
  ParamBuffer pb;  // declared, never allocated
  Workspace ws;
  const Built b = build_graph(f, r, config.height, config.width, pb, &ws);
  std::ostringstream os;
  char line[512];
  os << yaml_path << ": input " << r.ch << "×" << config.height << "×" << config.width << ", nc " << r.nc
     << ", depth_multiple " << f.depth_multiple << ", width_multiple " << f.width_multiple << "\n";
  std::snprintf(line, sizeof line, "%5s  %-14s %3s %10s  %-14s %-36s %s\n", "", "from", "n", "params", "module",
                "arguments", "output");
  os << line;
  for (const GraphLayerInfo& l : b.info) {
    std::snprintf(line, sizeof line, "%5d  %-14s %3d %10lld  %-14s %-36s %s\n", l.entry.index,
                  list_str(l.entry.from_written).c_str(), l.repeats, static_cast<long long>(l.param_count),
                  l.module.c_str(), l.args.c_str(), shape_str(l.out_shape).c_str());
    os << line;
  }
  os << b.info.size() << " layers, " << pb.parameters() << " parameters, " << pb.state_count()
     << " batch-norm statistics; output per sample " << shape_str(b.info.back().out_shape) << "\n";
  if (b.head) {
    const DetectHeadLayout& h = *b.head;
    os << "Detect: " << h.strides.size() << " levels, " << h.anchors_per_level << " anchors each, " << head_rows(h)
       << " rows of " << h.num_classes + 5 << "; strides";
    for (size_t l = 0; l < h.strides.size(); ++l)
      os << (l ? ", " : " ") << h.strides[l] << " (" << h.image_h / h.strides[l] << "×" << h.image_w / h.strides[l]
         << " grid)";
    os << "\n";
  }
  return os.str();
}

}  // namespace hetrain::nn

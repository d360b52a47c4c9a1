// nn/graph_yaml.cpp — the YAML reader of model files (yaml-cpp), with YOLOv5's reading of scalars.
#include "nn/graph_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "hetrain/error.hpp"

namespace hetrain::nn {

namespace {

const char* const kTopKeys[] = {"nc", "depth_multiple", "width_multiple", "anchors", "ch", "backbone", "head"};

std::string scalar_of(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); }

// "line 12" of a node (yaml-cpp counts from 0), for messages about a value.
std::string line_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? std::string() : " (line " + std::to_string(m.line + 1) + ")";
}

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_float(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// A YAML value as PyYAML (YAML 1.1) gives it to YOLOv5's parse_model: plain scalars are numbers, booleans
// or null when they read as one; quoted scalars are strings. A plain `None` stays the string "None" here
// as in PyYAML; parse_model eval()s it to None, and so do we.
GraphArg arg_of(const YAML::Node& n) {
  GraphArg a;
  if (n.IsSequence()) {
    a.kind = GraphArg::Kind::List;
    for (const auto& item : n) a.list.push_back(arg_of(item));
    return a;
  }
  if (n.IsMap()) HT_THROW("a mapping is not a module argument", line_of(n));
  if (n.IsNull()) return a;  // None
  const std::string s = n.Scalar();
  if (n.Tag() == "!") {  // quoted: always a string
    a.kind = GraphArg::Kind::String, a.s = s;
    return a;
  }
  if (s == "None" || s == "null" || s == "Null" || s == "NULL" || s == "~") return a;
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
    if (s == t) {
      a.kind = GraphArg::Kind::Bool, a.b = true;
      return a;
    }
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
    if (s == f) {
      a.kind = GraphArg::Kind::Bool, a.b = false;
      return a;
    }
  if (parse_int(s, &a.i)) {
    a.kind = GraphArg::Kind::Int;
    return a;
  }
  if (parse_float(s, &a.f)) {
    a.kind = GraphArg::Kind::Float;
    return a;
  }
  a.kind = GraphArg::Kind::String, a.s = s;
  return a;
}

int int_value(const YAML::Node& n, const std::string& what, const std::string& where) {
  int64_t v = 0;
  HT_CHECK(n.IsScalar() && n.Tag() != "!" && parse_int(n.Scalar(), &v) && v >= INT32_MIN && v <= INT32_MAX, where,
           ": ", what, " must be an integer, got ", quoted(scalar_of(n)), line_of(n));
  return int(v);
}

double number_value(const YAML::Node& n, const std::string& what, const std::string& where) {
  double v = 0;
  HT_CHECK(n.IsScalar() && n.Tag() != "!" && parse_float(n.Scalar(), &v), where, ": ", what,
           " must be a number, got ", quoted(scalar_of(n)), line_of(n));
  return v;
}

void read_anchors(const YAML::Node& n, const std::string& path, GraphFile* g) {
  const std::string where = path + ": anchors";
  if (n.IsScalar()) {
    g->anchors_count_only = int_value(n, "anchors", path);
    HT_CHECK(g->anchors_count_only >= 1, where, ": the count per level must be >= 1, got ", g->anchors_count_only);
    return;
  }
  HT_CHECK(n.IsSequence() && n.size() >= 1, where,
           ": expected a list per level of w,h pairs in pixels (e.g. [10,13, 16,30, 33,23]) or an integer",
           line_of(n));
  for (size_t l = 0; l < n.size(); ++l) {
    const YAML::Node& level = n[l];
    const std::string lw = where + "[" + std::to_string(l) + "]";
    HT_CHECK(level.IsSequence() && level.size() >= 2 && level.size() % 2 == 0, lw,
             ": expected w,h pairs (an even number of values), got ",
             level.IsSequence() ? std::to_string(level.size()) + " values" : quoted(scalar_of(level)),
             line_of(level));
    HT_CHECK(level.size() <= size_t(2 * kMaxAnchorsPerLevel), lw, ": ", level.size() / 2,
             " anchors per level is out of range (at most ", kMaxAnchorsPerLevel, ")", line_of(level));
    std::vector<double> values;
    for (const auto& v : level) {
      const double x = number_value(v, "an anchor size", lw);
      HT_CHECK(x > 0, lw, ": anchor sizes must be positive, got ", x, line_of(v));
      values.push_back(x);
    }
    if (!g->anchors.empty())
      HT_CHECK(values.size() == g->anchors.front().size(), lw, ": ", values.size() / 2,
               " anchors, but level 0 has ", g->anchors.front().size() / 2, " (every level needs the same number)");
    g->anchors.push_back(std::move(values));
  }
}

void read_section(const YAML::Node& n, const std::string& name, const std::string& path, GraphFile* g) {
  HT_CHECK(n.IsSequence() || n.IsNull(), path, ": ", name, " must be a list of [from, number, module, args]",
           line_of(n));
  if (n.IsNull()) return;
  for (size_t k = 0; k < n.size(); ++k) {
    const YAML::Node& e = n[k];
    GraphEntry entry;
    entry.section = name;
    entry.section_index = int(k);
    entry.index = int(g->layers.size());
    entry.where = path + ": " + name + "[" + std::to_string(k) + "] (layer " + std::to_string(entry.index) + ")";
    const std::string& where = entry.where;
    HT_CHECK(e.IsSequence() && e.size() == 4, where, ": expected [from, number, module, args], got ",
             e.IsSequence() ? std::to_string(e.size()) + " items" : quoted(scalar_of(e)), line_of(e));
    // from
    const YAML::Node& f = e[0];
    if (f.IsSequence()) {
      HT_CHECK(f.size() >= 1, where, ": from is an empty list", line_of(f));
      for (const auto& x : f) entry.from_written.push_back(int_value(x, "from", where));
    } else {
      entry.from_written.push_back(int_value(f, "from", where));
    }
    const int i = entry.index;
    for (const int w : entry.from_written) {
      const int r = w < 0 ? i + w : w;
      if (w == -1 && i == 0) {
        entry.from.push_back(-1);  // the model's input
        continue;
      }
      HT_CHECK(r >= 0, where, ": from ", w, " points before the first layer",
               i == 0 ? " (layer 0 takes the input: from -1)" : "");
      HT_CHECK(r < i, where, ": from ", w, " points ", r == i ? "at the layer itself" : "forward",
               " (a layer takes outputs of layers 0..", i - 1, " only)");
      entry.from.push_back(r);
    }
    // number
    entry.number = int_value(e[1], "number", where);
    HT_CHECK(entry.number >= 1, where, ": number must be >= 1, got ", entry.number);
    HT_CHECK(entry.number <= kMaxRepeats, where, ": number ", entry.number, " is out of range (at most ", kMaxRepeats,
             " repeats)", line_of(e[1]));
    // module
    HT_CHECK(e[2].IsScalar() && !e[2].Scalar().empty(), where, ": module must be a name such as Conv",
             line_of(e[2]));
    entry.module = e[2].Scalar();
    // args
    const YAML::Node& a = e[3];
    HT_CHECK(a.IsSequence() || a.IsNull(), where, ": args must be a list, e.g. [64, 3, 2], got ",
             quoted(scalar_of(a)), line_of(a));
    try {
      if (a.IsSequence())
        for (const auto& x : a) entry.args.push_back(arg_of(x));
    } catch (const Error& err) {
      HT_THROW(where, ": ", err.message());
    }
    g->layers.push_back(std::move(entry));
  }
}

GraphFile parse_node(const YAML::Node& root, const std::string& path) {
  HT_CHECK(root.IsMap(), path, ": expected a mapping with nc, depth_multiple, width_multiple, anchors, backbone, head");
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    bool known = false;
    for (const char* k : kTopKeys) known |= key == k;
    HT_CHECK(known, path, ": unknown key ", quoted(key), line_of(kv.first),
             " (known: nc, depth_multiple, width_multiple, anchors, ch, backbone, head)");
  }
  for (const char* k : {"nc", "backbone", "head"})
    HT_CHECK(root[k], path, ": missing key '", k, "'");
  GraphFile g;
  g.path = path;
  g.nc = int_value(root["nc"], "nc", path);
  HT_CHECK(g.nc >= 1, path, ": nc must be >= 1, got ", g.nc);
  HT_CHECK(g.nc <= kMaxModelInt, path, ": nc ", g.nc, " is out of range (at most ", kMaxModelInt, ")",
           line_of(root["nc"]));
  for (const char* key : {"depth_multiple", "width_multiple"}) {
    if (!root[key]) continue;
    const double v = number_value(root[key], key, path);
    HT_CHECK(v <= kMaxMultiple, path, ": ", key, " ", v, " is out of range (0, ", kMaxMultiple, "]",
             line_of(root[key]));
    (std::string(key) == "depth_multiple" ? g.depth_multiple : g.width_multiple) = v;
  }
  HT_CHECK(g.depth_multiple > 0, path, ": depth_multiple must be positive, got ", g.depth_multiple);
  HT_CHECK(g.width_multiple > 0, path, ": width_multiple must be positive, got ", g.width_multiple);
  if (root["anchors"]) read_anchors(root["anchors"], path, &g);
  if (root["ch"]) {
    g.ch = int_value(root["ch"], "ch", path);
    HT_CHECK(g.ch >= 1, path, ": ch must be >= 1, got ", g.ch);
    HT_CHECK(g.ch <= kMaxModelInt, path, ": ch ", g.ch, " is out of range (at most ", kMaxModelInt, ")",
             line_of(root["ch"]));
  }
  read_section(root["backbone"], "backbone", path, &g);
  read_section(root["head"], "head", path, &g);
  HT_CHECK(!g.layers.empty(), path, ": no layers (backbone and head are empty)");
  return g;
}

}  // namespace

std::string GraphArg::text() const {
  switch (kind) {
    case Kind::Int:
      return std::to_string(i);
    case Kind::Float: {
      std::ostringstream os;
      os << f;
      std::string t = os.str();
      if (t.find_first_of(".e") == std::string::npos) t += ".0";
      return t;
    }
    case Kind::Bool:
      return b ? "True" : "False";
    case Kind::None:
      return "None";
    case Kind::String:
      return quoted(s);  // Python's repr for the usual names; a huge or odd string stays one short line
    case Kind::List: {
      std::string t = "[";
      for (size_t k = 0; k < list.size(); ++k) t += (k ? ", " : "") + list[k].text();
      return t + "]";
    }
  }
  return "";
}

GraphFile parse_graph_text(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    HT_THROW(path, ": not valid YAML: ", e.what());
  }
  return parse_node(root, path);
}

GraphFile read_graph_file(const std::string& path) {
  std::ifstream in(path);
  HT_CHECK(in, clipped(path), ": cannot open the model file");  // a name from a checkpoint may be huge
  std::stringstream ss;
  ss << in.rdbuf();
  HT_CHECK(!in.bad(), path, ": cannot read the model file");
  return parse_graph_text(ss.str(), path);
}

}  // namespace hetrain::nn

// The training modes (docs/architecture.md, "Training modes"). `--mode` names one; make_setup resolves the
// name once (Setup::mode), and the code after it asks the enum, never the text.
#pragma once

#include <optional>
#include <string>

namespace hetrain::train {

enum class Mode {
  Sync,    // every rank takes its share of each global batch; gradients reduced weighted by the shares
  Async,   // every rank alone: local steps, elastic trades with the center model
  Hybrid,  // groups of ranks: synchronous inside a group, elastic trades between groups
};

// "sync", "async" or "hybrid"; nothing for any other text.
std::optional<Mode> mode_named(const std::string& text);
// The same, but throws naming --mode for any other text.
Mode parse_mode(const std::string& text);
// The name --mode takes and the logs print: "sync", "async", "hybrid".
const char* mode_name(Mode mode);
// The modes that train against the elastic center (train/elastic_mode.cpp).
inline bool is_elastic(Mode mode) { return mode != Mode::Sync; }

}  // namespace hetrain::train

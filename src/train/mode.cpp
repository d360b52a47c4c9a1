#include "train/mode.hpp"

#include "hetrain/error.hpp"

namespace hetrain::train {

std::optional<Mode> mode_named(const std::string& text) {
  for (Mode m : {Mode::Sync, Mode::Async, Mode::Hybrid})
    if (text == mode_name(m)) return m;
  return std::nullopt;
}

Mode parse_mode(const std::string& text) {
  const std::optional<Mode> mode = mode_named(text);
  HT_CHECK(mode, "--mode must be sync, async or hybrid, got ", quoted(text));
  return *mode;
}

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Sync: return "sync";
    case Mode::Async: return "async";
    case Mode::Hybrid: return "hybrid";
  }
  return "?";
}

}  // namespace hetrain::train

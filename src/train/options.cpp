#include "train/options.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "hetrain/error.hpp"

namespace hetrain::train {

namespace {

namespace cls = po::command_line_style;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "--model, --momentum" for the known options that start with `name` or are a couple of typos away.
std::string candidates(const std::string& name, const po::options_description& options) {
  std::string out;
  for (const auto& o : options.options()) {
    const std::string known = o->long_name();
    if (known.empty() || known == name) continue;
    const bool prefix = known.compare(0, name.size(), name) == 0 || name.compare(0, known.size(), known) == 0;
    const size_t allowed = std::max<size_t>(1, name.size() / 4);
    // Names whose lengths differ by more than `allowed` are further apart than that: no need to compute
    // the distance (which costs length × length, minutes for a 10 MB key).
    const size_t gap = name.size() > known.size() ? name.size() - known.size() : known.size() - name.size();
    if (prefix || (gap <= allowed && edit_distance(name, known) <= allowed))
      out += (out.empty() ? "--" : ", --") + known;
  }
  return out;
}

std::string unknown_message(const std::string& written, const po::options_description& options) {
  std::string name = written;
  while (!name.empty() && name[0] == '-') name.erase(0, 1);
  name = name.substr(0, name.find('='));
  const std::string near = candidates(name, options);
  return "unknown option " + quoted("--" + name) + (near.empty() ? "" : " (did you mean " + near + "?)");
}

// "epochs" of "--epochs" or "epochs" (Boost names an option by its style).
std::string bare_name(std::string name) {
  while (!name.empty() && name[0] == '-') name.erase(0, 1);
  return name;
}

bool known_option(const std::string& key, const po::options_description& options) {
  for (const auto& o : options.options())
    if (o->long_name() == key) return true;
  return false;
}

// The shortest decimal text that reads back as exactly `x` (0.1 rather than 0.100000001).
template <typename T>
std::string shortest(T x) {
  for (int digits = 6;; ++digits) {
    std::ostringstream os;
    os.precision(digits);
    os << x;
    std::istringstream back(os.str());
    T y{};
    back >> y;
    if (y == x || digits >= std::numeric_limits<T>::max_digits10) return os.str();
  }
}

// The value of one option as it would be written on the command line.
std::string value_text(const po::variable_value& v) {
  const boost::any& a = v.value();
  std::ostringstream os;
  if (const auto* s = boost::any_cast<std::string>(&a)) return *s;
  if (const auto* b = boost::any_cast<bool>(&a)) return *b ? "true" : "false";
  if (const auto* i = boost::any_cast<int>(&a)) os << *i;
  else if (const auto* l = boost::any_cast<int64_t>(&a)) os << *l;
  else if (const auto* u = boost::any_cast<uint64_t>(&a)) os << *u;
  else if (const auto* f = boost::any_cast<float>(&a)) return shortest(*f);
  else if (const auto* d = boost::any_cast<double>(&a)) return shortest(*d);
  else return "";
  return os.str();
}

}  // namespace

void parse_command_line(int argc, char** argv, const po::options_description& options, po::variables_map& vm) {
  try {
    po::store(po::command_line_parser(argc, argv)
                  .options(options)
                  .style(cls::default_style & ~cls::allow_guessing)
                  .run(),
              vm);
  } catch (const po::unknown_option& e) {
    throw po::error(unknown_message(e.get_option_name(), options));
  } catch (po::error_with_option_name& e) {
    // Boost's message quotes the value whole: the last value given for the option is shown clipped.
    const std::string name = bare_name(e.get_option_name());
    const std::string long_form = "--" + name, with_value = long_form + "=";
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.compare(0, with_value.size(), with_value) == 0)
        e.set_substitute("value", clipped(arg.substr(with_value.size())));
      else if (arg == long_form && i + 1 < argc)
        e.set_substitute("value", clipped(argv[i + 1]));
    }
    throw;
  }
}

namespace {

// The value part of a config line (after '='), per the quoting of docs/config-file.md: a value starting
// with '"' runs to the closing '"' with \\, \" and \n as escapes; otherwise it is the text up to a '#' that
// starts it or follows a blank, trimmed. Throws a message without the file and line (the caller adds them).
std::string config_value(const std::string& text) {
  const std::string rest = trim(text);
  if (rest.empty() || rest[0] != '"') {
    size_t end = rest.size();
    for (size_t i = 0; i < rest.size(); ++i)
      if (rest[i] == '#' && (i == 0 || rest[i - 1] == ' ' || rest[i - 1] == '\t')) {
        end = i;
        break;
      }
    return trim(rest.substr(0, end));
  }
  std::string out;
  for (size_t i = 1; i < rest.size(); ++i) {
    const char c = rest[i];
    if (c == '"') {
      const std::string after = trim(rest.substr(i + 1));
      if (!after.empty() && after[0] != '#')
        throw std::runtime_error("text after the closing quote: " + quoted(after) + " (a comment starts with '#')");
      return out;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == rest.size()) break;
    if (rest[i] == 'n') out += '\n';
    else if (rest[i] == '"' || rest[i] == '\\') out += rest[i];
    else throw std::runtime_error(std::string("unknown escape '\\") + rest[i] + "' in a quoted value (use \\\\, \\\" or \\n)");
  }
  throw std::runtime_error("the quoted value has no closing '\"'");
}

// A value as a config line holds it: quoted when it would not read back as itself unquoted.
std::string config_quote(const std::string& value) {
  bool plain = !value.empty() && value[0] != '"' && value.find('#') == std::string::npos && trim(value) == value;
  for (unsigned char c : value) plain = plain && c >= 0x20 && c != 0x7f;
  if (plain) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out + "\"";
}

}  // namespace

void parse_config_file(const std::string& path, const po::options_description& options, po::variables_map& vm) {
  // A folder opens as a stream that reads nothing: it would pass for an empty file. Pipes are fine (read once).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw po::error("--config " + path + ": is a folder, not a config file");
  std::ifstream in(path);
  if (!in) throw po::error("--config " + path + ": cannot read the file");
  po::parsed_options parsed(&options);
  std::string line;
  std::map<std::string, std::pair<int, std::string>> given;  // key → (line, value) of its last line
  for (int number = 1; std::getline(in, line); ++number) {
    // A byte-order mark (editors on Windows write one) is not part of the first key.
    if (number == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    const std::string text = trim(line);
    if (text.empty() || text[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (text[0] == '[') throw po::error(where + "sections are not used in hetrain config files: " + quoted(text));
    const size_t eq = text.find('=');
    if (eq == std::string::npos) throw po::error(where + "expected 'key = value', got " + quoted(text));
    const std::string key = trim(text.substr(0, eq));
    if (key == "config") throw po::error(where + "a config file cannot name another config file");
    if (key == "help" || key == "print-config")
      throw po::error(where + "'" + key + "' is for the command line (--" + key + "), not for a config file");
    if (!known_option(key, options)) {
      const std::string near = candidates(key, options);
      throw po::error(where + "unknown key " + quoted(key) + (near.empty() ? "" : " (did you mean " + near + "?)"));
    }
    po::option option;
    option.string_key = key;
    try {
      option.value.push_back(config_value(text.substr(eq + 1)));
    } catch (const std::runtime_error& e) {
      throw po::error(where + key + ": " + e.what());
    }
    option.original_tokens = {key, option.value.back()};
    parsed.options.push_back(option);
    given[key] = {number, option.value.back()};
  }
  try {
    po::store(parsed, vm);
  } catch (po::error_with_option_name& e) {
    // A bad value: name its line, and show the value clipped (Boost's message quotes it whole).
    const auto at = given.find(bare_name(e.get_option_name()));
    if (at == given.end()) throw po::error("--config " + path + ": " + e.what());
    e.set_substitute("value", clipped(at->second.second));
    throw po::error(path + ":" + std::to_string(at->second.first) + ": " + e.what());
  } catch (const po::error& e) {
    throw po::error("--config " + path + ": " + e.what());
  }
}

bool differs_from_default(const po::options_description& options, const po::variables_map& vm,
                          const std::string& key) {
  if (!vm.count(key) || vm[key].defaulted()) return false;
  const std::string value = value_text(vm[key]);
  boost::any fallback;
  const po::option_description* o = options.find_nothrow(key, false);
  if (!o || !o->semantic()->apply_default(fallback)) return !value.empty();
  po::variable_value as_default(fallback, true);
  return value != value_text(as_default);
}

std::string effective_config(const po::options_description& options, const po::variables_map& vm,
                             const std::vector<std::string>& skip) {
  std::ostringstream out;
  for (const auto& o : options.options()) {
    const std::string key = o->long_name();
    if (key.empty() || std::find(skip.begin(), skip.end(), key) != skip.end() || !vm.count(key)) continue;
    const std::string value = value_text(vm[key]);
    if (value.empty()) continue;
    out << key << " = " << config_quote(value) << "\n";
  }
  return out.str();
}

}  // namespace hetrain::train

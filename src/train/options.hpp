// The command line and config files of `hetrain train` (and `eval`), on Boost.Program_options:
//  - long options must be spelled out: Boost's guessing of abbreviations is off, so a prefix or a typo is
//    an error that names the options it may have meant, never another option silently;
//  - `--config FILE` reads the same options as `key = value` lines with `#` comments and double-quoted
//    values (docs/config-file.md); an unknown key or a bad quote is an error naming the file and line; the
//    command line overrides the file;
//  - the effective configuration prints back in that syntax (`--print-config`), quoting the values that need
//    it, so a run can be repeated whatever its paths hold.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace hetrain::train {

namespace po = boost::program_options;

// Parses argv (argv[0] is the command name) into vm; throws po::error with a message that names the
// option and, for an unknown one, the known options it resembles.
void parse_command_line(int argc, char** argv, const po::options_description& options, po::variables_map& vm);

// Adds the options of a config file to vm (values already there, from the command line, win). Throws
// po::error naming the file, and the line for an unknown key, a section header, a line without '=', a
// key that is for the command line only (config, help, print-config) or a malformed quoted value.
void parse_config_file(const std::string& path, const po::options_description& options, po::variables_map& vm);

// "key = value" lines for every option in vm that has a value (defaults included), in the order of
// `options`; `skip` lists options not to print (help, config, ...). Parsing the text with
// parse_config_file gives the same configuration.
std::string effective_config(const po::options_description& options, const po::variables_map& vm,
                             const std::vector<std::string>& skip);

// True when `key` was given (command line or config file) with a value other than its default; false when
// it was not given, or given as its default (a --print-config file lists every default).
bool differs_from_default(const po::options_description& options, const po::variables_map& vm,
                          const std::string& key);

}  // namespace hetrain::train

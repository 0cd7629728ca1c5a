#pragma once
// Test helper: ergd's command line as a list of arguments after the program name.

#include <string>
#include <vector>

#include "erg/daemon/config.hpp"

namespace erg::daemon::test_support {

inline Result<Config> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ergd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

}  // namespace erg::daemon::test_support

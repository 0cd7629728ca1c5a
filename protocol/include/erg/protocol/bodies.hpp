#pragma once
/// JSON bodies of the zeusd v0.5 API, built and parsed in one place for daemon and client.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::protocol {

struct DiscoverGpu {
  unsigned id = 0;
  std::string name;
  std::string pci_address;
  bool cumulative_energy_available = false;
};
struct DiscoverCpu {
  unsigned id = 0;
  bool dram_available = false;
};
struct DiscoverBody {
  std::vector<DiscoverGpu> gpus;
  std::vector<DiscoverCpu> cpus;
  std::vector<std::string> enabled_api_groups;
  bool auth_required = false;
};
nlohmann::json to_json(const DiscoverBody& body);
/// Errors: kInvalidArgument naming the missing/mistyped field.
Result<DiscoverBody> parse_discover(std::string_view text);

/// `{"error": message}` — validation errors.
std::string error_body(std::string_view message);
/// `{"errors": {"<id>": message, ...}}` — aggregated per-device errors.
std::string errors_body(const std::map<unsigned, std::string>& errors);

/// One SSE event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& data);

/// Parses a JSON object body; kInvalidArgument with the parser's message otherwise.
Result<nlohmann::json> parse_json_object(std::string_view text);

}  // namespace erg::protocol

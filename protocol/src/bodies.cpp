#include "erg/protocol/bodies.hpp"

namespace erg::protocol {

nlohmann::json to_json(const DiscoverBody& b) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : b.gpus)
    gpus.push_back({{"id", g.id},
                    {"name", g.name},
                    {"pci_address", g.pci_address},
                    {"cumulative_energy_available", g.cumulative_energy_available}});
  nlohmann::json cpus = nlohmann::json::array();
  for (const auto& c : b.cpus) cpus.push_back({{"id", c.id}, {"dram_available", c.dram_available}});
  return {
      {"gpus", gpus}, {"cpus", cpus}, {"enabled_api_groups", b.enabled_api_groups}, {"auth_required", b.auth_required}};
}

Result<nlohmann::json> parse_json_object(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(ErrorCode::kInvalidArgument, "response is not a JSON object");
  return j;
}

Result<DiscoverBody> parse_discover(std::string_view text) {
  auto j = parse_json_object(text);
  if (!j) return fail(j.error());
  DiscoverBody b;
  try {
    for (const auto& g : j->at("gpus"))
      b.gpus.push_back({g.at("id").get<unsigned>(), g.at("name").get<std::string>(),
                        g.at("pci_address").get<std::string>(), g.at("cumulative_energy_available").get<bool>()});
    for (const auto& c : j->at("cpus"))
      b.cpus.push_back({c.at("id").get<unsigned>(), c.at("dram_available").get<bool>()});
    b.enabled_api_groups = j->at("enabled_api_groups").get<std::vector<std::string>>();
    b.auth_required = j->at("auth_required").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kInvalidArgument, std::string("malformed /discover body: ") + e.what());
  }
  return b;
}

std::string error_body(std::string_view message) { return nlohmann::json{{"error", message}}.dump(); }

std::string errors_body(const std::map<unsigned, std::string>& errors) {
  nlohmann::json e = nlohmann::json::object();
  for (const auto& [id, msg] : errors) e[std::to_string(id)] = msg;
  return nlohmann::json{{"errors", e}}.dump();
}

std::string sse_event(const nlohmann::json& data) { return "data: " + data.dump() + "\n\n"; }

}  // namespace erg::protocol

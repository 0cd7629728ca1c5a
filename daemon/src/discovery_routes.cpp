#include "discovery_routes.hpp"

#include "erg/protocol/bodies.hpp"
#include "replies.hpp"

namespace erg::daemon {

Reply discover(const DeviceSlots& devices, const Config& config, bool auth_required) {
  protocol::DiscoverBody body;
  for (unsigned i = 0; i < devices.gpus.size(); ++i) {
    const GpuSlot& s = devices.gpus[i];
    body.gpus.push_back({i, s.gpu->name(), s.gpu->pci_address(), s.energy_available});
  }
  for (unsigned i = 0; i < devices.cpus.size(); ++i) body.cpus.push_back({i, devices.cpus[i].cpu->capabilities().dram});
  for (protocol::ApiGroup g : protocol::kAllApiGroups)
    if (config.enabled.count(g) != 0) body.enabled_api_groups.emplace_back(protocol::to_string(g));
  body.auth_required = auth_required;
  return json_reply(200, protocol::to_json(body));
}

Reply server_time() { return json_reply(200, nlohmann::json{{"timestamp_ms", unix_ms()}}); }

Reply whoami(const std::optional<TokenClaims>& claims) {
  nlohmann::json j = {{"sub", claims ? claims->sub : ""},
                      {"scopes", claims ? claims->scopes : std::vector<std::string>{}}};
  if (claims && claims->exp) j["exp"] = *claims->exp;
  return json_reply(200, j);
}

}  // namespace erg::daemon

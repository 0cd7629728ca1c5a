#pragma once
/// ergd's GET /attribution (issue 23): each GPU's energy split among the processes that ran on it,
/// as the caller may see it — its own processes by pid, everyone else's folded into one "other
/// users" figure (root and the uids/gids of --attribution-all-uids/--attribution-all-gids see every
/// process). docs/attribution.md, "ergd /attribution", describes the body.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "erg/client/connection.hpp"
#include "erg/core/result.hpp"

namespace erg::client {

struct AttributedProcess {
  std::uint32_t pid = 0;
  std::optional<std::uint32_t> uid;  ///< nullopt: the process was gone before ergd could read its owner
  std::string comm;
  std::optional<std::string> container;  ///< container id (64 hex)
  std::optional<std::string> pod;        ///< Kubernetes pod UID
  double energy_j = 0, bound_j = 0, power_w = 0, busy_s = 0, share = 0;
};

/// The processes of other users, summed: the caller may not see them one by one.
struct OtherUsers {
  std::size_t processes = 0;
  double energy_j = 0, bound_j = 0, power_w = 0;
};

struct GpuAttribution {
  unsigned gpu = 0;
  /// False on a GPU whose energy cannot be split (MIG, no per-process samples): `error` says why,
  /// and only the window and the measured energy are set.
  bool attributable = true;
  std::string error;
  std::int64_t start_ms = 0, end_ms = 0;
  double duration_s = 0, measured_j = 0, measured_bound_j = 0;
  double idle_j = 0, idle_bound_j = 0, unattributed_j = 0, unattributed_bound_j = 0;
  bool idle_calibrated = false;
  std::vector<AttributedProcess> processes;
  OtherUsers other_users;
  /// idle + processes + other users + unattributed: the measured energy, to rounding.
  [[nodiscard]] double sum_j() const;
};

struct DaemonAttribution {
  bool sees_all_processes = false;
  std::optional<std::uint32_t> uid;  ///< the caller's uid as ergd saw it (SO_PEERCRED); nullopt over TCP
  std::int64_t daemon_started_ms = 0;
  std::vector<GpuAttribution> gpus;  ///< by GPU index
  std::map<unsigned, Error> errors;  ///< GPUs that could not answer (e.g. no counter update yet)
};

/// Parses a /attribution body: a 200 body, or an error body carrying `partial` and `errors`.
Result<DaemonAttribution> parse_attribution(std::string_view body);

/// GET /attribution?gpu_ids=...&since_ms=... (empty ids: every GPU; no since: since ergd started).
/// A reply where some GPUs failed gives the others with `errors` set; one where all failed, or any
/// other error status, fails with the daemon's message.
Result<DaemonAttribution> get_attribution(Connection& connection, std::span<const unsigned> gpu_ids = {},
                                          std::optional<std::int64_t> since_ms = std::nullopt);

}  // namespace erg::client

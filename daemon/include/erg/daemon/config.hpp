#pragma once
/// ergd's configuration and command line.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/protocol/routes.hpp"

namespace erg::daemon {

inline constexpr const char* kDefaultSocketPath = "/run/ergd/ergd.sock";

struct Config {
  std::string socket_path = kDefaultSocketPath;  ///< Empty: no Unix socket.
  unsigned socket_mode = 0660;                   ///< chmod of the socket.
  std::optional<std::string> socket_group;       ///< chgrp of the socket (name or gid).
  std::optional<std::string> tcp;                ///< "127.0.0.1:4938"; port 0 picks one.
  std::set<protocol::ApiGroup> enabled = {protocol::ApiGroup::kGpuControl, protocol::ApiGroup::kGpuRead,
                                          protocol::ApiGroup::kCpuRead};
  /// Per group: uids/gids allowed on the Unix socket. A group with neither list admits every
  /// peer that can connect (the socket's mode and group decide). uid 0 is always allowed. Over
  /// TCP a peer has no uid: with a signing key its token's scopes decide; without one
  /// (tcp_insecure) a group with a list refuses every TCP peer.
  std::map<protocol::ApiGroup, std::set<uid_t>> allow_uid;
  std::map<protocol::ApiGroup, std::set<gid_t>> allow_gid;
  std::optional<std::string> signing_key_path;  ///< HS256 key; set: TCP requests need a token.
  /// `--tcp-insecure`: listen on TCP without a signing key. TCP peers are then unauthenticated:
  /// they may use only the groups without allow lists (a warning says which). Without it, --tcp
  /// without a signing key refuses to start.
  bool tcp_insecure = false;
  double gpu_power_poll_hz = 20.0;     ///< zeusd's default.
  double cpu_power_poll_hz = 10.0;     ///< zeusd's default.
  std::size_t max_connections = 1024;  ///< Beyond: 503 and close.
  /// Connections one uid may hold at once (over the Unix socket, from SO_PEERCRED; all TCP
  /// peers together count as one); beyond: 503. nullopt: a quarter of max_connections.
  std::optional<std::size_t> max_connections_per_uid;
  /// The last connections are kept for root and the peers named in allow_uid/allow_gid: other
  /// peers get 503 once max_connections - reserved are open. nullopt: an eighth of
  /// max_connections.
  std::optional<std::size_t> reserved_connections;
  /// A reply or stream event that cannot be written within this long of the socket filling
  /// closes the connection (a client that sends requests and never reads the replies).
  std::chrono::milliseconds write_timeout{5'000};
  /// Accept a socket directory other users may write to when it is sticky (like /tmp), with a
  /// warning (Daemon::warnings()); without it such a directory is refused.
  bool allow_insecure_socket_dir = false;
  /// How often a stream with no new sample checks whether its peer left (short for fuzzing).
  std::chrono::milliseconds stream_peer_check{100};
  /// A keep-alive connection with no request in progress is closed after this long.
  std::chrono::milliseconds idle_timeout{60'000};
  /// A request must arrive whole within this long of its first byte, else 408 (slowloris bound).
  std::chrono::milliseconds request_timeout{10'000};
  /// `--simulate SPEC`: serve a simulated machine (as `erg --simulate`; ERG_SIMULATE also works).
  std::optional<std::string> simulate;
  /// Skip the start-up privilege check (tests that run unprivileged over fakes).
  bool skip_privilege_check = false;
  /// Give a GPU its default power limit back when the process that set its limit through ergd
  /// (over the Unix socket) has exited, unless a live process set it since (docs/ergd.md,
  /// "Power limits come back when their setter exits"). `--no-restore-on-exit` turns it off.
  bool restore_limits_on_exit = true;
  /// Where ergd keeps who owns each power limit and locked clocks (claims.json), so an ergd
  /// restarted while an owner lives, or after it exited, still restores them. Empty: kept in
  /// memory only. `--state-dir` (default /var/lib/ergd, systemd's StateDirectory=ergd; when it
  /// does not exist, or others may write to it, ergd says so and keeps claims in memory).
  std::string state_dir;
  /// /metrics: the `node` label on every series (`--metrics-node`); nullopt: the host's name,
  /// empty: no node label.
  std::optional<std::string> metrics_node;
  /// /metrics: extra labels on every series (`--metrics-label k=v`, repeatable).
  std::map<std::string, std::string> metrics_labels;
  /// GET /attribution: uids and gids (primary or supplementary) that see every process's row;
  /// other peers see their own processes and one "other users" row (root always sees all).
  /// `--attribution-all-uids`, `--attribution-all-gids`.
  std::set<uid_t> attribution_all_uids;
  std::set<gid_t> attribution_all_gids;
  /// How often ergd reads each GPU's counter and per-process samples for /attribution (0: never,
  /// for tests that poll by hand). `--attribution-poll-s`.
  std::chrono::milliseconds attribution_poll{500};
  /// How far back /attribution can reach (`--attribution-retention-s`).
  std::chrono::seconds attribution_retention{3600};
  /// Where ergd reads processes' owners, commands and cgroups (tests: a fake tree).
  std::string proc_root = "/proc";
  /// Where ergd's event lines go (each restored limit); run_main prints them to stderr. Empty:
  /// dropped.
  std::function<void(const std::string&)> event_log;
};

/// The connection limits a configuration means, defaults filled in.
struct ConnectionLimits {
  std::size_t total = 0;     ///< max_connections.
  std::size_t per_uid = 0;   ///< At most total.
  std::size_t reserved = 0;  ///< For root and allowed peers; less than total.
};
ConnectionLimits connection_limits(const Config& config);

/// File descriptors kept beside one per connection: listeners, the spare, device files, logs.
inline constexpr std::size_t kFileHeadroom = 64;

/// What ergd does with RLIMIT_NOFILE at start: the soft limit to set and the connection cap
/// that fits in it (`max_connections` + `fds_in_use` + kFileHeadroom), raising the soft limit
/// up to the hard one, else lowering the cap (at least 1). `note` is the line to print then.
struct FileLimitPlan {
  std::uint64_t soft = 0;
  std::size_t max_connections = 0;
  std::optional<std::string> note;
};
FileLimitPlan plan_file_limit(std::size_t max_connections, std::uint64_t soft, std::uint64_t hard,
                              std::size_t fds_in_use);

/// Applies plan_file_limit to this process (getrlimit/setrlimit, the fds open now) and to
/// config.max_connections. Returns the note to print when the cap was lowered; kIo when the
/// limits cannot be read or set.
Result<std::optional<std::string>> fit_file_limit(Config& config);

/// Parses ergd's command line. `--help`/`--version` print and return kNotFound with an empty
/// message (the caller exits 0); bad flags → kInvalidArgument with CLI11's message.
Result<Config> parse_command_line(int argc, char** argv);

/// `ergd token issue --signing-key-path P --user U --scope g1,g2 [--expires 1h|7d|30d|never]`.
struct TokenIssueRequest {
  std::string signing_key_path;
  std::string user;                        ///< The token's sub claim.
  std::vector<std::string> scopes;         ///< API group names, validated.
  std::optional<std::int64_t> lifetime_s;  ///< nullopt: the token never expires.
};

/// Parses `ergd token ...` (argv[0] "ergd", argv[1] "token"). Same conventions as
/// parse_command_line: --help → kNotFound with an empty message.
Result<TokenIssueRequest> parse_token_command_line(int argc, char** argv);

/// "gpu-control=1000,1001" or "1000" (all groups) → config entries. Errors name the bad token.
Result<void> add_allow_list(Config& config, const std::string& spec, bool gids);

}  // namespace erg::daemon

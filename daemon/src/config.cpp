#include "erg/daemon/config.hpp"

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "erg/daemon/auth.hpp"
#include "erg/exporters/prometheus/collector.hpp"

namespace erg::daemon {

Result<void> add_allow_list(Config& config, const std::string& spec, bool gids) {
  std::vector<protocol::ApiGroup> groups(std::begin(protocol::kAllApiGroups), std::end(protocol::kAllApiGroups));
  std::string_view list = spec;
  if (auto eq = spec.find('='); eq != std::string::npos) {
    auto g = protocol::parse_api_group(std::string_view(spec).substr(0, eq));
    if (!g) return fail(g.error());
    groups = {*g};
    list = std::string_view(spec).substr(eq + 1);
  }
  while (true) {
    auto comma = list.find(',');
    auto part = list.substr(0, comma);
    unsigned id = 0;
    auto r = std::from_chars(part.data(), part.data() + part.size(), id);
    if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size())
      return fail(ErrorCode::kInvalidArgument, "invalid id '" + std::string(part) + "' in '" + spec + "'");
    for (auto g : groups) {
      if (gids)
        config.allow_gid[g].insert(static_cast<gid_t>(id));
      else
        config.allow_uid[g].insert(static_cast<uid_t>(id));
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return ok();
}

ConnectionLimits connection_limits(const Config& config) {
  ConnectionLimits l;
  l.total = std::max<std::size_t>(config.max_connections, 1);
  l.per_uid = std::clamp<std::size_t>(config.max_connections_per_uid.value_or(l.total / 4), 1, l.total);
  l.reserved = std::min(config.reserved_connections.value_or(l.total / 8), l.total - 1);
  return l;
}

FileLimitPlan plan_file_limit(std::size_t max_connections, std::uint64_t soft, std::uint64_t hard,
                              std::size_t fds_in_use) {
  FileLimitPlan plan{soft, max_connections, std::nullopt};
  const std::uint64_t overhead = fds_in_use + kFileHeadroom;
  const std::uint64_t need = max_connections + overhead;
  if (need <= soft) return plan;
  if (need <= hard) {  // RLIM_INFINITY is the largest value: always fits
    plan.soft = need;
    return plan;
  }
  plan.soft = hard;
  plan.max_connections = hard > overhead + 1 ? static_cast<std::size_t>(hard - overhead) : 1;
  plan.note = "file limit " + std::to_string(hard) + " allows " + std::to_string(plan.max_connections) +
              " connections; --max-connections lowered from " + std::to_string(max_connections) +
              " (raise the hard limit: LimitNOFILE= in the systemd unit, or ulimit -Hn)";
  return plan;
}

Result<std::optional<std::string>> fit_file_limit(Config& config) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return fail(ErrorCode::kIo, std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  std::size_t open_fds = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++open_fds;
  auto plan = plan_file_limit(config.max_connections, rl.rlim_cur, rl.rlim_max, open_fds);
  if (plan.soft != rl.rlim_cur) {
    rl.rlim_cur = plan.soft;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0)
      return fail(ErrorCode::kIo,
                  "setrlimit(RLIMIT_NOFILE, " + std::to_string(plan.soft) + "): " + std::strerror(errno));
  }
  config.max_connections = plan.max_connections;
  return plan.note;
}

Result<TokenIssueRequest> parse_token_command_line(int argc, char** argv) {
  TokenIssueRequest req;
  CLI::App app{"ergd token: bearer tokens (HS256) for ergd's TCP listener", "ergd token"};
  app.require_subcommand(1);
  auto* issue = app.add_subcommand("issue", "Print a signed token for a user and API groups on stdout");
  std::string scopes, expires = "never";
  issue->add_option("--signing-key-path", req.signing_key_path, "The HS256 key file ergd serves with")->required();
  issue->add_option("--user", req.user, "Who the token is for (its sub claim)")->required();
  issue->add_option("--scope", scopes, "API groups it grants: gpu-control,gpu-read,cpu-read")->required();
  issue->add_option("--expires", expires, "Lifetime: 30m, 1h, 7d, 30d, 2w, ... or never (also 0)")
      ->default_str("never");
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::CallForHelp&) {
    std::cout << (issue->parsed() ? issue->help() : app.help());
    return fail(ErrorCode::kNotFound, "");
  } catch (const CLI::ParseError& e) {
    return fail(ErrorCode::kInvalidArgument, e.what());
  }
  if (req.user.empty()) return fail(ErrorCode::kInvalidArgument, "--user must not be empty");
  std::string_view list = scopes;
  while (true) {
    auto comma = list.find(',');
    auto name = list.substr(0, comma);
    auto g = protocol::parse_api_group(name);
    if (!g) return fail(g.error());
    req.scopes.emplace_back(protocol::to_string(*g));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  auto lifetime = parse_token_lifetime(expires);
  if (!lifetime) return fail(lifetime.error());
  req.lifetime_s = *lifetime;
  return req;
}

Result<Config> parse_command_line(int argc, char** argv) {
  Config config;
  CLI::App app{"ergd: the erg node daemon (zeusd-compatible HTTP API over a Unix socket, Prometheus /metrics)", "ergd"};
  std::string mode = "0660";
  std::vector<std::string> enable, allow_uid, allow_gid;
  std::string signing_key;
  app.add_option("--socket-path", config.socket_path, "Unix socket to listen on (empty: none)")
      ->default_str(kDefaultSocketPath);
  app.add_option("--socket-mode", mode, "Octal permissions of the socket")->default_str("0660");
  app.add_option("--socket-group", config.socket_group, "Group (name or gid) owning the socket");
  app.add_option("--tcp", config.tcp, "Also listen on HOST:PORT, e.g. 127.0.0.1:4938");
  app.add_option("--simulate", config.simulate,
                 "Serve a simulated machine, e.g. 2xA100 or a JSON file (also ERG_SIMULATE)");
  app.add_option("--enable", enable, "API groups: gpu-control,gpu-read,cpu-read (default: all)")->delimiter(',');
  app.add_option("--allow-uid", allow_uid,
                 "uids allowed, e.g. 1000 (every group) or gpu-control=1000,1001 (repeatable); a group with a list is "
                 "closed to unauthenticated TCP peers");
  app.add_option("--allow-gid", allow_gid, "gids allowed, like --allow-uid (repeatable)");
  app.add_option("--signing-key-path", signing_key, "HS256 key file; TCP requests then need a bearer token");
  app.add_flag("--tcp-insecure", config.tcp_insecure,
               "Allow --tcp without --signing-key-path: TCP peers are unauthenticated and may use the API groups "
               "that have no allow list (a warning names them); without it ergd refuses to start");
  app.add_option("--gpu-power-poll-hz", config.gpu_power_poll_hz, "GPU power polling rate for streams")
      ->default_val(20.0);
  app.add_option("--cpu-power-poll-hz", config.cpu_power_poll_hz, "CPU power polling rate for streams")
      ->default_val(10.0);
  app.add_option("--max-connections", config.max_connections, "Concurrent connections before 503")
      ->default_val(1024)
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--max-connections-per-uid", config.max_connections_per_uid,
                 "Connections one uid may hold (all TCP peers count as one); default: a quarter of --max-connections")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--reserved-connections", config.reserved_connections,
                 "Connections kept for root and --allow-uid/--allow-gid peers; default: an eighth of "
                 "--max-connections");
  bool no_restore = false;
  app.add_flag("--no-restore-on-exit", no_restore,
               "Keep a power limit or locked clocks set through ergd when the process that set them exits "
               "(default: the GPU's default limit comes back and its locked clocks are reset)");
  config.state_dir = "/var/lib/ergd";
  app.add_option("--state-dir", config.state_dir,
                 "Where ergd records who owns each power limit and locked clocks, so they are restored across ergd "
                 "restarts (empty: memory only)")
      ->default_str("/var/lib/ergd");
  app.add_flag("--allow-insecure-socket-dir", config.allow_insecure_socket_dir,
               "Accept a sticky socket directory other users may write to (like /tmp), with a warning");
  double idle_s = 60, request_s = 10, write_s = 5;
  app.add_option("--idle-timeout", idle_s, "Seconds before an idle keep-alive connection is closed")
      ->default_val(60.0)
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--request-timeout", request_s, "Seconds a request may take to arrive whole (then 408)")
      ->default_val(10.0)
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--write-timeout", write_s,
                 "Seconds a reply may wait for the client to read before the connection is closed")
      ->default_val(5.0)
      ->check(CLI::Range(0.01, 3600.0));
  std::vector<std::string> attribution_uids, attribution_gids;
  double attribution_poll_s = 0.5, attribution_retention_s = 3600;
  app.add_option("--attribution-all-uids", attribution_uids,
                 "/attribution: uids that see every process (others see their own; root sees all), e.g. 1000,1001")
      ->delimiter(',');
  app.add_option("--attribution-all-gids", attribution_gids,
                 "/attribution: gids (primary or supplementary) whose members see every process")
      ->delimiter(',');
  app.add_option("--attribution-poll-s", attribution_poll_s,
                 "Seconds between reads of each GPU's counter and per-process samples for /attribution "
                 "(0: no /attribution, no such reads)")
      ->default_val(0.5)
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            double d = std::strtod(v.c_str(), &end);
            bool ok = !v.empty() && end == v.c_str() + v.size() && (d == 0 || (d >= 0.05 && d <= 60));
            return ok ? std::string() : std::string("must be 0 or a number of seconds in [0.05, 60]");
          },
          "0 or 0.05..60"));
  app.add_option("--attribution-retention-s", attribution_retention_s, "How far back /attribution can reach, seconds")
      ->default_val(3600.0)
      ->check(CLI::Range(1.0, 7.0 * 86400));
  std::vector<std::string> metrics_labels;
  app.add_option("--metrics-node", config.metrics_node,
                 "/metrics: the node label on every series (default: the host name; empty: none)");
  app.add_option("--metrics-label", metrics_labels, "/metrics: an extra label NAME=VALUE on every series (repeatable)");
  app.footer("Also: ergd serve [flags] (the same, as zeusd spells it); ergd token issue --help (bearer tokens).");
  app.set_version_flag("--version", "ergd 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return fail(ErrorCode::kNotFound, "");
  } catch (const CLI::CallForVersion&) {
    std::cout << "ergd 0.1.0\n";
    return fail(ErrorCode::kNotFound, "");
  } catch (const CLI::ParseError& e) {
    return fail(ErrorCode::kInvalidArgument, e.what());
  }
  config.restore_limits_on_exit = !no_restore;
  // A simulated ergd keeps its owners in memory unless told where: it must never touch the
  // records of the node's real ergd.
  if (app.count("--state-dir") == 0 && (config.simulate || std::getenv("ERG_SIMULATE") != nullptr))
    config.state_dir.clear();
  config.idle_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(idle_s * 1000));
  config.request_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(request_s * 1000));
  config.write_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(write_s * 1000));
  unsigned m = 0;
  auto r = std::from_chars(mode.data(), mode.data() + mode.size(), m, 8);
  if (mode.empty() || r.ec != std::errc() || r.ptr != mode.data() + mode.size() || m > 0777)
    return fail(ErrorCode::kInvalidArgument, "--socket-mode must be octal like 0660, got '" + mode + "'");
  config.socket_mode = m;
  if (!enable.empty()) {
    config.enabled.clear();
    for (const auto& e : enable) {
      auto g = protocol::parse_api_group(e);
      if (!g) return fail(g.error());
      config.enabled.insert(*g);
    }
  }
  for (const auto& a : allow_uid)
    if (auto res = add_allow_list(config, a, false); !res) return fail(res.error());
  for (const auto& a : allow_gid)
    if (auto res = add_allow_list(config, a, true); !res) return fail(res.error());
  if (!signing_key.empty()) config.signing_key_path = signing_key;
  auto parse_ids = [](const std::vector<std::string>& list, const char* flag, auto& out) -> Result<void> {
    for (const auto& part : list) {
      unsigned id = 0;
      auto parsed = std::from_chars(part.data(), part.data() + part.size(), id);
      if (part.empty() || parsed.ec != std::errc() || parsed.ptr != part.data() + part.size())
        return fail(ErrorCode::kInvalidArgument, std::string(flag) + ": invalid id '" + part + "'");
      out.insert(id);
    }
    return ok();
  };
  if (auto res = parse_ids(attribution_uids, "--attribution-all-uids", config.attribution_all_uids); !res)
    return fail(res.error());
  if (auto res = parse_ids(attribution_gids, "--attribution-all-gids", config.attribution_all_gids); !res)
    return fail(res.error());
  config.attribution_poll = std::chrono::milliseconds(static_cast<std::int64_t>(attribution_poll_s * 1000));
  config.attribution_retention = std::chrono::seconds(static_cast<std::int64_t>(attribution_retention_s));
  for (const auto& l : metrics_labels) {
    auto kv = prom::parse_label(l);
    if (!kv) return fail(ErrorCode::kInvalidArgument, "--metrics-label: " + kv.error().message);
    config.metrics_labels.insert(std::move(*kv));
  }
  return config;
}

}  // namespace erg::daemon

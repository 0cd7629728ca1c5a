#include <signal.h>

#include <cstring>
#include <ctime>
#include <iostream>
#include <vector>

#include "erg/daemon/auth.hpp"
#include "erg/daemon/daemon.hpp"
#include "erg/devices/devices.hpp"

namespace erg::daemon {

namespace {

int token_main(int argc, char** argv) {
  auto req = parse_token_command_line(argc, argv);
  if (!req) {
    if (req.error().code == ErrorCode::kNotFound && req.error().message.empty()) return 0;
    std::cerr << "ergd token: error: " << req.error().message << "\n";
    return 2;
  }
  auto key = read_signing_key(req->signing_key_path);
  if (!key) {
    std::cerr << "ergd token: error: " << key.error().message << "\n";
    return 1;
  }
  TokenClaims claims{req->user, req->scopes, std::nullopt};
  if (req->lifetime_s) claims.exp = static_cast<std::int64_t>(std::time(nullptr)) + *req->lifetime_s;
  auto token = issue_token(*key, claims);
  if (!token) {
    std::cerr << "ergd token: error: " << token.error().message << "\n";
    return 1;
  }
  std::cout << *token << std::endl;
  return 0;
}

}  // namespace

int run_main(int argc, char** argv) {
  // zeusd's command line: `zeusd serve [flags]` and `zeusd token issue ...`; plain `ergd [flags]`
  // serves too.
  if (argc > 1 && std::strcmp(argv[1], "token") == 0) return token_main(argc, argv);
  std::vector<char*> args(argv, argv + argc);
  if (argc > 1 && std::strcmp(argv[1], "serve") == 0) args.erase(args.begin() + 1);
  argc = static_cast<int>(args.size());
  argv = args.data();
  auto config = parse_command_line(argc, argv);
  if (!config) {
    if (config.error().code == ErrorCode::kNotFound && config.error().message.empty()) return 0;
    std::cerr << "ergd: error: " << config.error().message << "\n";
    return 2;
  }
  // Block the stop signals in every thread; the main thread waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // The devices every erg face would open (--simulate, ERG_SIMULATE, an inherited simulated
  // machine, or the hardware), never through another ergd.
  devices::DeviceOptions device_options;
  device_options.simulate = config->simulate;
  device_options.daemon = devices::DaemonUse::kNever;
  auto devices = devices::open_devices(device_options);
  if (!devices) {
    std::cerr << "ergd: error: " << devices.error().message << "\n";
    return 2;
  }
  for (const auto& u : devices->inventory.unavailable)
    std::cerr << "ergd: note: " << u.source << ": " << u.reason << "\n";
  if (devices->machine) {
    std::cerr << "ergd: SIMULATED machine " << devices->spec << " (" << devices::to_string(devices->source)
              << "); clients share it with ERG_SIMULATE='" << devices->spec << "' ERG_SIM_STATE=" << devices->state_file
              << "\n";
  }
  // After the devices are open, so the descriptors they hold are counted.
  auto fitted = fit_file_limit(*config);
  if (!fitted)
    std::cerr << "ergd: warning: " << fitted.error().message << "\n";
  else if (*fitted)
    std::cerr << "ergd: " << **fitted << "\n";
  // Events (each power limit restored after its setter exited), one line each.
  config->event_log = [](const std::string& line) { std::cerr << "ergd: " + line + "\n" << std::flush; };
  auto daemon = Daemon::create(*config, std::move(devices->inventory));
  if (!daemon) {
    std::cerr << "ergd: error: " << daemon.error().message << "\n";
    return 1;
  }
  if (auto r = (*daemon)->start(); !r) {
    std::cerr << "ergd: error: " << r.error().message << "\n";
    return 1;
  }
  for (const auto& w : (*daemon)->warnings()) std::cerr << "ergd: WARNING: " << w << "\n";
  std::cerr << "ergd: serving";
  if (!config->socket_path.empty()) std::cerr << " on " << config->socket_path;
  if (config->tcp) std::cerr << " and tcp port " << (*daemon)->tcp_port();
  std::cerr << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cerr << "ergd: " << strsignal(sig) << ", shutting down" << std::endl;
  (*daemon)->stop();
  return 0;
}

}  // namespace erg::daemon

#include <signal.h>

#include <cstring>
#include <iostream>

#include "erg/backends/discovery.hpp"
#include "erg/daemon/daemon.hpp"

namespace erg::daemon {

int run_main(int argc, char** argv) {
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

  auto inventory = backends::discover();
  if (!inventory) {
    std::cerr << "ergd: error: " << inventory.error().message << "\n";
    return 1;
  }
  for (const auto& u : inventory->unavailable) std::cerr << "ergd: note: " << u.source << ": " << u.reason << "\n";
  auto daemon = Daemon::create(*config, std::move(*inventory));
  if (!daemon) {
    std::cerr << "ergd: error: " << daemon.error().message << "\n";
    return 1;
  }
  if (auto r = (*daemon)->start(); !r) {
    std::cerr << "ergd: error: " << r.error().message << "\n";
    return 1;
  }
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

// The attacker of the security suite (tests/security/security_test.cpp), run as user nobody
// under setpriv: it does one kind of attack on a server and prints what it saw as one JSON line.
//
//   erg_attacker request (--unix PATH | --tcp HOST:PORT) [--token T] METHOD TARGET
//       one request; prints {"status": N, "body": "..."} (status 0: no reply, "error" says why)

#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "erg/client/connection.hpp"

namespace {

struct Target {
  erg::client::Endpoint endpoint;
  std::vector<std::string> rest;  // the arguments after the endpoint's
};

bool parse_target(int argc, char** argv, Target& t) {
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--unix" && i + 1 < argc) {
      t.endpoint.socket_path = argv[++i];
    } else if (a == "--tcp" && i + 1 < argc) {
      const std::string hp = argv[++i];
      const auto colon = hp.rfind(':');
      if (colon == std::string::npos) return false;
      t.endpoint.host = hp.substr(0, colon);
      t.endpoint.port = static_cast<std::uint16_t>(std::atoi(hp.c_str() + colon + 1));
    } else if (a == "--token" && i + 1 < argc) {
      t.endpoint.token = argv[++i];
    } else {
      t.rest.push_back(a);
    }
  }
  return !t.endpoint.socket_path.empty() || t.endpoint.port != 0;
}

int request(const Target& t) {
  if (t.rest.size() != 2) {
    std::cerr << "erg_attacker request: METHOD TARGET\n";
    return 2;
  }
  erg::client::Connection c(t.endpoint);
  auto r = c.request(t.rest[0], t.rest[1]);
  nlohmann::json out;
  if (r) {
    out["status"] = r->status;
    out["body"] = r->body;
  } else {
    out["status"] = 0;
    out["error"] = r.error().message;
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Target t;
  if (argc < 2 || !parse_target(argc, argv, t)) {
    std::cerr << "usage: erg_attacker request (--unix PATH | --tcp HOST:PORT) [--token T] METHOD TARGET\n";
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "request") return request(t);
  std::cerr << "erg_attacker: unknown attack '" << mode << "'\n";
  return 2;
}

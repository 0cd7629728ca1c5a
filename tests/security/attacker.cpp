// The attacker of the security suite (tests/security/security_test.cpp), run as user nobody
// under setpriv: it does one kind of attack on a server and prints what it saw as one JSON line.
//
//   erg_attacker request (--unix PATH | --tcp HOST:PORT) [--token T] METHOD TARGET
//       one request; prints {"status": N, "body": "..."} (status 0: no reply, "error" says why)
//   erg_attacker idle (--unix PATH | --tcp HOST:PORT) N SECONDS
//       opens N connections that send nothing and holds them; prints {"opened": n, "still_open": k}
//       at the end (k: those the server has not closed)
//   erg_attacker hold (--unix PATH | --tcp HOST:PORT) SECONDS METHOD TARGET [METHOD TARGET ...]
//       makes the requests (each on its own connection), prints {"statuses": [...]}, then lives
//       SECONDS more before it exits (a setter that owns what it set while it lives)
//   erg_attacker flood (--unix PATH | --tcp HOST:PORT) SECONDS
//       connects and closes at once, as fast as it can; prints {"connects": n, "failed": k}
//   erg_attacker raw (--unix PATH | --tcp HOST:PORT) REQUEST
//       sends REQUEST as it is (the two characters \r\n in it become CR LF) on a new
//       connection; prints {"status": N, "head": "...", "body": "..."} of the reply
//   erg_attacker fire (--unix PATH | --tcp HOST:PORT) N REQUEST
//       N times: a new connection, REQUEST sent (\r\n as for raw), closed at once without
//       reading (the client's socket is gone before the server looks at it); prints {"sent": n}
//   erg_attacker slow (--unix PATH | --tcp HOST:PORT) N SECONDS
//       slow loris: N connections, each sending a request's head one byte every 200 ms (a new
//       connection replaces one the server closed); prints {"opened": n} once they are open,
//       then {"opened": n, "closed_by_server": k} at the end

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
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

/// A connected socket to the target, or -1.
int connect_to(const erg::client::Endpoint& e) {
  if (!e.socket_path.empty()) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, e.socket_path.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  ::inet_pton(AF_INET, e.host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int idle(const Target& t) {
  if (t.rest.size() != 2) return 2;
  const int n = std::atoi(t.rest[0].c_str());
  const double seconds = std::atof(t.rest[1].c_str());
  std::vector<int> held;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_to(t.endpoint);
    if (fd >= 0) held.push_back(fd);
  }
  std::cout << nlohmann::json{{"opened", held.size()}}.dump() << std::endl;  // the test waits for this line
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  int open = 0;
  for (int fd : held) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0) ++open;
    ::close(fd);
  }
  std::cout << nlohmann::json{{"opened", held.size()}, {"still_open", open}}.dump() << std::endl;
  return 0;
}

int hold(const Target& t) {
  if (t.rest.size() < 3 || t.rest.size() % 2 != 1) return 2;
  nlohmann::json statuses = nlohmann::json::array();
  for (std::size_t i = 1; i + 1 < t.rest.size(); i += 2) {
    erg::client::Connection c(t.endpoint);
    auto r = c.request(t.rest[i], t.rest[i + 1]);
    statuses.push_back(r ? r->status : 0);
  }
  std::cout << nlohmann::json{{"statuses", statuses}}.dump() << std::endl;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(t.rest[0].c_str())));
  return 0;
}

int flood(const Target& t) {
  if (t.rest.size() != 1) return 2;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(t.rest[0].c_str()));
  long connects = 0, failed = 0;
  while (std::chrono::steady_clock::now() < end) {
    const int fd = connect_to(t.endpoint);
    if (fd < 0) {
      ++failed;
      continue;
    }
    ++connects;
    ::close(fd);
  }
  std::cout << nlohmann::json{{"connects", connects}, {"failed", failed}}.dump() << std::endl;
  return 0;
}

/// `given` with each two-character \r\n made CR LF.
std::string unescaped(const std::string& given) {
  std::string request;
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given.compare(i, 4, "\\r\\n") == 0) {
      request += "\r\n";
      i += 3;
    } else {
      request += given[i];
    }
  }
  return request;
}

int fire(const Target& t) {
  if (t.rest.size() != 2) return 2;
  const int n = std::atoi(t.rest[0].c_str());
  const std::string request = unescaped(t.rest[1]);
  int sent = 0;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_to(t.endpoint);
    if (fd < 0) continue;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) ++sent;
    ::close(fd);
  }
  std::cout << nlohmann::json{{"sent", sent}}.dump() << std::endl;
  return 0;
}

int raw(const Target& t) {
  if (t.rest.size() != 1) return 2;
  const std::string request = unescaped(t.rest[0]);
  nlohmann::json out{{"status", 0}};
  const int fd = connect_to(t.endpoint);
  if (fd < 0) {
    out["error"] = "cannot connect";
  } else {
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string reply;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
      char chunk[4096];
      for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;) reply.append(chunk, static_cast<std::size_t>(n));
    }
    ::close(fd);
    const auto end = reply.find("\r\n\r\n");
    if (reply.rfind("HTTP/1.1 ", 0) == 0) out["status"] = std::atoi(reply.c_str() + 9);
    out["head"] = reply.substr(0, end);
    out["body"] = end == std::string::npos ? "" : reply.substr(end + 4);
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  return 0;
}

int slow(const Target& t) {
  if (t.rest.size() != 2) return 2;
  const int n = std::atoi(t.rest[0].c_str());
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(t.rest[1].c_str()));
  const std::string head =
      "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Padding: " + std::string(4096, 'a');
  struct Slow {
    int fd;
    std::size_t sent;
  };
  std::vector<Slow> conns;
  long opened = 0, closed = 0;
  auto open_one = [&] {
    const int fd = connect_to(t.endpoint);
    if (fd >= 0) {
      conns.push_back({fd, 0});
      ++opened;
    }
  };
  for (int i = 0; i < n; ++i) open_one();
  std::cout << nlohmann::json{{"opened", opened}}.dump() << std::endl;  // the test waits for this line
  while (std::chrono::steady_clock::now() < end) {
    for (auto& c : conns) {
      if (c.fd < 0) continue;
      const char byte = head[c.sent % head.size()];
      if (::send(c.fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
        ::close(c.fd);
        c.fd = -1;
        ++closed;
        continue;
      }
      ++c.sent;
    }
    std::erase_if(conns, [](const Slow& c) { return c.fd < 0; });
    while (static_cast<int>(conns.size()) < n && std::chrono::steady_clock::now() < end) {
      const std::size_t before = conns.size();
      open_one();
      if (conns.size() == before) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& c : conns) ::close(c.fd);
  std::cout << nlohmann::json{{"opened", opened}, {"closed_by_server", closed}}.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Target t;
  if (argc < 2 || !parse_target(argc, argv, t)) {
    std::cerr << "usage: erg_attacker (request|idle|hold|flood|slow|raw|fire) (--unix PATH | --tcp HOST:PORT) ...\n";
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "request") return request(t);
  if (mode == "idle") return idle(t);
  if (mode == "flood") return flood(t);
  if (mode == "hold") return hold(t);
  if (mode == "slow") return slow(t);
  if (mode == "raw") return raw(t);
  if (mode == "fire") return fire(t);
  std::cerr << "erg_attacker: unknown attack '" << mode << "'\n";
  return 2;
}

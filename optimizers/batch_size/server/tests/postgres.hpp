#pragma once
// A throwaway PostgreSQL for the server's tests: Debian's initdb and pg_ctl under
// /usr/lib/postgresql/<version>/bin, run as the `postgres` user when the test runs as root (initdb
// refuses root), in a private temporary directory, listening on 127.0.0.1 at a free port with its
// socket in that directory. Started once per test process, stopped and removed at exit. A missing
// binary is an error the tests report, never a skip.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace erg::batch_size::server::testing {

class Postgres {
 public:
  /// The process's server, started on first use; check error() before using it.
  static Postgres& shared() {
    static Postgres pg;
    return pg;
  }
  Postgres(const Postgres&) = delete;
  Postgres& operator=(const Postgres&) = delete;

  /// Why the server could not start; empty when it runs.
  [[nodiscard]] const std::string& error() const { return error_; }

  /// A new empty database on the server, as a postgresql:// URL.
  std::string fresh_database() {
    const std::string name = "erg_test_" + std::to_string(next_++);
    pqxx::connection c(url("postgres"));
    pqxx::nontransaction(c).exec("CREATE DATABASE " + name);
    return url(name);
  }

  /// Rows of the first column of `sql` on the database at `db_url`, as text (NULL for null).
  static std::vector<std::string> column(const std::string& db_url, const std::string& sql) {
    pqxx::connection c(db_url);
    pqxx::nontransaction tx(c);
    std::vector<std::string> out;
    for (const auto& row : tx.exec(sql)) out.push_back(row[0].is_null() ? "NULL" : row[0].c_str());
    return out;
  }

  ~Postgres() {
    if (started_) (void)run(as_postgres() + "'" + bin_ + "/pg_ctl' -D '" + data() + "' -m immediate -w -t 30 stop");
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

 private:
  Postgres() {
    for (const auto& d : {"/usr/lib/postgresql"}) {
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(d, ec)) {
        const auto bin = entry.path() / "bin";
        if (std::filesystem::exists(bin / "initdb") && std::filesystem::exists(bin / "pg_ctl") && bin.string() > bin_)
          bin_ = bin.string();
      }
    }
    if (bin_.empty()) {
      error_ = "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (install postgresql)";
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "erg-pg-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr || chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        error_ = "running as root needs a `postgres` user to own " + dir_;
        return;
      }
    }
    port_ = free_port();
    if (int rc = run(as_postgres() + "'" + bin_ + "/initdb' -D '" + data() + "' -U erg -A trust -E UTF8 --no-sync > '" +
                     dir_ + "/initdb.log' 2>&1");
        rc != 0) {
      error_ = "initdb failed (" + std::to_string(rc) + "), see " + dir_ + "/initdb.log";
      return;
    }
    const std::string opts = "-p " + std::to_string(port_) + " -k " + dir_ +
                             " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200";
    if (int rc = run(as_postgres() + "'" + bin_ + "/pg_ctl' -D '" + data() + "' -l '" + dir_ +
                     "/server.log' -w -t 30 -o '" + opts + "' start > /dev/null");
        rc != 0) {
      error_ = "pg_ctl start failed (" + std::to_string(rc) + "), see " + dir_ + "/server.log";
      return;
    }
    started_ = true;
  }

  static int run(const std::string& cmd) { return std::system(("timeout 60 " + cmd).c_str()); }
  static std::string as_postgres() { return geteuid() == 0 ? "runuser -u postgres -- " : ""; }
  [[nodiscard]] std::string data() const { return dir_ + "/data"; }
  [[nodiscard]] std::string url(const std::string& db) const {
    return "postgresql://erg@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }

  static int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
  }

  std::string bin_;
  std::string dir_;
  std::string error_;
  int port_ = 0;
  int next_ = 0;
  bool started_ = false;
};

}  // namespace erg::batch_size::server::testing

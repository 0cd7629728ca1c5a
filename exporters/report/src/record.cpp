#include "erg/exporters/report/record.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <ctime>

namespace erg::report {
namespace {

// The schema of format version 1 (docs/report.md). Times are seconds since meta t0_steady_ns;
// power in W, energy in J.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS devices (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, idx INTEGER NOT NULL,
  domain TEXT NOT NULL, name TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS samples (device INTEGER NOT NULL REFERENCES devices(id), t_s REAL NOT NULL,
  power_w REAL NOT NULL);
CREATE TABLE IF NOT EXISTS windows (id INTEGER PRIMARY KEY, name TEXT NOT NULL, start_s REAL NOT NULL,
  end_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS window_energy (window INTEGER NOT NULL REFERENCES windows(id),
  device INTEGER NOT NULL REFERENCES devices(id), energy_j REAL NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, t_s REAL NOT NULL, kind TEXT NOT NULL,
  data TEXT NOT NULL);
)sql";

Error db_error(sqlite3* db, const std::string& path, const std::string& what) {
  return Error{ErrorCode::kIo, what + " " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory")};
}

/// A prepared statement, finalized on scope exit.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &s, nullptr); }
  ~Stmt() { sqlite3_finalize(s); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  explicit operator bool() const { return s != nullptr; }
};

std::string text_col(sqlite3_stmt* s, int i) {
  const auto* t = sqlite3_column_text(s, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

Result<sqlite3*> open_db(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    Error e = db_error(db, path, "cannot open");
    sqlite3_close(db);
    return fail(e);
  }
  // Other processes of the run write too: wait for their transactions rather than fail.
  sqlite3_busy_timeout(db, 10000);
  return db;
}

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RecordWriter::~RecordWriter() { sqlite3_close(db_); }

Result<void> RecordWriter::exec(const std::string& sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : "unknown error";
    sqlite3_free(msg);
    return fail(ErrorCode::kIo, "cannot write " + path_ + ": " + m);
  }
  return ok();
}

Result<std::unique_ptr<RecordWriter>> RecordWriter::create(const std::string& path, bool simulated,
                                                           std::int64_t t0_steady_ns) {
  std::remove(path.c_str());
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  auto db = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db) return fail(db.error());
  std::unique_ptr<RecordWriter> w(new RecordWriter());
  w->path_ = path;
  w->db_ = *db;
  w->t0_steady_ns_ = t0_steady_ns;
  // WAL: a commit is one append, readers see the last commit while the run goes on, and a killed
  // writer loses only its open transaction. synchronous=NORMAL survives a killed process (not a
  // power cut) without an fsync per batch.
  if (auto r = w->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !r) return fail(r.error());
  if (auto r = w->exec(std::string("BEGIN;") + kSchema); !r) return fail(r.error());
  char created[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  for (const auto& [k, v] : std::map<std::string, std::string>{{"format", "erg-record"},
                                                               {"format_version", std::to_string(kRecordFormatVersion)},
                                                               {"simulated", simulated ? "1" : "0"},
                                                               {"t0_steady_ns", std::to_string(t0_steady_ns)},
                                                               {"created_utc", created}})
    if (auto r = w->set_meta(k, v); !r) return fail(r.error());
  if (auto r = w->exec("COMMIT;"); !r) return fail(r.error());
  return w;
}

Result<std::unique_ptr<RecordWriter>> RecordWriter::open(const std::string& path) {
  auto db = open_db(path, SQLITE_OPEN_READWRITE);
  if (!db) return fail(db.error());
  std::unique_ptr<RecordWriter> w(new RecordWriter());
  w->path_ = path;
  w->db_ = *db;
  Stmt q(w->db_, "SELECT key, value FROM meta WHERE key IN ('format', 'format_version', 't0_steady_ns')");
  if (!q) return fail(ErrorCode::kInvalidArgument, path + " is not an erg record (no meta table)");
  std::map<std::string, std::string> meta;
  while (sqlite3_step(q.s) == SQLITE_ROW) meta[text_col(q.s, 0)] = text_col(q.s, 1);
  if (meta["format"] != "erg-record" || meta["format_version"] != std::to_string(kRecordFormatVersion))
    return fail(ErrorCode::kInvalidArgument,
                path + " is not an erg record of format version " + std::to_string(kRecordFormatVersion));
  w->t0_steady_ns_ = std::stoll(meta["t0_steady_ns"]);
  return w;
}

double RecordWriter::seconds_at(std::int64_t steady_ns) const {
  return static_cast<double>(steady_ns - t0_steady_ns_) / 1e9;
}
double RecordWriter::seconds_now() const { return seconds_at(steady_now_ns()); }

Result<void> RecordWriter::set_meta(const std::string& key, const std::string& value) {
  Stmt q(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)");
  if (!q) return fail(db_error(db_, path_, "cannot write"));
  sqlite3_bind_text(q.s, 1, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q.s, 2, value.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q.s) != SQLITE_DONE) return fail(db_error(db_, path_, "cannot write"));
  return ok();
}

Result<std::int64_t> RecordWriter::add_device(const RecordDevice& d) {
  Stmt q(db_, "INSERT INTO devices(kind, idx, domain, name) VALUES (?, ?, ?, ?)");
  if (!q) return fail(db_error(db_, path_, "cannot write"));
  sqlite3_bind_text(q.s, 1, d.kind.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(q.s, 2, d.index);
  sqlite3_bind_text(q.s, 3, d.domain.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q.s, 4, d.name.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q.s) != SQLITE_DONE) return fail(db_error(db_, path_, "cannot write"));
  return sqlite3_last_insert_rowid(db_);
}

Result<void> RecordWriter::add_samples(const std::vector<PowerSample>& samples) {
  if (samples.empty()) return ok();
  if (auto r = exec("BEGIN IMMEDIATE;"); !r) return r;
  {
    Stmt q(db_, "INSERT INTO samples(device, t_s, power_w) VALUES (?, ?, ?)");
    bool good = static_cast<bool>(q);
    for (std::size_t i = 0; good && i < samples.size(); ++i) {
      sqlite3_bind_int64(q.s, 1, samples[i].device);
      sqlite3_bind_double(q.s, 2, samples[i].t_s);
      sqlite3_bind_double(q.s, 3, samples[i].power_w);
      good = sqlite3_step(q.s) == SQLITE_DONE;
      sqlite3_reset(q.s);
    }
    if (!good) {
      Error e = db_error(db_, path_, "cannot write");
      (void)exec("ROLLBACK;");
      return fail(e);
    }
  }
  return exec("COMMIT;");
}

Result<void> RecordWriter::add_window(const RecordWindow& w) {
  if (auto r = exec("BEGIN IMMEDIATE;"); !r) return r;
  auto rollback = [&] {
    Error e = db_error(db_, path_, "cannot write");
    (void)exec("ROLLBACK;");
    return fail(e);
  };
  {
    Stmt q(db_, "INSERT INTO windows(name, start_s, end_s) VALUES (?, ?, ?)");
    if (!q) return rollback();
    sqlite3_bind_text(q.s, 1, w.name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(q.s, 2, w.start_s);
    sqlite3_bind_double(q.s, 3, w.end_s);
    if (sqlite3_step(q.s) != SQLITE_DONE) return rollback();
  }
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  {
    Stmt q(db_, "INSERT INTO window_energy(window, device, energy_j) VALUES (?, ?, ?)");
    if (!q) return rollback();
    for (const auto& [device, joules] : w.energy_j) {
      sqlite3_bind_int64(q.s, 1, id);
      sqlite3_bind_int64(q.s, 2, device);
      sqlite3_bind_double(q.s, 3, joules);
      if (sqlite3_step(q.s) != SQLITE_DONE) return rollback();
      sqlite3_reset(q.s);
    }
  }
  return exec("COMMIT;");
}

Result<void> RecordWriter::add_event(const RecordEvent& e) {
  Stmt q(db_, "INSERT INTO events(t_s, kind, data) VALUES (?, ?, ?)");
  if (!q) return fail(db_error(db_, path_, "cannot write"));
  const std::string data = e.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  sqlite3_bind_double(q.s, 1, e.t_s);
  sqlite3_bind_text(q.s, 2, e.kind.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q.s, 3, data.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q.s) != SQLITE_DONE) return fail(db_error(db_, path_, "cannot write"));
  return ok();
}

bool Record::simulated() const {
  auto it = meta.find("simulated");
  return it != meta.end() && it->second == "1";
}

Result<Record> read_record(const std::string& path) {
  auto opened = open_db(path, SQLITE_OPEN_READONLY);
  if (!opened) return fail(opened.error());
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(*opened, sqlite3_close);
  Record rec;
  {
    Stmt q(db.get(), "SELECT key, value FROM meta");
    if (!q) return fail(ErrorCode::kInvalidArgument, path + " is not an erg record: " + sqlite3_errmsg(db.get()));
    while (sqlite3_step(q.s) == SQLITE_ROW) rec.meta[text_col(q.s, 0)] = text_col(q.s, 1);
  }
  if (rec.meta["format"] != "erg-record")
    return fail(ErrorCode::kInvalidArgument, path + " is not an erg record (meta format is not erg-record)");
  if (std::atoi(rec.meta["format_version"].c_str()) > kRecordFormatVersion)
    return fail(ErrorCode::kInvalidArgument, path + " has format version " + rec.meta["format_version"] +
                                                 "; this erg reads up to " + std::to_string(kRecordFormatVersion));
  {
    Stmt q(db.get(), "SELECT id, kind, idx, domain, name FROM devices ORDER BY id");
    if (!q) return fail(db_error(db.get(), path, "cannot read"));
    while (sqlite3_step(q.s) == SQLITE_ROW)
      rec.devices.push_back({sqlite3_column_int64(q.s, 0), text_col(q.s, 1),
                             static_cast<unsigned>(sqlite3_column_int64(q.s, 2)), text_col(q.s, 3), text_col(q.s, 4)});
  }
  {
    // In insertion order (a sequential scan; no index to keep up while recording): each series
    // comes in time order already, and is sorted here only if a writer interleaved out of order.
    Stmt q(db.get(), "SELECT device, t_s, power_w FROM samples");
    if (!q) return fail(db_error(db.get(), path, "cannot read"));
    std::int64_t last_device = -1;
    std::vector<PowerSample>* series = nullptr;
    while (sqlite3_step(q.s) == SQLITE_ROW) {
      PowerSample s{sqlite3_column_int64(q.s, 0), sqlite3_column_double(q.s, 1), sqlite3_column_double(q.s, 2)};
      if (s.device != last_device) series = &rec.samples[s.device], last_device = s.device;
      series->push_back(s);
    }
    for (auto& [id, s] : rec.samples)
      if (!std::is_sorted(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.t_s < b.t_s; }))
        std::stable_sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.t_s < b.t_s; });
  }
  {
    Stmt q(db.get(),
           "SELECT w.id, w.name, w.start_s, w.end_s, e.device, e.energy_j FROM windows w "
           "LEFT JOIN window_energy e ON e.window = w.id ORDER BY w.start_s, w.id");
    if (!q) return fail(db_error(db.get(), path, "cannot read"));
    std::int64_t last = -1;
    while (sqlite3_step(q.s) == SQLITE_ROW) {
      const std::int64_t id = sqlite3_column_int64(q.s, 0);
      if (id != last) {
        rec.windows.push_back({text_col(q.s, 1), sqlite3_column_double(q.s, 2), sqlite3_column_double(q.s, 3), {}});
        last = id;
      }
      if (sqlite3_column_type(q.s, 4) != SQLITE_NULL)
        rec.windows.back().energy_j[sqlite3_column_int64(q.s, 4)] = sqlite3_column_double(q.s, 5);
    }
  }
  {
    Stmt q(db.get(), "SELECT t_s, kind, data FROM events ORDER BY t_s, id");
    if (!q) return fail(db_error(db.get(), path, "cannot read"));
    while (sqlite3_step(q.s) == SQLITE_ROW) {
      auto data = nlohmann::json::parse(text_col(q.s, 2), nullptr, false);
      rec.events.push_back({sqlite3_column_double(q.s, 0), text_col(q.s, 1), data.is_discarded() ? nullptr : data});
    }
  }
  return rec;
}

}  // namespace erg::report

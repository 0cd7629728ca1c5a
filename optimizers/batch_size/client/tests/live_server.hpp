#pragma once
// A real batch-size optimizer server for the client's tests: SQLite in a temporary directory,
// served over HTTP on 127.0.0.1 at a free port from a thread, stopped and removed at the end.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "erg/optimizers/batch_size/optimizer.hpp"
#include "erg/optimizers/batch_size/server/http_server.hpp"
#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"

namespace erg::batch_size::client::testing {

class LiveServer {
 public:
  LiveServer() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "erg-bso-client-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    auto store = server::open_store("sqlite:///" + (dir_ / "bso.db").string());
    EXPECT_TRUE(store) << store.error().message;
    store_ = std::move(*store);
    service_ = std::make_unique<server::Service>(*store_);
    auto http = server::HttpServer::bind(*service_, server::HttpOptions{});
    EXPECT_TRUE(http) << http.error().message;
    http_ = std::move(*http);
    thread_ = std::thread([this] { http_->run(); });
    http_->wait_until_ready();
  }
  ~LiveServer() {
    http_->stop();
    thread_.join();
    http_.reset();
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(http_->port()); }
  [[nodiscard]] server::Store& store() { return *store_; }

  /// The job's optimizer as the database holds it (nullopt for an unknown job).
  std::optional<Optimizer> stored(const std::string& job_id) {
    auto tx = store_->begin();
    EXPECT_TRUE(tx) << tx.error().message;
    auto job = (*tx)->load_job(job_id);
    EXPECT_TRUE(job) << job.error().message;
    if (!*job) return std::nullopt;
    auto o = Optimizer::restore((*job)->optimizer_state);
    EXPECT_TRUE(o) << o.error().message;
    return std::move(*o);
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<server::Store> store_;
  std::unique_ptr<server::Service> service_;
  std::unique_ptr<server::HttpServer> http_;
  std::thread thread_;
};

}  // namespace erg::batch_size::client::testing

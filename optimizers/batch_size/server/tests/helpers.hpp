#pragma once
// Shared by the server's tests: a temporary directory and Zeus-shaped request bodies.

#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace erg::batch_size::server::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "erg-bso-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A JobSpecFromClient as Zeus's BatchSizeOptimizer sends it (every field, nulls included).
inline nlohmann::json job_body(const std::string& job_id, int default_bs = 128) {
  return {{"job_id", job_id},
          {"job_id_prefix", "test"},
          {"batch_sizes", {8, 16, 32, 64, 128, 256}},
          {"default_batch_size", default_bs},
          {"eta_knob", 0.5},
          {"beta_knob", nullptr},
          {"target_metric", 0.5},
          {"higher_is_better_metric", true},
          {"max_epochs", 100},
          {"num_pruning_rounds", 2},
          {"window_size", 0},
          {"mab_prior_mean", 0.0},
          {"mab_prior_precision", 0.0},
          {"mab_num_explorations", 2},
          {"mab_seed", 123456},
          {"max_power", 300.0},
          {"number_of_gpus", 1},
          {"gpu_model", "A100"}};
}

/// A TrainingResult whose Zeus cost (η = 0.5, 300 W) is `cost`: energy 1 J, time (2·cost − 1)/300 s.
inline nlohmann::json report_body(const std::string& job_id, int bs, int trial, double cost, bool converged,
                                  int epoch = 100) {
  return {{"job_id", job_id},      {"batch_size", bs},
          {"trial_number", trial}, {"time", (2.0 * cost - 1.0) / 300.0},
          {"energy", 1.0},         {"metric", converged ? 0.55 : 0.4},
          {"current_epoch", epoch}};
}

}  // namespace erg::batch_size::server::testing

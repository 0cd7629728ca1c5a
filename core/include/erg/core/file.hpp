#pragma once
/// Small file helpers shared by every layer.

#include <filesystem>
#include <string>

#include "erg/core/result.hpp"

namespace erg {

/// Writes `content` to `path` atomically: a temporary file in the same directory is written
/// (mode `mode`, not subject to the umask), optionally fsync'ed, then renamed over `path`. A
/// reader never sees a torn file, and a failure leaves no partial file. Errors: Io, naming
/// `path`.
Result<void> write_file_atomic(const std::filesystem::path& path, const std::string& content, unsigned mode = 0644,
                               bool sync = false);

}  // namespace erg

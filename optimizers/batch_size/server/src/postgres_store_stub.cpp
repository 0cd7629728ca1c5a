// Built when libpqxx is absent: PostgreSQL URLs are refused with a reason.
#include "erg/optimizers/batch_size/server/store.hpp"

namespace erg::batch_size::server {

Result<std::unique_ptr<Store>> open_postgres_store(const std::string&) {
  return fail(ErrorCode::kNotSupported, "this erg was built without PostgreSQL support (libpqxx)");
}

}  // namespace erg::batch_size::server

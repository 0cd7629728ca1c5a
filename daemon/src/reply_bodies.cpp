// The per-thread spare reply body (reply_bodies.hpp).

#include "reply_bodies.hpp"

namespace erg::daemon {
namespace {

constexpr std::size_t kMaxKeptBody = 64 * 1024;
thread_local std::string t_spare_body;

}  // namespace

std::string take_reply_body() {
  std::string body = std::move(t_spare_body);
  body.clear();
  return body;
}

void give_back_reply_body(std::string&& body) {
  if (body.capacity() <= kMaxKeptBody) t_spare_body = std::move(body);
}

}  // namespace erg::daemon

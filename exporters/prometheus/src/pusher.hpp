#pragma once
// The background sender every push class shares: a queue of group pushes (the latest body of a
// group replaces one still queued), one thread, bounded exchanges and retries, one error path.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "erg/exporters/prometheus/push.hpp"

namespace erg::prom {

class Pusher {
 public:
  /// InvalidArgument for a URL that is not http://host:port or host:port, or an empty job.
  static Result<std::unique_ptr<Pusher>> create(PushOptions options);
  ~Pusher();
  /// Queues a POST of `body` (text format) to the group {job, grouping..., window}. Never blocks
  /// on the network. `kind` tells apart bodies of one window that must not replace each other in
  /// the queue (histogram, counter, gauge).
  void submit(const std::string& window, const std::string& kind, std::string body);
  /// Waits until the queue is empty and nothing is in flight, at most `timeout`.
  bool flush(std::chrono::milliseconds timeout);
  /// Reports `message` through on_error (or stderr).
  void report(const std::string& message) const;
  [[nodiscard]] std::uint64_t errors() const;

 private:
  struct State;
  explicit Pusher(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace erg::prom

#include "http.hpp"

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

namespace erg::carbon::detail {

namespace {

constexpr std::size_t kMaxBody = 16u << 20;

struct Sink {
  std::string body;
  bool too_big = false;
};

std::size_t on_data(char* data, std::size_t size, std::size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * n;
  if (sink->body.size() + bytes > kMaxBody) {
    sink->too_big = true;
    return 0;  // aborts the transfer
  }
  sink->body.append(data, bytes);
  return bytes;
}

}  // namespace

Result<HttpResponse> http_get(const std::string& url, const std::vector<std::string>& headers,
                              std::chrono::milliseconds timeout) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return fail(ErrorCode::kInternal, "libcurl could not start a request");
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> list_guard(list, &curl_slist_free_all);
  Sink sink;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in a threaded process
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "erg");
  const CURLcode rc = curl_easy_perform(c);
  // The URL may carry an API key: messages name the host's answer, not the URL.
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return fail(ErrorCode::kTimeout, "no answer within " + std::to_string(timeout.count()) + " ms");
  if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY)
    return fail(ErrorCode::kUnavailable, std::string("cannot reach the service: ") + curl_easy_strerror(rc));
  if (sink.too_big) return fail(ErrorCode::kIo, "answer larger than 16 MiB");
  if (rc != CURLE_OK) return fail(ErrorCode::kIo, std::string("request failed: ") + curl_easy_strerror(rc));
  HttpResponse r;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(sink.body);
  return r;
}

std::string url_encode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

Error http_status_error(const HttpResponse& response, const std::string& what) {
  std::string detail;
  auto j = nlohmann::json::parse(response.body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    for (const char* key : {"error", "message", "detail"}) {
      auto it = j.find(key);
      if (it == j.end()) continue;
      if (it->is_string()) detail = it->get<std::string>();
      if (it->is_object() && it->contains("message") && (*it)["message"].is_string())
        detail = (*it)["message"].get<std::string>();
      if (!detail.empty()) break;
    }
  }
  if (detail.empty() && !response.body.empty() && response.body.size() < 200 && j.is_discarded())
    detail = response.body;
  ErrorCode code = ErrorCode::kUnavailable;
  const long s = response.status;
  if (s == 401 || s == 403) code = ErrorCode::kNoPermission;
  if (s == 404) code = ErrorCode::kNotFound;
  if (s == 400 || s == 422) code = ErrorCode::kInvalidArgument;
  std::string msg = "HTTP " + std::to_string(s) + " from " + what;
  if (s == 401 || s == 403) msg += " (is the API token right?)";
  if (!detail.empty()) msg += ": " + detail;
  return Error{code, msg};
}

}  // namespace erg::carbon::detail

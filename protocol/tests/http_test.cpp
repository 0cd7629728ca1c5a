#include "erg/protocol/http.hpp"

#include <gtest/gtest.h>

namespace erg::protocol {
namespace {

TEST(HttpParse, CompleteGetWithQuery) {
  HttpRequest r;
  std::string buf = "GET /gpu/get_power?gpu_ids=0,1 HTTP/1.1\r\nHost: localhost\r\n\r\nGET /x";
  auto o = parse_request(buf, r);
  ASSERT_EQ(o.status, ParseStatus::kComplete) << o.error_message;
  EXPECT_EQ(o.consumed, buf.find("GET /x"));
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/gpu/get_power");
  EXPECT_EQ(r.query, "gpu_ids=0,1");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.header("host"), "localhost");
}

TEST(HttpParse, IncompleteUntilBlankLineAndBody) {
  HttpRequest r;
  EXPECT_EQ(parse_request("GET / HTTP/1.1\r\nHost: a\r\n", r).status, ParseStatus::kIncomplete);
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab", r).status, ParseStatus::kIncomplete);
  auto o = parse_request("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", r);
  ASSERT_EQ(o.status, ParseStatus::kComplete);
  EXPECT_EQ(r.body, "abc");
}

TEST(HttpParse, ConnectionSemantics) {
  HttpRequest r;
  ASSERT_EQ(parse_request("GET / HTTP/1.0\r\n\r\n", r).status, ParseStatus::kComplete);
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(parse_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", r).status, ParseStatus::kComplete);
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(parse_request("GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n", r).status, ParseStatus::kComplete);
  EXPECT_FALSE(r.keep_alive);
}

struct Bad {
  const char* text;
  int status;
};

TEST(HttpParse, MalformedRequestsAreErrorsWithStatus) {
  const Bad cases[] = {
      {"GET\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1 x\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET http://x/ HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTX/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: b\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
  };
  for (const auto& c : cases) {
    HttpRequest r;
    auto o = parse_request(c.text, r);
    EXPECT_EQ(o.status, ParseStatus::kError) << c.text;
    EXPECT_EQ(o.error_status, c.status) << c.text;
    EXPECT_FALSE(o.error_message.empty());
  }
}

TEST(HttpParse, LimitsGive414And431EvenBeforeTheEnd) {
  HttpRequest r;
  std::string long_target = "GET /" + std::string(9000, 'a');
  EXPECT_EQ(parse_request(long_target, r).error_status, 414);
  std::string huge_headers = "GET / HTTP/1.1\r\nX: " + std::string(20000, 'a');
  EXPECT_EQ(parse_request(huge_headers, r).error_status, 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse_request(many + "\r\n", r).error_status, 431);
}

// Field values and targets are checked eight bytes at a time: a bad byte is found at every
// position of a word and of the tail, and the bytes that are allowed pass everywhere.
TEST(HttpParse, EveryBadByteIsFoundAtEveryPosition) {
  for (std::size_t at = 0; at < 21; ++at) {
    for (int c = 0; c < 256; ++c) {
      std::string value(21, 'v');
      value[at] = static_cast<char>(c);
      const bool value_ok = c == '\t' || (c >= 0x20 && c != 0x7f);
      HttpRequest r;
      std::string req = "GET / HTTP/1.1\r\nX-A: " + value + "\r\n\r\n";
      auto o = parse_request(req, r);
      if (c == '\n' || c == '\r' || c == '\t' || c == ' ') continue;  // line structure / trimmed ends
      if (value_ok) {
        ASSERT_EQ(o.status, ParseStatus::kComplete) << "value byte " << c << " at " << at;
        EXPECT_EQ(r.header("x-a"), value);
      } else {
        ASSERT_EQ(o.status, ParseStatus::kError) << "value byte " << c << " at " << at;
        EXPECT_EQ(o.error_message, "invalid character in header value");
      }
    }
  }
  for (std::size_t at = 1; at < 22; ++at) {
    for (int c = 0; c < 256; ++c) {
      if (c == '\n' || c == ' ' || c == '?') continue;  // line end, request-line split, query
      std::string target = "/" + std::string(21, 't');
      target[at] = static_cast<char>(c);
      const bool target_ok = c > 0x20 && c < 0x7f;
      HttpRequest r;
      auto o = parse_request("GET " + target + " HTTP/1.1\r\n\r\n", r);
      if (target_ok) {
        ASSERT_EQ(o.status, ParseStatus::kComplete) << "target byte " << c << " at " << at;
        EXPECT_EQ(r.target, target);
      } else {
        ASSERT_EQ(o.status, ParseStatus::kError) << "target byte " << c << " at " << at;
        EXPECT_EQ(o.error_status, 400);
      }
    }
  }
}

TEST(HttpParse, HeaderNameErrorsSayWhichProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"NoColon", "malformed header line"},   {"No Colon", "malformed header line"},
      {"Bad Name: b", "invalid header name"}, {": empty name", "invalid header name"},
      {"A(b: c", "invalid header name"},      {"A\x80: c", "invalid header name"},
  };
  for (const auto& [line, message] : cases) {
    HttpRequest r;
    auto o = parse_request(std::string("GET / HTTP/1.1\r\n") + line + "\r\n\r\n", r);
    ASSERT_EQ(o.status, ParseStatus::kError) << line;
    EXPECT_EQ(o.error_status, 400) << line;
    EXPECT_EQ(o.error_message, message) << line;
  }
}

TEST(HttpParse, ResponseHeadersAreLookedUpInTheHead) {
  std::string wire =
      "HTTP/1.1 200 OK\r\nX-One:  first \r\ncontent-length: 2\r\nx-ONE: second\r\nConnection: Close\r\n"
      "Empty:\r\n\r\nokHTTP/1.1";
  ParsedResponse p;
  auto o = parse_response(wire, p);
  ASSERT_EQ(o.status, ParseStatus::kComplete) << o.error_message;
  EXPECT_EQ(o.consumed, wire.find("HTTP/1.1", 1));
  EXPECT_EQ(p.body, "ok");
  EXPECT_EQ(p.header("x-one"), "first");  // the first of the name, without its spaces
  EXPECT_EQ(p.header("CONTENT-LENGTH"), "2");
  EXPECT_EQ(p.header("empty"), "");
  EXPECT_EQ(p.header("X-On"), std::nullopt);
  EXPECT_EQ(p.header("ok"), std::nullopt);  // the body is not a header
  EXPECT_FALSE(p.keep_alive);
  EXPECT_EQ(parse_response("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nBad Name: x\r\n\r\nok", p).error_message,
            "invalid header name");
}

TEST(HttpSerialize, ResponseRoundTrip) {
  HttpResponse resp{400, "application/json", R"({"error":"x"})", {{"WWW-Authenticate", "Bearer"}}};
  std::string wire = serialize_response(resp, false);
  EXPECT_EQ(wire.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u);
  ParsedResponse p;
  auto o = parse_response(wire, p);
  ASSERT_EQ(o.status, ParseStatus::kComplete);
  EXPECT_EQ(o.consumed, wire.size());
  EXPECT_EQ(p.status, 400);
  EXPECT_EQ(p.body, R"({"error":"x"})");
  EXPECT_FALSE(p.keep_alive);
  EXPECT_EQ(p.header("www-authenticate"), "Bearer");
}

TEST(HttpSerialize, StreamHeadHasNoLength) {
  ParsedResponse p;
  std::string wire = serialize_stream_head(200, "text/event-stream") + "data: {}\n\n";
  auto o = parse_response(wire, p);
  ASSERT_EQ(o.status, ParseStatus::kComplete);
  EXPECT_TRUE(p.streaming);
  EXPECT_EQ(wire.substr(o.consumed), "data: {}\n\n");
}

TEST(Utf8, ValidAndInvalid) {
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("\xC3\xA9t\xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xFF"));
}

}  // namespace
}  // namespace erg::protocol

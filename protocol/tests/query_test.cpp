#include "erg/protocol/query.hpp"

#include <gtest/gtest.h>

#include "erg/protocol/routes.hpp"

namespace erg::protocol {
namespace {

TEST(ParseQuery, DecodesPercentAndPlus) {
  auto q = parse_query("a=1%2C2&b=x+y&&c");
  ASSERT_TRUE(q) << q.error().message;
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ((*q)[0].second, "1,2");
  EXPECT_EQ((*q)[1].second, "x y");
  EXPECT_EQ((*q)[2].first, "c");
  EXPECT_EQ((*q)[2].second, "");
}

TEST(ParseQuery, RejectsBadEscapesAndInvalidUtf8) {
  EXPECT_FALSE(parse_query("a=%2"));
  EXPECT_FALSE(parse_query("a=%zz"));
  EXPECT_FALSE(parse_query("a=%C3"));
  auto r = parse_query("a=%FF%FE");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("UTF-8"), std::string::npos);
}

TEST(Query, UnknownFieldMessageLikeActix) {
  const auto& info = route_info(Route::kSetPowerLimit);
  auto q = Query::parse("gpu_ids=0&power_limit_mw=1&block=true&foo=1", info.params, info.required);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().message,
            "Query deserialize error: unknown field `foo`, expected one of `gpu_ids`, `power_limit_mw`, `block`");
  const auto& none = route_info(Route::kTime);
  auto t = Query::parse("x=1", none.params, none.required);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message, "Query deserialize error: unknown field `x`, there are no fields");
}

TEST(Query, MissingAndDuplicateFields) {
  const auto& info = route_info(Route::kSetPowerLimit);
  auto m = Query::parse("gpu_ids=0&power_limit_mw=1", info.params, info.required);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "Query deserialize error: missing field `block`");
  auto d = Query::parse("gpu_ids=0&gpu_ids=1&power_limit_mw=1&block=true", info.params, info.required);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message, "Query deserialize error: duplicate field `gpu_ids`");
}

TEST(Query, TypedFields) {
  const auto& info = route_info(Route::kSetPowerLimit);
  auto q = Query::parse("gpu_ids=0&power_limit_mw=150000&block=false", info.params, info.required);
  ASSERT_TRUE(q);
  EXPECT_EQ(**q->get_u32("power_limit_mw"), 150000u);
  EXPECT_EQ(**q->get_bool("block"), false);
  auto bad = Query::parse("gpu_ids=0&power_limit_mw=-5&block=yes", info.params, info.required);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->get_u32("power_limit_mw").error().message, "Query deserialize error: invalid digit found in string");
  EXPECT_EQ(bad->get_bool("block").error().message,
            "Query deserialize error: provided string was not `true` or `false`");
  auto big = Query::parse("gpu_ids=0&power_limit_mw=4294967296&block=true", info.params, info.required);
  ASSERT_TRUE(big);
  EXPECT_FALSE(big->get_u32("power_limit_mw"));
}

TEST(Ids, SortedDedupedLenient) {
  EXPECT_EQ(parse_ids("3,1,1, 2"), (std::vector<unsigned>{1, 2, 3}));
  EXPECT_EQ(parse_ids("0,abc"), (std::vector<unsigned>{0}));
  EXPECT_TRUE(parse_ids("").empty());
  EXPECT_TRUE(parse_ids("-1,x").empty());
  EXPECT_TRUE(parse_ids("99999999999999").empty());
  std::vector<unsigned> ids{0, 5};
  EXPECT_EQ(format_ids(ids), "[0, 5]");
}

}  // namespace
}  // namespace erg::protocol

// The offline providers: erg's yearly table (every number with its source and year) and a user's
// hourly CSV; no network anywhere in this file.

#include "erg/carbon/offline.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace erg::carbon {
extern const char* const kBuiltinYearlyTable;
}

namespace erg::carbon {
namespace {

using namespace std::chrono;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

UtcHour at(int y, unsigned mo, unsigned d, int h) { return sys_days{year{y} / month{mo} / day{d}} + hours{h}; }

TEST(YearlyTable, BuiltInTableIsTheRepositoryFileAndEveryRowCitesASourceAndYear) {
  const std::string file = read(std::string(ERG_SOURCE_DIR) + "/carbon/data/grid_intensity_yearly.csv");
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(file, std::string(kBuiltinYearlyTable));
  auto table = parse_yearly_table(file);
  ASSERT_TRUE(table) << table.error().message;
  EXPECT_EQ(table->size(), builtin_yearly_table().size());
  EXPECT_GT(table->size(), 100u);
  for (const auto& [zone, row] : *table) {
    EXPECT_EQ(zone, row.zone);
    EXPECT_GE(row.year, 2020) << zone;
    EXPECT_NE(row.source.find("Electricity Maps"), std::string::npos) << zone;
    EXPECT_GT(row.g_per_kwh, 0.0) << zone;
    EXPECT_LT(row.g_per_kwh, 1200.0) << zone;
  }
}

TEST(OfflineIntensity, CountryValueWithSourceAndYear) {
  auto de = OfflineIntensity::create("de");  // zone keys are case-insensitive
  ASSERT_TRUE(de) << de.error().message;
  auto i = (*de)->intensity(at(2026, 1, 15, 10));
  ASSERT_TRUE(i);
  EXPECT_DOUBLE_EQ(i->g_per_kwh, 341.0);  // carbon/data: DE,2024,341,emaps-2024
  EXPECT_EQ(i->resolution, Resolution::kYearly);
  EXPECT_EQ(i->provider, "offline");
  EXPECT_EQ(i->zone, "DE");
  EXPECT_NE(i->source.find("(2024)"), std::string::npos) << i->source;
  EXPECT_NE(i->source.find("Electricity Maps"), std::string::npos) << i->source;
  // The same figure for any hour: a yearly average.
  EXPECT_DOUBLE_EQ((*de)->intensity(at(2025, 7, 1, 3))->g_per_kwh, 341.0);
}

TEST(OfflineIntensity, RegionWherePublishedElseItsCountry) {
  auto ciso = OfflineIntensity::create("US-CAL-CISO");
  ASSERT_TRUE(ciso);
  EXPECT_DOUBLE_EQ((*ciso)->row().g_per_kwh, 229.0);
  auto unknown_region = OfflineIntensity::create("US-NOWHERE");
  ASSERT_TRUE(unknown_region);
  EXPECT_EQ((*unknown_region)->zone(), "US");
  EXPECT_DOUBLE_EQ((*unknown_region)->row().g_per_kwh, 409.0);
}

TEST(OfflineIntensity, UnknownZoneIsAClearError) {
  auto r = OfflineIntensity::create("ZZ");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("'ZZ'"), std::string::npos);
}

TEST(YearlyTable, MalformedLinesNameTheLine) {
  auto undefined = parse_yearly_table("DE,2024,341,nowhere\n");
  ASSERT_FALSE(undefined);
  EXPECT_NE(undefined.error().message.find("line 1"), std::string::npos);
  EXPECT_NE(undefined.error().message.find("not defined"), std::string::npos);
  auto twice = parse_yearly_table("source,s,Somebody 2024\nDE,2024,341,s\n# c\nDE,2023,380,s\n");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("line 4"), std::string::npos);
  EXPECT_FALSE(parse_yearly_table("source,s,S\nDE,2024,-3,s\n"));
  EXPECT_FALSE(parse_yearly_table("source,s,S\nDE,20x4,300,s\n"));
  EXPECT_FALSE(parse_yearly_table("source,s,S\nDE,2024,300\n"));
}

TEST(FileIntensity, HourlySeriesWithEstimatedFlag) {
  auto f = FileIntensity::parse(
      "# my grid\n"
      "datetime,zone,carbon_intensity,estimated\n"
      "2026-01-15T10:00:00Z,DE,400,false\n"
      "2026-01-15T11:00:00.000Z,DE,200.5,true\n",
      "my.csv");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ((*f)->zone(), "DE");
  auto a = (*f)->intensity(at(2026, 1, 15, 10));
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->g_per_kwh, 400.0);
  EXPECT_FALSE(a->estimated);
  EXPECT_EQ(a->resolution, Resolution::kHourly);
  EXPECT_EQ(a->source, "my.csv");
  auto b = (*f)->intensity(at(2026, 1, 15, 11));
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(b->g_per_kwh, 200.5);
  EXPECT_TRUE(b->estimated);
  auto missing = (*f)->intensity(at(2026, 1, 15, 12));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("2026-01-15T12:00:00Z"), std::string::npos);
}

TEST(FileIntensity, BadFilesAreClearErrors) {
  auto no_column = FileIntensity::parse("time,value\n2026-01-15T10:00:00Z,3\n", "x");
  ASSERT_FALSE(no_column);
  EXPECT_NE(no_column.error().message.find("carbon_intensity"), std::string::npos);
  auto bad_time = FileIntensity::parse("datetime,carbon_intensity\n15/01/2026 10:00,3\n", "x");
  ASSERT_FALSE(bad_time);
  EXPECT_NE(bad_time.error().message.find("line 2"), std::string::npos);
  EXPECT_FALSE(FileIntensity::parse("datetime,carbon_intensity\n2026-01-15T10:00:00Z,-1\n", "x"));
  EXPECT_FALSE(
      FileIntensity::parse("datetime,carbon_intensity\n2026-01-15T10:00:00Z,1\n2026-01-15T10:30:00Z,2\n", "x"));
  EXPECT_FALSE(FileIntensity::parse("", "x"));
  auto missing = FileIntensity::open("/nonexistent/erg-intensity.csv");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
}

TEST(ParseUtc, ProviderFormats) {
  const auto want = at(2026, 1, 15, 10) + minutes(5);
  EXPECT_EQ(*parse_utc("2026-01-15T10:05:00Z"), want);
  EXPECT_EQ(*parse_utc("2026-01-15T10:05:00.000Z"), want);
  EXPECT_EQ(*parse_utc("2026-01-15T10:05Z"), want);
  EXPECT_EQ(*parse_utc("2026-01-15T10:05:00+00:00"), want);
  EXPECT_FALSE(parse_utc("2026-01-15T10:05:00+02:00"));
  EXPECT_FALSE(parse_utc("2026-02-30T10:05:00Z"));
  EXPECT_FALSE(parse_utc("yesterday"));
  EXPECT_EQ(format_utc(want), "2026-01-15T10:05:00Z");
}

}  // namespace
}  // namespace erg::carbon

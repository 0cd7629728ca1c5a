#include "erg/protocol/routes.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace erg::protocol {
namespace {

TEST(Routes, EveryZeusdRouteWithGroup) {
  EXPECT_EQ(all_routes().size(), 21u);
  std::set<std::string> paths;
  for (const auto& r : all_routes()) {
    paths.insert(std::string(r.path));
    EXPECT_EQ(&route_info(r.route), &r);
    EXPECT_EQ(find_route(r.path), &r);
    if (r.path.rfind("/gpu/set_", 0) == 0 || r.path.rfind("/gpu/reset_", 0) == 0) {
      EXPECT_EQ(r.group, ApiGroup::kGpuControl) << r.path;
      EXPECT_EQ(r.method, "POST");
    } else if (r.path.rfind("/gpu/", 0) == 0) {
      EXPECT_EQ(r.group, ApiGroup::kGpuRead) << r.path;
    } else if (r.path.rfind("/cpu/", 0) == 0) {
      EXPECT_EQ(r.group, ApiGroup::kCpuRead) << r.path;
    } else if (r.path == "/attribution") {  // per-process GPU energy: read like the GPU's own figures
      EXPECT_EQ(r.group, ApiGroup::kGpuRead) << r.path;
      EXPECT_EQ(r.method, "GET");
    } else if (false) {
      EXPECT_EQ(r.group, ApiGroup::kCpuRead) << r.path;
    } else {
      EXPECT_FALSE(r.group) << r.path;
    }
  }
  EXPECT_EQ(paths.size(), 21u);
  EXPECT_EQ(find_route("/gpu/nope"), nullptr);
}

TEST(Routes, GroupNames) {
  for (ApiGroup g : kAllApiGroups) EXPECT_EQ(*parse_api_group(to_string(g)), g);
  EXPECT_FALSE(parse_api_group("gpu-write"));
}

}  // namespace
}  // namespace erg::protocol

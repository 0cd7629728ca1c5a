#include "erg/optimizers/zeus_sim/trace.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace erg::zeus_sim {
namespace {

const std::filesystem::path kData = std::filesystem::path(ERG_SOURCE_DIR) / "optimizers/zeus_sim/data";

TEST(Trace, ParsesTrainRows) {
  auto rows = parse_train_trace(
      "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\r\n"
      "cifar100,shufflenetv2,1024,adadelta,1e-1,3,0.6,71\r\n"
      "imagenet,resnet50,64,adadelta,1e-1,2,0.65,nan");
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  const TrainRow& a = (*rows)[0];
  EXPECT_EQ(a.dataset, "cifar100");
  EXPECT_EQ(a.network, "shufflenetv2");
  EXPECT_EQ(a.optimizer, "adadelta");
  EXPECT_EQ(a.batch_size, 1024);
  EXPECT_EQ(a.learning_rate, "1e-1");
  EXPECT_EQ(a.run, 3);
  EXPECT_DOUBLE_EQ(a.target_metric, 0.6);
  EXPECT_EQ(a.target_epoch, 71);
  EXPECT_FALSE((*rows)[1].target_epoch.has_value());
}

TEST(Trace, ParsesPowerRows) {
  auto rows = parse_power_trace(
      "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
      "cifar100,shufflenetv2,1024,adadelta,125,16.85,118.98703190840182\n");
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].power_limit, Watts(125));
  EXPECT_DOUBLE_EQ((*rows)[0].time_per_epoch.count(), 16.85);
  EXPECT_DOUBLE_EQ((*rows)[0].average_power.value(), 118.98703190840182);
}

TEST(Trace, MalformedTextNamesLineAndColumn) {
  const char* header = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";
  struct Case {
    std::string text;
    const char* says;
  } cases[] = {
      {"", "empty"},
      {"a,b,c\n", "line 1: expected the header"},
      {std::string(header) + "c,s,x,a,125,1,1\n", "line 2: bad batch_size 'x'"},
      {std::string(header) + "c,s,8,a,125,1\n", "line 2: expected 7 fields, got 6"},
      {std::string(header) + "c,s,8,a,125,1,1\nc,s,8,a,125,-1,1\n", "line 3: bad time_per_epoch '-1'"},
      {std::string(header) + "c,s,8,a,125,1,nan\n", "bad average_power 'nan'"},
  };
  for (const auto& c : cases) {
    auto r = parse_power_trace(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  auto t = parse_train_trace(
      "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\nc,s,8,a,1,1,0.5,2.5\n");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("bad target_epoch '2.5'"), std::string::npos);
}

TEST(Trace, RepositoryDataLoadsWithTheDocumentedRowCounts) {
  auto t = load_traces(kData);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->train.size(), 3759u);
  ASSERT_EQ(t->power.size(), 4u);
  EXPECT_EQ(t->power.at("a40").size(), 453u);
  EXPECT_EQ(t->power.at("p100").size(), 270u);
  EXPECT_EQ(t->power.at("rtx6000").size(), 410u);
  EXPECT_EQ(t->power.at("v100").size(), 476u);
}

TEST(Trace, DefaultDirectoryIsTheRepositoryData) {
  auto d = find_trace_dir();
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_TRUE(std::filesystem::equivalent(*d, kData));
  ASSERT_EQ(default_trace_dirs().size(), 2u);
  EXPECT_NE(default_trace_dirs()[1].string().find("erg/zeus-traces"), std::string::npos);
}

TEST(Trace, BadDirectoriesAreClearErrors) {
  auto missing = load_traces("/nonexistent/zeus-traces");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("/nonexistent/zeus-traces does not exist"), std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() / ("erg-zeus-trace-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto no_train = load_traces(dir);
  ASSERT_FALSE(no_train);
  EXPECT_NE(no_train.error().message.find("summary_train.csv: no such file"), std::string::npos);

  std::filesystem::copy_file(kData / "summary_train.csv", dir / "summary_train.csv");
  auto no_power = load_traces(dir);
  ASSERT_FALSE(no_power);
  EXPECT_NE(no_power.error().message.find("no summary_power_<gpu>.csv"), std::string::npos);

  std::ofstream(dir / "summary_power_v100.csv") << "not,a,trace\n";
  auto bad = load_traces(dir);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("summary_power_v100.csv: line 1"), std::string::npos) << bad.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace erg::zeus_sim

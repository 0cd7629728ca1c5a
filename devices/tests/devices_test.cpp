// erg::devices::open_devices: the documented precedence of --simulate, ERG_SIMULATE, an inherited
// ERG_SIM_STATE and the ergd variables, index checks and CUDA_VISIBLE_DEVICES, over the simulated
// machine (the real NVML backend on the simulated driver).

#include "erg/devices/devices.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "erg/sim/machine.hpp"

namespace erg::devices {
namespace {

std::string getenv_str(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

class OpenDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* k : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "ERG_DAEMON_SOCK",
                          "ZEUSD_SOCK_PATH", "ERG_DAEMON_HOST_PORT", "ZEUSD_HOST_PORT", "CUDA_VISIBLE_DEVICES"})
      ::unsetenv(k);
  }
  void TearDown() override { SetUp(); }

  static DeviceOptions simulate(const std::string& spec) {
    DeviceOptions o;
    o.simulate = spec;
    return o;
  }
};

TEST_F(OpenDevices, SimulateCreatesAMachineAndExportsItForChildren) {
  auto d = open_devices(simulate("2xA100,cpus=1"));
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->source, Source::kSimulatedNew);
  ASSERT_NE(d->machine, nullptr);
  EXPECT_TRUE(d->inventory.simulated);
  ASSERT_EQ(d->inventory.gpus.size(), 2u);
  EXPECT_NE(d->inventory.gpus[0]->name().find("A100"), std::string::npos) << d->inventory.gpus[0]->name();
  EXPECT_EQ(d->inventory.cpus.size(), 1u);
  EXPECT_EQ(getenv_str("ERG_SIMULATE"), "2xA100,cpus=1");
  EXPECT_EQ(getenv_str("ERG_SIM_STATE"), d->state_file);
  EXPECT_EQ(d->spec, "2xA100,cpus=1");
  EXPECT_EQ(d->gpu_indices, (std::vector<unsigned>{0, 1}));
}

TEST_F(OpenDevices, AnEmptySimulateIsAnErrorNotTheHardware) {
  auto d = open_devices(simulate(""));
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(d.error().message.find("--simulate"), std::string::npos) << d.error().message;
}

TEST_F(OpenDevices, AMalformedSpecIsNamedWithWhereItCameFrom) {
  auto d = open_devices(simulate("3xZ900"));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("--simulate spec '3xZ900'"), std::string::npos) << d.error().message;
  ::setenv("ERG_SIMULATE", "2xQ", 1);
  auto e = open_devices();
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("ERG_SIMULATE spec '2xQ'"), std::string::npos) << e.error().message;
}

TEST_F(OpenDevices, ErgSimulateAppliesWhenNoOptionIsGivenAndEmptyMeansUnset) {
  ::setenv("ERG_SIMULATE", "1xH100", 1);
  auto d = open_devices();
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_EQ(d->inventory.gpus.size(), 1u);
  EXPECT_NE(d->inventory.gpus[0]->name().find("H100"), std::string::npos);
  EXPECT_EQ(d->source, Source::kSimulatedNew);

  SetUp();
  ::setenv("ERG_SIMULATE", "", 1);
  auto hw = open_devices();
  ASSERT_TRUE(hw) << hw.error().message;
  EXPECT_EQ(hw->machine, nullptr);
  EXPECT_FALSE(hw->inventory.simulated);
  EXPECT_EQ(hw->source, Source::kHardware);
}

TEST_F(OpenDevices, TheOptionWinsOverTheEnvironment) {
  ::setenv("ERG_SIMULATE", "1xH100", 1);
  auto d = open_devices(simulate("2xV100"));
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_EQ(d->inventory.gpus.size(), 2u);
  EXPECT_NE(d->inventory.gpus[0]->name().find("V100"), std::string::npos);
  EXPECT_EQ(getenv_str("ERG_SIMULATE"), "2xV100");  // children follow the machine in use
}

TEST_F(OpenDevices, AChildWithTheSameSpecSeesItsParentsMachine) {
  auto parent = open_devices(simulate("2xA100"));
  ASSERT_TRUE(parent) << parent.error().message;
  parent->machine->set_privilege(sim::Privilege::kEveryone);
  ASSERT_TRUE(parent->inventory.gpus[1]->set_power_limit(MilliWatts(150'000)));
  // A child inherits ERG_SIMULATE and ERG_SIM_STATE; --simulate with the same spec is the same.
  for (bool with_option : {false, true}) {
    auto child = with_option ? open_devices(simulate("2xA100")) : open_devices();
    ASSERT_TRUE(child) << child.error().message;
    EXPECT_EQ(child->source, Source::kSimulatedAttached);
    EXPECT_EQ(child->state_file, parent->state_file);
    ASSERT_EQ(child->inventory.gpus.size(), 2u);
    auto limit = child->inventory.gpus[1]->power_limit();
    ASSERT_TRUE(limit) << limit.error().message;
    EXPECT_EQ(limit->value(), 150'000.0);
    EXPECT_EQ(child->inventory.gpus[0]->uuid(), parent->inventory.gpus[0]->uuid());
  }
}

TEST_F(OpenDevices, ADifferentSpecInAChildGetsItsOwnMachineNotTheInheritedOne) {
  auto parent = open_devices(simulate("4xA100"));
  ASSERT_TRUE(parent) << parent.error().message;
  // NVML binds one machine per process, as the real library binds the real GPUs: a child is
  // another process. Here the parent's machine stays alive but its NVML handles go.
  parent->inventory = {};
  ::setenv("ERG_SIMULATE", "1xH100", 1);  // as `ERG_SIMULATE=1xH100 cmd` under the parent
  auto child = open_devices();
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(child->source, Source::kSimulatedNew);
  EXPECT_NE(child->state_file, parent->state_file);
  ASSERT_EQ(child->inventory.gpus.size(), 1u);
  EXPECT_NE(child->inventory.gpus[0]->name().find("H100"), std::string::npos) << child->inventory.gpus[0]->name();
  EXPECT_EQ(getenv_str("ERG_SIM_STATE"), child->state_file);
}

TEST_F(OpenDevices, AnInheritedStateAloneIsAttachedAndLabelledSimulated) {
  auto parent = open_devices(simulate("1xA40"));
  ASSERT_TRUE(parent) << parent.error().message;
  ::unsetenv("ERG_SIMULATE");
  auto child = open_devices();
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(child->source, Source::kSimulatedAttached);
  EXPECT_TRUE(child->inventory.simulated);
  ASSERT_EQ(child->inventory.gpus.size(), 1u);
  EXPECT_EQ(getenv_str("ERG_SIMULATE"), "1xA40");
}

TEST_F(OpenDevices, AStateThatCannotBeAttachedIsAnErrorAloneAndIgnoredBesideASpec) {
  ::setenv("ERG_SIM_STATE", "/nonexistent/erg-sim/state", 1);
  auto alone = open_devices();
  ASSERT_FALSE(alone);
  EXPECT_NE(alone.error().message.find("ERG_SIM_STATE=/nonexistent/erg-sim/state"), std::string::npos)
      << alone.error().message;
  auto with_spec = open_devices(simulate("1xA100"));
  ASSERT_TRUE(with_spec) << with_spec.error().message;
  EXPECT_EQ(with_spec->source, Source::kSimulatedNew);
  EXPECT_EQ(getenv_str("ERG_SIM_STATE"), with_spec->state_file);
}

TEST_F(OpenDevices, AMachineGoneInThisProcessIsReplacedByTheNextSpec) {
  // A benchmark or test that makes one machine after another: the first one's variables stay
  // in the environment after it is gone.
  std::string first_state;
  {
    auto first = open_devices(simulate("2xA100,cpus=0"));
    ASSERT_TRUE(first) << first.error().message;
    first_state = first->state_file;
  }
  auto second = open_devices(simulate("2xA100,cpus=2"));
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_NE(second->state_file, first_state);
  EXPECT_EQ(second->inventory.cpus.size(), 2u);
  EXPECT_EQ(second->inventory.gpus.size(), 2u);
}

TEST_F(OpenDevices, IndicesAreCheckedAgainstWhatWasFound) {
  auto o = simulate("2xA100,cpus=1");
  o.gpu_indices = std::vector<unsigned>{1};
  auto d = open_devices(o);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->gpu_indices, (std::vector<unsigned>{1}));
  EXPECT_EQ(d->cpu_indices, (std::vector<unsigned>{0}));

  o.gpu_indices = std::vector<unsigned>{0, 5};
  auto bad = open_devices(o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kNotFound);
  EXPECT_NE(bad.error().message.find("no GPU with index 5 (GPUs: 0-1)"), std::string::npos) << bad.error().message;

  o.gpu_indices = std::vector<unsigned>{1, 1};
  auto repeated = open_devices(o);
  ASSERT_FALSE(repeated);
  EXPECT_EQ(repeated.error().code, ErrorCode::kInvalidArgument);

  o.gpu_indices.reset();
  o.cpu_indices = std::vector<unsigned>{3};
  auto cpu = open_devices(o);
  ASSERT_FALSE(cpu);
  EXPECT_NE(cpu.error().message.find("no CPU with index 3 (CPUs: 0)"), std::string::npos) << cpu.error().message;
}

TEST_F(OpenDevices, CudaVisibleDevicesOrdersAndFiltersGpus) {
  auto all = open_devices(simulate("3xA100"));
  ASSERT_TRUE(all) << all.error().message;
  ::setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
  auto some = open_devices();
  ASSERT_TRUE(some) << some.error().message;
  ASSERT_EQ(some->inventory.gpus.size(), 2u);
  EXPECT_EQ(some->inventory.gpus[0]->uuid(), all->inventory.gpus[2]->uuid());
  EXPECT_EQ(some->inventory.gpus[1]->uuid(), all->inventory.gpus[0]->uuid());
  ::setenv("CUDA_VISIBLE_DEVICES", "7", 1);
  auto bad = open_devices();
  ASSERT_FALSE(bad);
}

TEST_F(OpenDevices, TheDaemonVariablesApplyUnlessTheCallerIsTheDaemon) {
  ::setenv("ERG_DAEMON_HOST_PORT", "not-a-port", 1);
  auto o = simulate("1xA100");
  auto d = open_devices(o);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("ERG_DAEMON_HOST_PORT"), std::string::npos) << d.error().message;
  // A failed open leaves no trace: no variable names the machine it created and dropped.
  EXPECT_EQ(std::getenv("ERG_SIM_STATE"), nullptr);
  EXPECT_EQ(std::getenv("ERG_SIMULATE"), nullptr);
  o.daemon = DaemonUse::kNever;
  auto ergd = open_devices(o);
  ASSERT_TRUE(ergd) << ergd.error().message;
  EXPECT_EQ(ergd->inventory.gpus.size(), 1u);
}

TEST_F(OpenDevices, OpenMachineFollowsTheSamePrecedence) {
  auto none = open_machine();
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, nullptr);
  auto m = open_machine(simulate("2xA100"));
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_NE(*m, nullptr);
  EXPECT_EQ((*m)->gpu_count(), 2u);
  auto again = open_machine();  // inherits: attaches
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->state_file(), (*m)->state_file());
  EXPECT_FALSE(open_machine(simulate("")));
}

}  // namespace
}  // namespace erg::devices

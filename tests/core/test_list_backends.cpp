// list_backends(): the public listing `quilt devices` prints, with a plugin that loads and one
// that does not.
#include <gtest/gtest.h>

#include "quilt/backend.h"
#include "quilt/quilt.hpp"

using namespace quilt;

TEST(ListBackends, CpuFirstThenPluginsWithTheirDevicesAndFailuresWithReasons) {
  const BackendList list = list_backends(
      {QUILT_EXAMPLE_PLUGIN_PATH, QUILT_BAD_ABI_PLUGIN_PATH, "/nonexistent/libquilt_nothing.so"});
  ASSERT_GE(list.backends.size(), 2u);
  const BackendInfo& cpu = list.backends[0];
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_EQ(cpu.library, "built-in");
  EXPECT_EQ(cpu.abi_version, "1.2");
  EXPECT_TRUE(cpu.error.empty()) << cpu.error;
  ASSERT_EQ(cpu.devices.size(), 1u);
  EXPECT_TRUE(cpu.devices[0].flags & QUILT_DEVICE_HOST_MEMORY);
  bool has_cores = false;
  for (const auto& [k, v] : cpu.devices[0].properties)
    has_cores |= k == "cores" && std::stoi(v) > 0;
  EXPECT_TRUE(has_cores);

  const BackendInfo* example = nullptr;
  for (const auto& b : list.backends)
    if (b.name == "example") example = &b;
  ASSERT_NE(example, nullptr);
  EXPECT_EQ(example->library, QUILT_EXAMPLE_PLUGIN_PATH);
  EXPECT_FALSE(example->devices.empty());
  EXPECT_GT(example->devices[0].memory_bytes, 0u);

  std::map<std::string, std::string> failures;
  for (const auto& f : list.failures) failures[f.library] = f.reason;
  EXPECT_NE(failures[QUILT_BAD_ABI_PLUGIN_PATH].find("ABI"), std::string::npos)
      << failures[QUILT_BAD_ABI_PLUGIN_PATH];
  EXPECT_EQ(failures["/nonexistent/libquilt_nothing.so"], "file not found");
}

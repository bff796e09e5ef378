// StatefulSetOrdinal and PodName (common/pod_name.h).
#include "common/pod_name.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(StatefulSetOrdinal, TakesTheOrdinalAtTheEnd) {
  EXPECT_EQ(*StatefulSetOrdinal("ferry-ps-0"), 0);
  EXPECT_EQ(*StatefulSetOrdinal("ferry-ps-2"), 2);
  EXPECT_EQ(*StatefulSetOrdinal("ps-17"), 17);
  EXPECT_EQ(*StatefulSetOrdinal("a-007"), 7);
}

TEST(StatefulSetOrdinal, RejectsNamesWithoutATrailingOrdinal) {
  for (const char* name : {"", "ferry-ps", "ferry-ps-", "ferry-ps2", "7", "-3",
                           "ferry-ps-x1", "ferry-ps-12345678"}) {
    auto id = StatefulSetOrdinal(name);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(id.status().message().find(std::string("'") + name + "'"),
              std::string::npos)
        << id.status();
  }
}

TEST(PodName, IsHostnameFromTheEnvironmentFirst) {
  const char* before = std::getenv("HOSTNAME");
  const std::string kept = before != nullptr ? before : "";
  setenv("HOSTNAME", "ferry-ps-3", 1);
  EXPECT_EQ(PodName(), "ferry-ps-3");
  unsetenv("HOSTNAME");
  EXPECT_FALSE(PodName().empty());  // gethostname()
  if (before != nullptr) setenv("HOSTNAME", kept.c_str(), 1);
}

}  // namespace
}  // namespace ferry

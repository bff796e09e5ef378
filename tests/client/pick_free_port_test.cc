// PickFreePort never hands out a port twice in one process: a launcher picks
// every port of a cluster before any child binds one.
#include <set>

#include "client/child_process.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(PickFreePortTest, PortsHandedOutAreNeverPickedAgain) {
  std::set<int> seen;
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<int> port = PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GT(*port, 0);
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " twice";
  }
}

}  // namespace
}  // namespace ferry

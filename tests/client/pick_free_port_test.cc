// PickFreePort never hands out a port twice in one process (a launcher picks
// every port of a cluster before any child binds one), and claims each port
// for the process, so that no other process picking ports gets it too.
// The port files children report bound ports in parse as they are written.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/child_process.h"
#include "common/ops_flags.h"
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

// Binds the claim another process would take for `port`; true when it
// could (nobody holds the claim).
bool CouldClaim(int port) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = absl::StrCat("ferry-port-", port);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const bool bound =
      bind(fd, reinterpret_cast<sockaddr*>(&addr),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                  name.size())) == 0;
  close(fd);
  return bound;
}

TEST(PickFreePortTest, APickedPortIsClaimedForTheProcess) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_FALSE(CouldClaim(*port));
}

TEST(PortFileTest, ServicePortsOnePerLine) {
  absl::StatusOr<std::vector<int>> ports = ParsePortFile("4567\n4568\n");
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(*ports, (std::vector<int>{4567, 4568}));
  EXPECT_FALSE(ParsePortFile("").ok());
  EXPECT_FALSE(ParsePortFile("0\n").ok());
  EXPECT_FALSE(ParsePortFile("port\n").ok());
}

TEST(PortFileTest, OpsPortsRoundTrip) {
  absl::StatusOr<OpsPorts> ports =
      ParseOpsPortFile(FormatOpsPortFile({.health = 4000, .metrics = 0}));
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(ports->health, 4000);
  EXPECT_EQ(ports->metrics, 0);
  EXPECT_FALSE(ParseOpsPortFile("health 1\n").ok());
  EXPECT_FALSE(ParseOpsPortFile("health x\nmetrics 2\n").ok());
}

}  // namespace
}  // namespace ferry

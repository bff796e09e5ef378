// One ferry local per log directory: a second lock on the directory is
// refused, naming the holder's pid, until the first is released.
#include "client/log_dir_lock.h"

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(LogDirLockTest, ASecondRunOnTheDirectoryIsRefusedUntilTheFirstEnds) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/log-dir-lock-", getpid());
  std::filesystem::create_directories(dir);
  std::optional<LogDirLock> first;
  {
    absl::StatusOr<LogDirLock> locked = LogDirLock::Acquire(dir);
    ASSERT_TRUE(locked.ok()) << locked.status();
    first.emplace(*std::move(locked));
  }
  absl::StatusOr<LogDirLock> second = LogDirLock::Acquire(dir);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("pid ", getpid())));
  EXPECT_THAT(second.status().message(), HasSubstr(dir));
  first.reset();  // the run ends
  EXPECT_TRUE(LogDirLock::Acquire(dir).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ferry

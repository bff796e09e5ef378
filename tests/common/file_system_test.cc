// AtomicFile (common/file_system.h): a file written in pieces replaces its
// path only on Commit; without one, nothing changes and no temp file stays.
#include "common/file_system.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

class PosixAtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ferry-fs-XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  FileSystem* fs_ = PosixFileSystem();
  std::string dir_;
};

TEST_F(PosixAtomicFileTest, PiecesReplaceThePathOnCommit) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(fs_->WriteFileAtomically(path, "old").ok());
  auto file = fs_->NewAtomicFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  // Small pieces (buffered) and one larger than the 1 MiB buffer.
  const std::string big(3 << 20, 'b');
  ASSERT_TRUE((*file)->Append("a").ok());
  ASSERT_TRUE((*file)->Append(big).ok());
  ASSERT_TRUE((*file)->Append("c").ok());
  EXPECT_EQ(*fs_->ReadFile(path), "old");  // not before the commit
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(*fs_->ReadFile(path), "a" + big + "c");
  EXPECT_EQ((*file)->Commit().code(), absl::StatusCode::kFailedPrecondition);
  file->reset();
  EXPECT_THAT(*fs_->ListDirectory(dir_), ElementsAre("f"));
}

TEST_F(PosixAtomicFileTest, WithoutCommitNothingChanges) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(fs_->WriteFileAtomically(path, "old").ok());
  {
    auto file = fs_->NewAtomicFile(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append(std::string(2 << 20, 'x')).ok());
    EXPECT_THAT(*fs_->ListDirectory(dir_), ElementsAre("f", "f.tmp"));
  }
  EXPECT_EQ(*fs_->ReadFile(path), "old");
  EXPECT_THAT(*fs_->ListDirectory(dir_), ElementsAre("f"));
  EXPECT_EQ(fs_->NewAtomicFile(dir_ + "/missing/f").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(InMemoryAtomicFileTest, FailuresHalfwayLeaveTheOldFile) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(fs.WriteFileAtomically("/d/f", "old").ok());
  fs.FailWritesAfter(5);
  auto file = fs.NewAtomicFile("/d/f");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE((*file)->Append("1234").ok());
  EXPECT_EQ((*file)->Append("56").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*file)->Append("").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*file)->Commit().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*fs.ReadFile("/d/f"), "old");
  EXPECT_EQ(fs.writes(), 1);
  fs.FailWritesAfter(-1);
  file = fs.NewAtomicFile("/d/f");
  ASSERT_TRUE((*file)->Append("new").ok());
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(*fs.ReadFile("/d/f"), "new");
  EXPECT_EQ(fs.writes(), 2);
  fs.FailWrites(absl::PermissionDeniedError("read-only"));
  EXPECT_EQ(fs.NewAtomicFile("/d/f").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ferry

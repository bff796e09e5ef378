// AtomicFile (common/file_system.h): a file written in pieces replaces its
// path only on Commit; without one, nothing changes and no temp file stays.
// MappedFile: a file read in place whose released pages leave the
// process's memory while its bytes stay readable.
#include "common/file_system.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
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

// NewAtomicFile, or NewScratchFile (the same without the fsyncs): both
// replace the path whole on Commit and leave nothing without it.
absl::StatusOr<std::unique_ptr<AtomicFile>> Open(FileSystem* fs,
                                                 const std::string& path,
                                                 bool scratch) {
  return scratch ? fs->NewScratchFile(path) : fs->NewAtomicFile(path);
}

TEST_F(PosixAtomicFileTest, PiecesReplaceThePathOnCommit) {
  for (const bool scratch : {false, true}) {
    SCOPED_TRACE(scratch ? "scratch" : "atomic");
    const std::string path = dir_ + "/f";
    ASSERT_TRUE(fs_->WriteFileAtomically(path, "old").ok());
    auto file = Open(fs_, path, scratch);
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
}

TEST_F(PosixAtomicFileTest, WithoutCommitNothingChanges) {
  for (const bool scratch : {false, true}) {
    SCOPED_TRACE(scratch ? "scratch" : "atomic");
    const std::string path = dir_ + "/f";
    ASSERT_TRUE(fs_->WriteFileAtomically(path, "old").ok());
    {
      auto file = Open(fs_, path, scratch);
      ASSERT_TRUE(file.ok());
      ASSERT_TRUE((*file)->Append(std::string(2 << 20, 'x')).ok());
      EXPECT_THAT(*fs_->ListDirectory(dir_), ElementsAre("f", "f.tmp"));
    }
    EXPECT_EQ(*fs_->ReadFile(path), "old");
    EXPECT_THAT(*fs_->ListDirectory(dir_), ElementsAre("f"));
    EXPECT_EQ(Open(fs_, dir_ + "/missing/f", scratch).status().code(),
              absl::StatusCode::kNotFound);
  }
}

// Resident pages of this process (/proc/self/statm), in bytes.
int64_t ResidentBytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? int64_t{resident} * ::sysconf(_SC_PAGESIZE) : -1;
}

TEST_F(PosixAtomicFileTest, MappedFileReadsInPlaceAndReleasedPagesLeaveMemory) {
  const std::string path = dir_ + "/big";
  std::string contents(64 << 20, '\0');
  for (size_t i = 0; i < contents.size(); ++i) {
    contents[i] = static_cast<char>(i * 2654435761u >> 24);
  }
  ASSERT_TRUE(fs_->WriteFileAtomically(path, contents).ok());
  absl::StatusOr<std::unique_ptr<MappedFile>> file = fs_->MapFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::string_view bytes = (*file)->bytes();
  ASSERT_EQ(bytes.size(), contents.size());
  const int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  EXPECT_TRUE(bytes == contents);  // reads every page
  const int64_t touched = ResidentBytes();
  // A part that starts and ends inside pages, then the rest.
  (*file)->Release(bytes.substr(100, (32 << 20) - 100));
  (*file)->Release(bytes.substr(32 << 20));
  const int64_t released = ResidentBytes();
  EXPECT_GT(touched - before, int64_t{48} << 20);
  EXPECT_LT(released - before, int64_t{8} << 20)
      << "before " << before << " touched " << touched;
  // The bytes are the file's still (read again from it).
  EXPECT_TRUE(bytes == contents);
  // Removing or replacing the file does not change the mapping.
  ASSERT_TRUE(fs_->WriteFileAtomically(path, "new").ok());
  EXPECT_TRUE(bytes.substr(0, 1000) ==
              absl::string_view(contents).substr(0, 1000));
}

TEST_F(PosixAtomicFileTest, ReleaseTouchesOnlyTheMapping) {
  // A file smaller than a page, its size not a multiple of one.
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/small", "0123456789").ok());
  absl::StatusOr<std::unique_ptr<MappedFile>> file =
      fs_->MapFile(dir_ + "/small");
  ASSERT_TRUE(file.ok()) << file.status();
  (*file)->Release((*file)->bytes().substr(3));
  (*file)->Release((*file)->bytes());
  EXPECT_EQ((*file)->bytes(), "0123456789");
  // Memory that is not the mapping's is never released (it would be zeroed).
  const std::string other(3 << 20, 'x');
  (*file)->Release(absl::string_view(other).substr(1 << 20, 100));
  (*file)->Release(other);
  EXPECT_EQ(other.find_first_not_of('x'), std::string::npos);
}

TEST_F(PosixAtomicFileTest, MappedFileOfEmptyAndMissingFiles) {
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/empty", "").ok());
  absl::StatusOr<std::unique_ptr<MappedFile>> empty =
      fs_->MapFile(dir_ + "/empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE((*empty)->bytes().empty());
  (*empty)->Release((*empty)->bytes());
  EXPECT_EQ(fs_->MapFile(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(InMemoryMappedFileTest, IsACopyOfTheFile) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(fs.WriteFileAtomically("d/f", "abc").ok());
  absl::StatusOr<std::unique_ptr<MappedFile>> file = fs.MapFile("d/f");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(fs.WriteFileAtomically("d/f", "xyz").ok());
  (*file)->Release((*file)->bytes());
  EXPECT_EQ((*file)->bytes(), "abc");
  EXPECT_EQ(fs.MapFile("d/missing").status().code(),
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

TEST_F(PosixAtomicFileTest, SyncFileMakesAReplacedFileDurable) {
  const std::string path = dir_ + "/state";
  EXPECT_EQ(fs_->SyncFile(path).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(fs_->ReplaceFile(path, "v1").ok());
  EXPECT_TRUE(fs_->SyncFile(path).ok());
  EXPECT_EQ(*fs_->ReadFile(path), "v1");  // unchanged by the sync
}

// A rewritable file keeps its inode: each Rewrite is the whole contents,
// longer or shorter, and Sync flushes them.
TEST_F(PosixAtomicFileTest, RewritableFileIsRewrittenWholeInPlace) {
  const std::string path = dir_ + "/slot";
  auto file = fs_->OpenRewritable(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*fs_->ReadFile(path), "");  // created at open
  const auto inode = [&path] {
    return std::filesystem::status(path).type() ==
                   std::filesystem::file_type::regular
               ? std::filesystem::hard_link_count(path)
               : 0;
  };
  ASSERT_TRUE((*file)->Rewrite("a longer first state").ok());
  EXPECT_EQ(*fs_->ReadFile(path), "a longer first state");
  ASSERT_TRUE((*file)->Rewrite("short").ok());
  EXPECT_EQ(*fs_->ReadFile(path), "short");
  ASSERT_TRUE((*file)->Rewrite("longer again!").ok());
  EXPECT_TRUE((*file)->Sync().ok());
  EXPECT_EQ(*fs_->ReadFile(path), "longer again!");
  EXPECT_EQ(inode(), 1u);
  EXPECT_THAT(*fs_->ListDirectory(dir_), ElementsAre("slot"));  // no temp
  // An existing file opened again: a shorter rewrite still truncates.
  auto again = fs_->OpenRewritable(path);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Rewrite("x").ok());
  EXPECT_EQ(*fs_->ReadFile(path), "x");
  EXPECT_EQ(fs_->OpenRewritable(dir_ + "/missing/slot").status().code(),
            absl::StatusCode::kNotFound);
}

// ReplaceFile is atomic but not durable: what a machine crash leaves is the
// last WriteFileAtomically or SyncFile of the path.
TEST(InMemoryFileSystemTest, AMachineCrashKeepsWhatWasSynced) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(fs.WriteFileAtomically("/d/a", "a1").ok());  // durable
  ASSERT_TRUE(fs.ReplaceFile("/d/a", "a2").ok());          // not yet
  ASSERT_TRUE(fs.ReplaceFile("/d/b", "b1").ok());          // never synced
  ASSERT_TRUE(fs.ReplaceFile("/d/c", "c1").ok());
  ASSERT_TRUE(fs.SyncFile("/d/c").ok());
  ASSERT_TRUE(fs.ReplaceFile("/d/c", "c2").ok());
  EXPECT_EQ(fs.syncs(), 1);
  EXPECT_EQ(fs.SyncFile("/d/none").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*fs.ReadFile("/d/a"), "a2");  // readers see the newest
  const std::unique_ptr<InMemoryFileSystem> crashed = fs.AfterMachineCrash();
  EXPECT_EQ(*crashed->ReadFile("/d/a"), "a1");
  EXPECT_EQ(crashed->ReadFile("/d/b").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*crashed->ReadFile("/d/c"), "c1");
  ASSERT_TRUE(fs.SyncFile("/d/a").ok());
  EXPECT_EQ(*fs.AfterMachineCrash()->ReadFile("/d/a"), "a2");
}

}  // namespace
}  // namespace ferry

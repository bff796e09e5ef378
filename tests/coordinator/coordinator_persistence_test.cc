#include "coordinator/coordinator_persistence.h"

#include "common/file_system.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::CoordinatorState State(int64_t generation) {
  v1::CoordinatorState s;
  s.set_format(CoordinatorPersistence::kFormat);
  s.set_generation(generation);
  s.mutable_job()->set_job_id("job");
  return s;
}

TEST(CoordinatorPersistenceTest, OffWithoutADirectory) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "");
  EXPECT_FALSE(p.enabled());
  auto loaded = p.Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_TRUE(p.Save(State(1)).ok());
  EXPECT_EQ(fs.writes(), 0);
}

TEST(CoordinatorPersistenceTest, FreshDirectoryHasNoStateThenRoundTrips) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  auto fresh = p.Load();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->has_value());
  ASSERT_TRUE(p.Save(State(7)).ok());
  ASSERT_TRUE(p.Save(State(8)).ok());  // replaces
  EXPECT_EQ(p.path(), "state/coordinator.state");
  auto loaded = CoordinatorPersistence(&fs, "state").Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->generation(), 8);
  EXPECT_EQ((*loaded)->job().job_id(), "job");
}

TEST(CoordinatorPersistenceTest, CorruptFileIsDataLoss) {
  InMemoryFileSystem fs;
  fs.SetFileContents("state/coordinator.state", "\xff\xff not a proto");
  auto loaded = CoordinatorPersistence(&fs, "state").Load();
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
}

TEST(CoordinatorPersistenceTest, OtherFormatIsFailedPrecondition) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  v1::CoordinatorState s = State(1);
  s.set_format(CoordinatorPersistence::kFormat + 1);
  ASSERT_TRUE(fs.WriteFileAtomically(p.path(), s.SerializeAsString()).ok());
  EXPECT_EQ(p.Load().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CoordinatorPersistenceTest, WriteFailuresAreReturned) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  fs.FailWrites(absl::ResourceExhaustedError("disk full"));
  EXPECT_EQ(p.Save(State(1)).code(), absl::StatusCode::kResourceExhausted);
  fs.FailWrites(absl::OkStatus());
  EXPECT_TRUE(p.Save(State(1)).ok());
}

}  // namespace
}  // namespace ferry

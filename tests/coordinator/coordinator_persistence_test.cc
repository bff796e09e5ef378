// CoordinatorPersistence: the state in three slot files rewritten in place,
// the newest whole record loaded; a torn slot, a killed process and a
// machine crash each leave a whole state; an earlier build's single file is
// read and then replaced.
#include "coordinator/coordinator_persistence.h"

#include <set>
#include <string>

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

// The generation of the state a fresh persistence loads from `fs`; -1:
// none; -2: an error.
int64_t LoadedGeneration(FileSystem* fs) {
  auto loaded = CoordinatorPersistence(fs, "state").Load();
  if (!loaded.ok()) return -2;
  return loaded->has_value() ? (*loaded)->generation() : -1;
}

TEST(CoordinatorPersistenceTest, OffWithoutADirectory) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "");
  EXPECT_FALSE(p.enabled());
  auto loaded = p.Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_TRUE(p.Save(State(1)).ok());
  EXPECT_TRUE(p.Sync().ok());
  EXPECT_EQ(fs.writes(), 0);
}

TEST(CoordinatorPersistenceTest, FreshDirectoryHasNoStateThenRoundTrips) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  auto fresh = p.Load();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->has_value());
  EXPECT_TRUE(p.Sync().ok());  // nothing saved yet
  ASSERT_TRUE(p.Save(State(7)).ok());
  ASSERT_TRUE(p.Save(State(8)).ok());  // the newer record
  EXPECT_EQ(p.path(), "state/coordinator.state");
  EXPECT_EQ(p.SlotPath(2), "state/coordinator.state.2");
  auto loaded = CoordinatorPersistence(&fs, "state").Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->generation(), 8);
  EXPECT_EQ((*loaded)->job().job_id(), "job");
}

// Saves alternate between the two slots that do not hold the last synced
// record, which stays as it was until the next sync.
TEST(CoordinatorPersistenceTest, TheSyncedSlotIsNotRewrittenUntilTheNextSync) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  ASSERT_TRUE(p.Load().ok());
  ASSERT_TRUE(p.Save(State(1)).ok());
  ASSERT_TRUE(p.Sync().ok());
  std::string synced;
  int synced_slot = -1;
  for (int slot = 0; slot < CoordinatorPersistence::kSlots; ++slot) {
    if (auto bytes = fs.ReadFile(p.SlotPath(slot)); bytes.ok()) {
      synced = *bytes;
      synced_slot = slot;
    }
  }
  ASSERT_GE(synced_slot, 0);
  for (int generation = 2; generation <= 6; ++generation) {
    ASSERT_TRUE(p.Save(State(generation)).ok());
    EXPECT_EQ(*fs.ReadFile(p.SlotPath(synced_slot)), synced) << generation;
  }
  EXPECT_EQ(LoadedGeneration(&fs), 6);
  ASSERT_TRUE(p.Sync().ok());
  ASSERT_TRUE(p.Save(State(7)).ok());
  EXPECT_NE(*fs.ReadFile(p.SlotPath(synced_slot)), synced);  // free again
  EXPECT_EQ(LoadedGeneration(&fs), 7);
}

// A process killed while it rewrites a slot: the record saved before is
// whole, in the other slot.
TEST(CoordinatorPersistenceTest, ATornNewestSlotLoadsTheRecordBeforeIt) {
  for (const char* torn : {"", "FERRYCS1 cut", "\xff\xff garbage"}) {
    InMemoryFileSystem fs;
    CoordinatorPersistence p(&fs, "state");
    ASSERT_TRUE(p.Load().ok());
    for (int generation = 1; generation <= 3; ++generation) {
      ASSERT_TRUE(p.Save(State(generation)).ok());
    }
    // Generation 3 went to the slot that 1 did (0, 1, 0).
    std::string bytes = *fs.ReadFile(p.SlotPath(0));
    fs.SetFileContents(p.SlotPath(0),
                       *torn ? std::string(torn) : bytes.substr(0, 30));
    EXPECT_EQ(LoadedGeneration(&fs), 2) << torn;
    // A flipped bit in the state is caught by the checksum too.
    bytes.back() ^= 1;
    fs.SetFileContents(p.SlotPath(0), bytes);
    EXPECT_EQ(LoadedGeneration(&fs), 2);
  }
}

// A machine crash keeps what the last Sync made durable (the fake's model:
// a rewrite is durable once synced).
TEST(CoordinatorPersistenceTest, AMachineCrashKeepsTheLastSyncedState) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  ASSERT_TRUE(p.Load().ok());
  ASSERT_TRUE(p.Save(State(1)).ok());
  ASSERT_TRUE(p.Save(State(2)).ok());
  ASSERT_TRUE(p.Sync().ok());
  for (int generation = 3; generation <= 5; ++generation) {
    ASSERT_TRUE(p.Save(State(generation)).ok());
  }
  EXPECT_EQ(LoadedGeneration(fs.AfterMachineCrash().get()), 2);
  EXPECT_EQ(LoadedGeneration(&fs), 5);
}

// A restarted coordinator goes on from the state it loaded: later records
// are newer, and the loaded one stays whole until one of them is synced.
TEST(CoordinatorPersistenceTest, AResumedRunKeepsTheLoadedRecordWhole) {
  InMemoryFileSystem fs;
  {
    CoordinatorPersistence p(&fs, "state");
    ASSERT_TRUE(p.Load().ok());
    for (int generation = 1; generation <= 4; ++generation) {
      ASSERT_TRUE(p.Save(State(generation)).ok());
    }
  }
  CoordinatorPersistence resumed(&fs, "state");
  auto loaded = resumed.Load();
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->generation(), 4);
  for (int generation = 5; generation <= 7; ++generation) {
    ASSERT_TRUE(resumed.Save(State(generation)).ok());
    EXPECT_EQ(LoadedGeneration(&fs), generation);
  }
  // The slots hold the loaded record (not rewritten: nothing was synced
  // since) and the two newest: each alone is what a load finds.
  std::set<int64_t> held;
  std::string bytes[CoordinatorPersistence::kSlots];
  for (int slot = 0; slot < CoordinatorPersistence::kSlots; ++slot) {
    bytes[slot] = *fs.ReadFile(resumed.SlotPath(slot));
  }
  for (int intact = 0; intact < CoordinatorPersistence::kSlots; ++intact) {
    for (int slot = 0; slot < CoordinatorPersistence::kSlots; ++slot) {
      fs.SetFileContents(resumed.SlotPath(slot),
                         slot == intact ? bytes[slot] : "torn");
    }
    held.insert(LoadedGeneration(&fs));
  }
  EXPECT_EQ(held, (std::set<int64_t>{4, 6, 7}));
}

TEST(CoordinatorPersistenceTest, AnEarlierBuildsFileIsReadThenReplaced) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  ASSERT_TRUE(
      fs.WriteFileAtomically(p.path(), State(5).SerializeAsString()).ok());
  auto loaded = p.Load();
  ASSERT_TRUE(loaded.ok() && loaded->has_value()) << loaded.status();
  EXPECT_EQ((*loaded)->generation(), 5);
  ASSERT_TRUE(p.Save(State(6)).ok());
  EXPECT_EQ(LoadedGeneration(&fs), 6);  // the slots win
  ASSERT_TRUE(p.Sync().ok());
  EXPECT_EQ(fs.ReadFile(p.path()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadedGeneration(&fs), 6);
}

TEST(CoordinatorPersistenceTest, NoWholeStateIsDataLoss) {
  InMemoryFileSystem fs;
  fs.SetFileContents("state/coordinator.state", "\xff\xff not a proto");
  EXPECT_EQ(CoordinatorPersistence(&fs, "state").Load().status().code(),
            absl::StatusCode::kDataLoss);
  InMemoryFileSystem torn;
  torn.SetFileContents("state/coordinator.state.1", "FERRYCS1 torn");
  EXPECT_EQ(CoordinatorPersistence(&torn, "state").Load().status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(CoordinatorPersistenceTest, OtherFormatIsFailedPrecondition) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  v1::CoordinatorState s = State(1);
  s.set_format(CoordinatorPersistence::kFormat + 1);
  ASSERT_TRUE(fs.WriteFileAtomically(p.path(), s.SerializeAsString()).ok());
  EXPECT_EQ(p.Load().status().code(), absl::StatusCode::kFailedPrecondition);
  InMemoryFileSystem slots;
  CoordinatorPersistence writer(&slots, "state");
  ASSERT_TRUE(writer.Load().ok());
  ASSERT_TRUE(writer.Save(s).ok());
  EXPECT_EQ(CoordinatorPersistence(&slots, "state").Load().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CoordinatorPersistenceTest, WriteFailuresAreReturnedAndLoseNothing) {
  InMemoryFileSystem fs;
  CoordinatorPersistence p(&fs, "state");
  ASSERT_TRUE(p.Load().ok());
  ASSERT_TRUE(p.Save(State(1)).ok());
  fs.FailWrites(absl::ResourceExhaustedError("disk full"));
  EXPECT_EQ(p.Save(State(2)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(LoadedGeneration(&fs), 1);
  fs.FailWrites(absl::OkStatus());
  EXPECT_TRUE(p.Save(State(3)).ok());
  EXPECT_EQ(LoadedGeneration(&fs), 3);
}

}  // namespace
}  // namespace ferry

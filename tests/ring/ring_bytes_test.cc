#include "ring/ring_bytes.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/in_memory_ring.h"
#include "tests/ring/ring_test_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

// A payload of `size` bytes that differs by rank and position.
std::string PayloadOf(int rank, int size) {
  std::string s(size, '\0');
  for (int i = 0; i < size; ++i) s[i] = static_cast<char>(rank * 31 + i * 7);
  return s;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

TEST(RingBytes, AllGatherGivesEveryRankEveryPayloadInRankOrder) {
  for (int n : {1, 2, 3, 5}) {
    InMemoryRingHub hub(n);
    // Sizes around the piece size (4): empty, one partial piece, exact
    // pieces and more.
    const std::vector<int> sizes = {0, 3, 8, 13, 4};
    std::vector<std::vector<std::string>> got(n);
    const auto statuses = testing::RunOnAllRanks(n, [&](int r) {
      auto out = AllGatherBytes(*hub.transport(r), 7, PayloadOf(r, sizes[r]),
                                /*piece_bytes=*/4, Soon());
      if (!out.ok()) return out.status();
      got[r] = *out;
      return absl::OkStatus();
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[r].ok())
          << n << " ranks, rank " << r << ": " << statuses[r];
      ASSERT_EQ(got[r].size(), static_cast<size_t>(n));
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(got[r][k], PayloadOf(k, sizes[k]))
            << n << " ranks: rank " << r << "'s copy of rank " << k;
      }
    }
    // Each rank sent every payload but that of its next rank once, plus
    // an 8-byte header per payload sent.
    if (n > 1) {
      int64_t all = 0;
      for (int k = 0; k < n; ++k) all += sizes[k];
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(hub.bytes_sent(r), all - sizes[(r + 1) % n] + 8 * (n - 1))
            << n << " ranks, rank " << r;
      }
    }
  }
}

TEST(RingBytes, BroadcastCopiesRootsPayloadToEveryRank) {
  for (int root : {0, 2}) {
    InMemoryRingHub hub(4);
    std::vector<std::string> payloads(4, "stale");
    payloads[root] = PayloadOf(root, 1001);
    const auto statuses = testing::RunOnAllRanks(4, [&](int r) {
      return BroadcastBytes(*hub.transport(r), 3, payloads[r], root,
                            /*piece_bytes=*/100, Soon());
    });
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      EXPECT_EQ(payloads[r], PayloadOf(root, 1001)) << "rank " << r;
    }
  }
}

TEST(RingBytes, RefusesBadArgumentsAndTimesOut) {
  InMemoryRingHub hub(2);
  std::string payload = "x";
  EXPECT_EQ(BroadcastBytes(*hub.transport(0), 1, payload, 2, 4, Soon()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      AllGatherBytes(*hub.transport(0), 1, "x", 0, Soon()).status().code(),
      absl::StatusCode::kInvalidArgument);
  // Rank 1 never takes part: rank 0 waits until its deadline, no longer.
  const absl::Time start = absl::Now();
  auto out = AllGatherBytes(*hub.transport(0), 2, "x", 4,
                            absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(out.status().message(), HasSubstr("AllGatherBytes op 2"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(RingBytes, AMalformedHeaderOrPieceIsDataLoss) {
  InMemoryRingHub hub(2);
  // Rank 0 sends a 5-byte header, then a good header with a short piece.
  ASSERT_TRUE(hub.transport(0)->SendBytes(RingTag{1, 0, 0}, "12345").ok());
  std::string payload;
  EXPECT_EQ(BroadcastBytes(*hub.transport(1), 1, payload, 0, 4, Soon()).code(),
            absl::StatusCode::kDataLoss);
  std::string header(8, '\0');
  header[0] = 6;  // 6 bytes: pieces of 4 and 2
  ASSERT_TRUE(hub.transport(0)->SendBytes(RingTag{2, 0, 0}, header).ok());
  ASSERT_TRUE(hub.transport(0)->SendBytes(RingTag{2, 0, 1}, "abc").ok());
  const absl::Status short_piece =
      BroadcastBytes(*hub.transport(1), 2, payload, 0, 4, Soon());
  EXPECT_EQ(short_piece.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(short_piece.message(), HasSubstr("expected 4"));
}

}  // namespace
}  // namespace ferry

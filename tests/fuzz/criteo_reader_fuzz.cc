// Fuzz target: the Criteo TSV reader (data/criteo_reader.h): each input is
// written to one temporary file per process and streamed back.
//
// Input: byte 0 picks how.
//  bit 0: the rest is gzip-compressed first (mutations then reach the lines
//         through a valid stream); bit 1 with bit 0: the compressed file is
//         cut at a position from the next two bytes (truncated streams);
//  bits 2-3: tiny blocks and lines (64-byte blocks, 64-1000-byte lines), so
//         lines span blocks and overlong lines are skipped.
//
// Oracle: every example read prints to a line that parses back to the
// same example; the counts add up (examples + malformed == lines); a file
// read to its end holds an example and at most half malformed lines; a
// refused file says DATA_LOSS (or INTERNAL for I/O) and names the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/criteo_reader.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::fuzz;
  FuzzInput in(data, size);
  const uint8_t how = in.Byte();
  std::string bytes;
  if (how & 1) {
    const uint16_t where = in.Int<uint16_t>();
    bytes = Gzip(in.Rest());
    if ((how & 2) && !bytes.empty()) bytes.resize(where % bytes.size());
  } else {
    bytes = in.Rest();
  }
  ferry::CriteoReaderOptions options;
  if (how & 4) options.block_bytes = 64;
  if (how & 8) options.max_line_bytes = 64 + (how >> 4) * 60;
  WriteFile(TempPath(), bytes);
  auto reader = ferry::CriteoReader::Open(TempPath(), options);
  FuzzCheck(reader.ok(), "Criteo: cannot open the temporary file");
  ferry::CriteoExample x, back;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(x);
    const ferry::CriteoReadStats& stats = (*reader)->stats();
    FuzzCheck(stats.examples + stats.malformed == stats.lines,
              "Criteo: examples + malformed != lines");
    if (!more.ok()) {
      FuzzCheck(more.status().code() == absl::StatusCode::kDataLoss ||
                    more.status().code() == absl::StatusCode::kInternal,
                "Criteo: a refused file is not DATA_LOSS");
      FuzzCheck(more.status().message().find(TempPath()) != std::string::npos,
                "Criteo: the error does not name the file");
      FuzzCheck(!(*reader)->Next(x).ok(), "Criteo: a failed reader read on");
      break;
    }
    if (!*more) {
      FuzzCheck(stats.examples > 0, "Criteo: a file without examples ended OK");
      FuzzCheck(2 * stats.malformed <= stats.lines,
                "Criteo: a mostly malformed file ended OK");
      break;
    }
    FuzzCheck(ferry::ParseCriteoLine(ferry::FormatCriteoLine(x), back).ok(),
              "Criteo: an example does not print to a valid line");
    FuzzCheck(back.label == x.label && back.dense == x.dense &&
                  back.dense_missing == x.dense_missing && back.ids == x.ids,
              "Criteo: an example does not round-trip");
  }
  return 0;
}

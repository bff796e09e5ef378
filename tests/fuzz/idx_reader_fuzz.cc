// Fuzz target: the IDX dataset reader (data/idx_reader.h), which only
// reads files: each input is written to one temporary file per process and
// read back.
//
// Input: byte 0 picks how.
//  bit 0: expected rank 1 (labels) or 3 (images); 0x80 set: the rank
//         (byte 0 >> 1) % 10, in [0, 9], instead (outside [1, 8] is
//         INVALID_ARGUMENT);
//  bits 5-6: 0-1 the rest is the file as is (it may be gzip itself);
//         2 the rest is gzip-compressed first, so mutations reach the
//         decompressed header and data; 3 the same, then the compressed
//         file is cut or flipped at a position taken from the rest's first
//         two bytes (truncated / corrupt streams).
//
// Oracle: a read that succeeds has exactly the expected rank, dims that
// are non-negative, and product(dims) data bytes.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/idx_reader.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::fuzz;
  FuzzInput in(data, size);
  const uint8_t how = in.Byte();
  const int rank = (how & 0x80) ? (how >> 1) % 10 : (how & 1) ? 3 : 1;
  const int wrap = (how >> 5) & 0x03;
  std::string bytes;
  if (wrap < 2) {
    bytes = in.Rest();
  } else {
    const uint16_t where = in.Int<uint16_t>();
    bytes = Gzip(in.Rest());
    if (wrap == 3 && !bytes.empty()) {
      if (where & 1) {
        bytes.resize((where >> 1) % bytes.size());
      } else {
        bytes[(where >> 1) % bytes.size()] ^= 0x20;
      }
    }
  }
  WriteFile(TempPath(), bytes);
  absl::StatusOr<ferry::IdxArray> array = ferry::ReadIdxFile(TempPath(), rank);
  if (array.ok()) {
    FuzzCheck(static_cast<int>(array->dims.size()) == rank,
              "IDX: wrong rank returned");
    uint64_t product = 1;
    for (int64_t d : array->dims) {
      FuzzCheck(d >= 0, "IDX: negative dimension");
      product *= static_cast<uint64_t>(d);
    }
    FuzzCheck(array->data.size() == product, "IDX: data size != product(dims)");
  }
  return 0;
}

// Checkpoint tests: rewrites a checkpoint file's trailing CRC (zlib crc32 of
// every byte before it, common/checkpoint_io.h) so that only the field a
// test edited is "wrong".
#ifndef FERRY_TESTS_TESTING_CHECKPOINT_CRC_H_
#define FERRY_TESTS_TESTING_CHECKPOINT_CRC_H_

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace ferry::testing {

inline void FixCheckpointCrc(std::string& bytes) {
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data()),
            static_cast<uInt>(bytes.size() - 4)));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_CHECKPOINT_CRC_H_

// File helpers of the fuzz targets that read files: gzip-compress an input,
// and one temporary file per process (removed at exit) to write it to.
#ifndef FERRY_TESTS_FUZZ_FUZZ_FILES_H_
#define FERRY_TESTS_FUZZ_FUZZ_FILES_H_

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/fuzz_input.h"

namespace ferry::fuzz {

// The gzip encoding of `bytes` (one member).
inline std::string Gzip(const std::string& bytes) {
  z_stream z{};
  FuzzCheck(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY) == Z_OK,
            "deflateInit2");
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  FuzzCheck(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// One temporary file per process, removed at exit.
inline const std::string& TempPath() {
  static const std::string* path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir != nullptr && *dir ? dir : "/tmp") +
                          "/ferry_fuzz_XXXXXX";
    const int fd = mkstemp(pattern.data());
    FuzzCheck(fd >= 0, "mkstemp");
    close(fd);
    auto* p = new std::string(pattern);
    std::atexit([] { unlink(TempPath().c_str()); });
    return p;
  }();
  return *path;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  FuzzCheck(f != nullptr, "cannot open the temporary file");
  FuzzCheck(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(),
            "cannot write the temporary file");
  std::fclose(f);
}

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_FUZZ_FILES_H_

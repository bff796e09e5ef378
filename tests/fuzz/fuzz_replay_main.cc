// Replay driver for the fuzz targets in builds without libFuzzer (gcc, or
// FERRY_FUZZ=OFF): runs LLVMFuzzerTestOneInput once on every file named on
// the command line or found (recursively, in name order) in a directory
// named there. A finding crashes the process (abort, sanitizer report);
// otherwise it prints how many inputs ran and exits 0. Exit 1 when an
// argument does not exist or no input was found. That keeps the corpora
// and the regression inputs (tests/fuzz/regressions/) in the normal tests.
// Files whose name starts with '.' are skipped.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg, ec)) {
        // Dot files (.gitkeep of an empty regressions folder) are no input.
        if (entry.is_regular_file() &&
            entry.path().filename().string().rfind('.', 0) != 0) {
          inputs.push_back(entry.path());
        }
      }
    } else if (fs::is_regular_file(arg, ec)) {
      inputs.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 1;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs found\n");
    return 1;
  }
  for (const fs::path& path : inputs) {
    std::ifstream file(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", path.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return 0;
}

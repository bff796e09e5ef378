// cuBLAS is opened at run time (compute/cuda/cublas_library.h), not linked.
// Loading and resolving needs the library, not a GPU; skips without it.
#include "gtest/gtest.h"

#if FERRY_HAVE_CUDA

#include <cstdio>
#include <string>

#include "compute/cuda/cublas_library.h"

namespace ferry {
namespace {

TEST(CublasLibraryTest, OpensOnceAndResolvesEveryFunction) {
  absl::StatusOr<const CublasLibrary*> lib = LoadCublas();
  if (!lib.ok()) GTEST_SKIP() << lib.status();
  EXPECT_NE((*lib)->create, nullptr);
  EXPECT_NE((*lib)->destroy, nullptr);
  EXPECT_NE((*lib)->set_stream, nullptr);
  EXPECT_NE((*lib)->set_math_mode, nullptr);
  EXPECT_NE((*lib)->set_pointer_mode, nullptr);
  EXPECT_NE((*lib)->sgemm, nullptr);
  // A call into the library that needs no device.
  EXPECT_STRNE((*lib)->status_string(CUBLAS_STATUS_NOT_INITIALIZED), "");
  EXPECT_EQ(*LoadCublas(), *lib);  // once per process
}

// What the loading is for: nothing linked with the CUDA backend (this test
// binary is) needs cuBLAS at start, so a process that never creates a CUDA
// backend never maps it.
TEST(CublasLibraryTest, NoBinaryNeedsItAtStart) {
  FILE* pipe = popen("readelf -d /proc/self/exe 2>/dev/null", "r");
  ASSERT_NE(pipe, nullptr);
  std::string dynamic;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) {
    dynamic.append(buffer, n);
  }
  pclose(pipe);
  if (dynamic.find("NEEDED") == std::string::npos) {
    GTEST_SKIP() << "readelf is not available";
  }
  EXPECT_EQ(dynamic.find("libcublas"), std::string::npos) << dynamic;
  EXPECT_NE(dynamic.find("libc.so"), std::string::npos) << dynamic;
}

}  // namespace
}  // namespace ferry

#else

TEST(CublasLibraryTest, NotBuiltWithCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif

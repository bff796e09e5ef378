// A test fixture owning a fresh directory per test under TempDir() (named
// after the process and the test), removed afterwards.
#ifndef FERRY_TESTS_DATA_TEMP_DIR_TEST_H_
#define FERRY_TESTS_DATA_TEMP_DIR_TEST_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace ferry {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("ferry_" + std::string(info->test_suite_name()) + "_" +
            std::to_string(getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

}  // namespace ferry

#endif  // FERRY_TESTS_DATA_TEMP_DIR_TEST_H_

// `ferry data ctr`: writes a generated CTR data set in the Criteo TSV format
// (data/ctr_generator.h): DIR/train.tsv, DIR/test.tsv (or .tsv.gz) and
// DIR/meta.json with the hidden teacher's test AUC, the ceiling a model can
// reach.
#ifndef FERRY_CLIENT_DATA_COMMAND_H_
#define FERRY_CLIENT_DATA_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace ferry {

struct DataCtrFlags {
  std::string out;
  int64_t rows = 100000;
  int64_t test_rows = 20000;
  uint64_t seed = 1;
  double zipf = 1.1;
  std::vector<int64_t> vocab_sizes;  // empty: Criteo Kaggle's
  int teacher_factors = 4;
  double target_ctr = 0.25;
  bool gzip = false;
  bool quiet = false;
};

// Adds `ctr` (and its flags) under `data`; returns it.
CLI::App* AddDataCtrCommand(CLI::App& data, DataCtrFlags& flags);

// Runs it. Returns the exit code: 0, 2 for bad flags (the message names
// them), 1 when the files cannot be written.
int RunDataCtr(const DataCtrFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_DATA_COMMAND_H_

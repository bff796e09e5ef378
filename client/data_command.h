// `ferry data ctr`: writes a generated CTR data set in the Criteo TSV format
// (data/ctr_generator.h): DIR/train.tsv, DIR/test.tsv (or .tsv.gz) and
// DIR/meta.json with the hidden teacher's test AUC, the ceiling a model can
// reach.
#ifndef FERRY_CLIENT_DATA_COMMAND_H_
#define FERRY_CLIENT_DATA_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "data/ctr_generator.h"

namespace ferry {

struct DataCtrFlags {
  std::string out;
  // Bound to the flags; the defaults are the command's, not the library's.
  CtrGeneratorOptions generator = [] {
    CtrGeneratorOptions o;
    o.rows = 100000;
    o.test_rows = 20000;
    return o;
  }();
  bool quiet = false;
};

// Adds `ctr` (and its flags) under `data`; returns it.
CLI::App* AddDataCtrCommand(CLI::App& data, DataCtrFlags& flags);

// Runs it. Returns the exit code: 0, 2 for bad flags (the message names
// them), 1 when the files cannot be written.
int RunDataCtr(const DataCtrFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_DATA_COMMAND_H_

#include "client/bench_compare.h"

#include <set>

#include "client/bench_results.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(BenchCompareTest, SweepCrossesEveryAxisAndRingHasNoShards) {
  BenchCompareFlags f;
  f.models = {"fashion-mlp", "10-5-2"};
  f.modes = {"ps", "ring"};
  f.workers = {2, 3};
  f.shards = {1, 2, 4};
  f.consistency = {"sync", "async"};
  f.compression = {"none", "fp16"};
  f.bandwidths = {"1Gbit"};
  f.latencies = {"0", "50us"};
  auto sweep = ExpandSweep(f);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  // Per model: PS 2 W x 3 S x 2 consistency x 2 compression x 2 latency,
  // ring 2 W x 2 compression x 2 latency.
  EXPECT_EQ(sweep->size(), 2u * (48 + 8));
  int ring = 0;
  for (const BenchConfig& c : *sweep) {
    if (c.mode == "ring") {
      ++ring;
      EXPECT_EQ(c.shards, 0);
      EXPECT_EQ(c.consistency, "sync");
    }
  }
  EXPECT_EQ(ring, 16);
  EXPECT_EQ((*sweep)[0].mlp_spec, "784-256-128-10");
}

// ps-colocated: one shard process per worker, whatever --shards says, with
// PS's other axes, for ferry's own workers and a script's; a DLRM cannot
// take it.
TEST(BenchCompareTest, ColocatedPsHasAShardPerWorker) {
  BenchCompareFlags f;
  f.modes = {"ps-colocated"};
  f.workers = {2, 4};
  f.shards = {1, 2, 3};
  f.consistency = {"sync", "async"};
  f.bandwidths = {"0"};
  f.latencies = {"0"};
  auto sweep = ExpandSweep(f);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 4u);  // 2 W x 2 consistency
  std::set<std::string> names;
  for (const BenchConfig& c : *sweep) {
    EXPECT_EQ(c.shards, c.workers);
    names.insert(c.Name());
  }
  EXPECT_EQ(names.size(), 4u);
  EXPECT_TRUE(IsPsMode("ps-colocated") && ModeHasShards("ps-colocated"));
  f.models = {"dlrm"};
  EXPECT_FALSE(ExpandSweep(f).ok());
  f.models = {"fashion-mlp"};
  f.worker_command = "python3 train.py --samples {samples}";
  EXPECT_TRUE(ExpandSweep(f).ok());
}

TEST(BenchCompareTest, QuickCoversBothModes) {
  BenchCompareFlags f;
  f.quick = true;
  f.models = {"bert-base"};  // overridden
  auto sweep = ExpandSweep(f);
  ASSERT_TRUE(sweep.ok());
  bool ps = false, ring = false;
  for (const BenchConfig& c : *sweep) {
    ps |= c.mode == "ps";
    ring |= c.mode == "ring";
    EXPECT_EQ(c.model, "fashion-mlp");
  }
  EXPECT_TRUE(ps && ring);
}

TEST(BenchCompareTest, EveryEmulatedRunGetsItsLoopbackBaselineFirst) {
  BenchCompareFlags f;
  f.modes = {"ps", "ring"};
  f.shards = {2};
  f.bandwidths = {"1Gbit", "0", "10Gbit"};
  f.latencies = {"0"};
  auto sweep = ExpandSweep(f);
  ASSERT_TRUE(sweep.ok());
  ASSERT_EQ(sweep->size(), 6u);
  const std::vector<BenchConfig> runs = WithBaselines(*sweep);
  // The sweep's own "0" runs serve as baselines; none is run twice.
  ASSERT_EQ(runs.size(), 6u);
  std::set<std::string> seen;
  for (const BenchConfig& c : runs) {
    EXPECT_TRUE(seen.insert(c.Name()).second) << c.Name();
    if (!IsBaseline(c)) {
      EXPECT_TRUE(seen.count(BaselineOf(c).Name())) << c.Name();
    }
  }
  f.bandwidths = {"1Gbit"};
  f.latencies = {"50us"};
  EXPECT_EQ(WithBaselines(*ExpandSweep(f)).size(), 4u);  // 2 runs + 2 baselines
}

TEST(BenchCompareTest, BadAxesAreRejected) {
  BenchCompareFlags f;
  f.modes = {"allreduce"};
  EXPECT_THAT(std::string(ExpandSweep(f).status().message()),
              HasSubstr("allreduce"));
  f = {};
  f.compression = {"zip"};
  EXPECT_FALSE(ExpandSweep(f).ok());
  f = {};
  f.bandwidths = {"fast"};
  EXPECT_FALSE(ExpandSweep(f).ok());
  f = {};
  f.models = {"resnet-9000"};
  EXPECT_FALSE(ExpandSweep(f).ok());
}

TEST(BenchCompareTest, ADlrmSweepsItsFourModesOnCtrData) {
  BenchCompareFlags f;
  f.models = {"dlrm"};
  f.modes = {"ps", "ring", "hybrid", "ring-full"};
  f.shards = {2};
  f.bandwidths = {"0"};
  f.latencies = {"0"};
  f.out_dir = "/tmp/bench-out";
  f.full_table_rows = 5000;
  auto sweep = ExpandSweep(f);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 4u);
  std::set<std::string> names;
  for (const BenchConfig& c : *sweep) {
    EXPECT_TRUE(c.dlrm);
    EXPECT_EQ(c.dataset, "criteo:/tmp/bench-out/ctr-data") << c.mode;
    EXPECT_EQ(c.shards, c.mode == "ps" || c.mode == "hybrid" ? 2 : 0);
    EXPECT_EQ(c.full_table_rows, c.mode == "ring-full" ? 5000 : 0);
    names.insert(c.Name());
  }
  EXPECT_EQ(names.size(), 4u);  // ring and ring-full runs apart
  // Given data is used as it is.
  f.ctr_data = "/data/ctr";
  EXPECT_EQ((*ExpandSweep(f))[0].dataset, "criteo:/data/ctr");
  // Hybrid and full tables need a DLRM; DLRM runs take no compression.
  f.models = {"fashion-mlp"};
  EXPECT_THAT(std::string(ExpandSweep(f).status().message()),
              HasSubstr("hybrid and ring-full: DLRM"));
  f.models = {"dlrm"};
  f.compression = {"fp16"};
  EXPECT_THAT(std::string(ExpandSweep(f).status().message()),
              HasSubstr("DLRM runs take none"));
  EXPECT_TRUE(ModeFitsModel("ring-full", true));
  EXPECT_FALSE(ModeFitsModel("ring-full", false));
}

// A metrics line of a 2-worker step of 64 samples that ended at `ended`
// (the workers' clocks); the coordinator recorded it at 99 s, whatever the
// step's time: the measurement must not read that.
nlohmann::json Line(int step, double ended, double sent, double received,
                    double compute, double comm) {
  return {{"step", step},
          {"elapsed_seconds", 99.0},
          {"ended_seconds", ended},
          {"samples", 64},
          {"workers", 2},
          {"data_bytes", {{"sent", sent}, {"received", received}}},
          {"control_bytes", {{"sent", 10 * step}, {"received", 20 * step}}},
          {"compute_seconds", compute},
          {"comm_seconds", comm},
          {"peer_bytes",
           {{"ps0", {{"sent", 100.0 * step}, {"received", 0}}},
            {"ps1", {{"sent", 300.0 * step}, {"received", 0}}}}},
          {"shard_requests", {{"ps0", 4 * step}, {"ps1", 4 * step}}}};
}

TEST(BenchCompareTest, MeasuresTheWindowAfterWarmup) {
  // Step 1 carries a one-off (the first pull); the window starts at step 3.
  std::vector<nlohmann::json> lines = {Line(1, 5.0, 1e9, 1e9, 0, 0)};
  for (int step = 3; step <= 13; ++step) {
    lines.push_back(
        Line(step, 0.5 * step, 2000.0 * step, 1000.0 * step, 0.1, 0.05));
  }
  lines.push_back({{"step", 13}, {"test_accuracy", 0.5}});  // an eval line
  const nlohmann::json summary = {{"test_accuracy", 0.75}, {"final_loss", 0.5}};
  auto m = MeasureRun(lines, summary, /*workers=*/2, /*warmup_steps=*/3);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps, 10);
  EXPECT_DOUBLE_EQ(m->step_seconds, 0.5);
  EXPECT_DOUBLE_EQ(m->window_seconds, 5.0);
  EXPECT_EQ(m->window_samples, 640);
  EXPECT_DOUBLE_EQ(m->samples_per_second, 128.0);
  EXPECT_DOUBLE_EQ(m->compute_worker_seconds, 2.0);  // 10 steps x 2 x 0.1
  EXPECT_DOUBLE_EQ(m->bytes_sent_per_worker, 1000.0);
  EXPECT_DOUBLE_EQ(m->bytes_received_per_worker, 500.0);
  EXPECT_DOUBLE_EQ(m->compute_seconds, 0.1);
  EXPECT_DOUBLE_EQ(m->comm_seconds, 0.05);
  EXPECT_DOUBLE_EQ(m->control_bytes_per_worker, 15.0);
  ASSERT_EQ(m->shard_bytes.size(), 2u);
  EXPECT_DOUBLE_EQ(m->shard_bytes[0], 100.0);
  EXPECT_DOUBLE_EQ(m->shard_bytes[1], 300.0);  // a hot shard shows
  EXPECT_DOUBLE_EQ(m->shard_requests[1], 4.0);
  EXPECT_DOUBLE_EQ(m->test_accuracy, 0.75);

  auto short_run = MeasureRun({Line(3, 1, 1, 1, 1, 1)}, summary, 2, 3);
  EXPECT_THAT(std::string(short_run.status().message()),
              HasSubstr("too short"));
}

// The quick sweep's PS row of the MLP with 2 workers on 1 Gbit, 50 us.
BenchConfig FashionMlpPsRow(int shards) {
  BenchConfig c;
  c.model = "fashion-mlp";
  c.mlp_spec = "784-256-128-10";
  c.mode = "ps";
  c.shards = shards;
  c.workers = 2;
  c.bandwidth = "1Gbit";
  c.latency = "50us";
  return c;
}

// The issue-37 run: the coordinator recorded step 1 at 2.710 s and steps
// 2-55 within the next 0.1 s, while the steps themselves ended 25 ms apart.
// The step time and throughput are the steps' own, and the lines' order
// does not matter (a late report).
TEST(BenchCompareTest, BunchedCommitsGiveTheTrueStepTimeAndThroughput) {
  std::vector<nlohmann::json> lines;
  for (int step = 1; step <= 55; ++step) {
    nlohmann::json line = Line(step, 1.3 + 0.025 * step, 1000.0 * step,
                               1000.0 * step, 0.004, 0.018);
    line["elapsed_seconds"] = step == 1 ? 2.710 : 2.710 + 0.1 * step / 55;
    lines.push_back(line);
  }
  std::swap(lines[10], lines[30]);
  auto m = MeasureRun(lines, {}, /*workers=*/2, /*warmup_steps=*/5);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps, 50);
  EXPECT_NEAR(m->step_seconds, 0.025, 1e-9);
  EXPECT_NEAR(m->window_seconds, 1.25, 1e-9);
  EXPECT_EQ(m->window_samples, 50 * 64);
  EXPECT_NEAR(m->samples_per_second, 64 / 0.025, 1e-6);
  // The comm fits in the step: nothing here is impossible.
  BenchConfig c;
  c.model = c.mlp_spec = "784-256-128-10";
  c.mode = "ring";
  c.bandwidth = "1Gbit";
  EXPECT_TRUE(RunRecord(c, *m, CostPrediction{})["invalid"].empty());

  // Lines without the steps' own times are refused, not read as commits.
  for (nlohmann::json& line : lines) line.erase("ended_seconds");
  EXPECT_THAT(std::string(MeasureRun(lines, {}, 2, 5).status().message()),
              HasSubstr("no ended_seconds"));
}

// A fabricated row that no run can produce (issue 37's: 1.4 MB per worker
// per step on a 1 Gbit link in 1.5 ms, with 5.1 ms of exposed comm) is
// marked INVALID with its reasons and left out of the error summary.
TEST(BenchCompareTest, AnImpossibleRowIsMarkedInvalid) {
  const BenchConfig c = FashionMlpPsRow(/*shards=*/2);
  BenchMeasurement m;
  m.steps = 50;
  m.step_seconds = 0.0015;
  m.window_seconds = 0.075;
  m.window_samples = 3200;
  m.samples_per_second = 90000;  // not 3200 / 0.075
  m.comm_seconds = 0.0051;
  m.comm_worker_seconds = 0.0051 * 2 * 50;
  m.compute_worker_seconds = 0.001 * 2 * 50;
  m.bytes_sent_per_worker = 0.7e6;
  m.bytes_received_per_worker = 0.7e6;
  m.shard_bytes_in = {0.7e6, 0.7e6};
  m.shard_bytes_out = {0.7e6, 0.7e6};
  CostPrediction p;
  p.step_seconds = 0.0233;
  const nlohmann::json r = RunRecord(c, m, p);
  ASSERT_FALSE(IsValidRow(r));
  const std::string reasons = r["invalid"].dump();
  EXPECT_THAT(reasons, HasSubstr("exposed comm longer than the step"));
  EXPECT_THAT(reasons, HasSubstr("faster than the link"));
  EXPECT_THAT(reasons, HasSubstr("samples/s x window"));
  EXPECT_THAT(reasons, Not(HasSubstr("compute longer")));

  // A valid twin: 25 ms per step. Only it counts in the summary.
  BenchMeasurement ok = m;
  ok.step_seconds = 0.025;
  ok.window_seconds = 1.25;
  ok.samples_per_second = 3200 / 1.25;
  const nlohmann::json v = RunRecord(c, ok, p);
  EXPECT_TRUE(IsValidRow(v)) << v["invalid"].dump();
  const std::string md = ResultsMarkdown({r, v});
  EXPECT_THAT(md, HasSubstr("| **INVALID** ps |"));
  EXPECT_THAT(md, HasSubstr("INVALID rows (left out of every summary)"));
  EXPECT_THAT(md, HasSubstr("1 of 1 valid emulated rows"));
  EXPECT_THAT(md, HasSubstr("784-256-128-10 on synthetic"));
  EXPECT_THAT(ResultsCsv({r, v}), HasSubstr(",false\n"));
}

TEST(BenchCompareTest, RecordFlagsWhatTheModelDoesNotExplain) {
  const BenchConfig c = FashionMlpPsRow(/*shards=*/1);
  BenchMeasurement m;
  m.steps = 10;
  m.bytes_sent_per_worker = 1000;
  m.bytes_received_per_worker = 1000;
  m.step_seconds = 0.02;
  m.compute_seconds = 0.005;
  m.comm_seconds = 0.01;
  m.window_seconds = 0.2;
  m.window_samples = 640;
  m.samples_per_second = 3200;
  m.compute_worker_seconds = 0.005 * 2 * 10;
  m.comm_worker_seconds = 0.01 * 2 * 10;
  CostPrediction p;
  p.params = 100;
  p.worker.sent = 1000;
  p.worker.received = 1010;  // 0.5% off: fine
  p.step_seconds = 0.0195;
  p.exposed_comm_seconds = 0.0098;
  nlohmann::json r = RunRecord(c, m, p);
  EXPECT_TRUE(r["notes"].empty()) << r["notes"].dump();
  EXPECT_TRUE(IsValidRow(r)) << r["invalid"].dump();
  EXPECT_NEAR(r["bytes_error"].get<double>(), 2000.0 / 2010 - 1, 1e-12);
  for (const char* key : {"mode", "workers", "shards", "model_params",
                          "bytes_per_step_per_worker_measured",
                          "bytes_per_step_per_worker_predicted",
                          "step_seconds_measured", "step_seconds_predicted"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  p.worker.received = 1500;  // bytes 13% off, time 50% off
  p.step_seconds = 0.01;
  r = RunRecord(c, m, p);
  ASSERT_EQ(r["notes"].size(), 2u);
  EXPECT_THAT(r["notes"][0].get<std::string>(), HasSubstr("bytes off"));
  EXPECT_THAT(r["notes"][1].get<std::string>(), HasSubstr("time off"));

  const std::string csv = ResultsCsv({r});
  EXPECT_THAT(csv, HasSubstr("bytes_per_step_per_worker_measured"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2);
  const std::string md = ResultsMarkdown({r});
  EXPECT_THAT(md,
              HasSubstr("| ps | fashion-mlp (784-256-128-10 on synthetic) |"));
  EXPECT_THAT(md, HasSubstr("Where measurement and model differ"));
}

// A loopback run has no link in the model: its times are not predicted, so
// no table shows a "+472%" step-time error for it; an accuracy at chance
// level is labelled, not shown as a result.
TEST(BenchCompareTest, LoopbackRowsHaveNoTimePredictionAndChanceIsLabelled) {
  BenchConfig c;
  c.model = "fashion-mlp";
  c.mlp_spec = "784-256-128-10";
  c.mode = "ring";
  c.bandwidth = "0";
  c.latency = "0";
  BenchMeasurement m;
  m.steps = 10;
  m.bytes_sent_per_worker = 1000;
  m.bytes_received_per_worker = 1000;
  m.step_seconds = 0.0103;
  m.compute_seconds = 0.0018;
  m.comm_seconds = 0.0083;
  m.test_accuracy = 0.0922;
  CostPrediction p;
  p.worker.sent = 1000;
  p.worker.received = 1000;
  p.step_seconds = 0.0018;  // compute only: the model has no link here
  const nlohmann::json r = RunRecord(c, m, p);
  EXPECT_TRUE(r["step_error"].is_null());
  EXPECT_TRUE(r["comm_error"].is_null());
  EXPECT_TRUE(r["step_seconds_predicted"].is_null());
  EXPECT_DOUBLE_EQ(r["test_accuracy_chance"].get<double>(), 0.1);
  const std::string md = ResultsMarkdown({r});
  EXPECT_THAT(md, HasSubstr("n/a (no link model)"));
  EXPECT_THAT(md, Not(HasSubstr("+472")));
  EXPECT_THAT(md, HasSubstr("≈ chance (0.09)"));
  EXPECT_THAT(md, Not(HasSubstr("0.0922")));
  const std::string csv = ResultsCsv({r});
  EXPECT_THAT(csv, Not(HasSubstr("null")));

  // The same run on an emulated link is predicted and compared; a learnt
  // accuracy is shown as it is.
  c.bandwidth = "1Gbit";
  m.test_accuracy = 0.81;
  const nlohmann::json e = RunRecord(c, m, p);
  EXPECT_TRUE(e["step_error"].is_number());
  EXPECT_THAT(ResultsMarkdown({e}), HasSubstr("| 0.8100 |"));
}

// A PyTorch script as the worker: its one model in both modes, the command
// kept with its placeholders; a command that cannot take the run's dataset
// size is refused before anything runs.
TEST(BenchCompareTest, AWorkerCommandSweepsTheScriptsModelInBothModes) {
  BenchCompareFlags f;
  f.models = {"fashion-mlp", "10-5-2"};  // replaced by the script's model
  f.modes = {"ps", "ring"};
  f.shards = {2};
  f.bandwidths = {"0"};
  f.latencies = {"0"};
  f.worker_command = "python3 train.py --samples {samples} --lr {lr}";
  f.model_name = "resnet18";
  auto sweep = ExpandSweep(f);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 2u);
  for (const BenchConfig& c : *sweep) {
    EXPECT_EQ(c.model, "resnet18");
    EXPECT_EQ(c.mlp_spec, "external");
    EXPECT_EQ(c.worker_command, f.worker_command);
    EXPECT_FALSE(c.dlrm);
  }
  f.worker_command = "python3 train.py --samples 4096";
  EXPECT_THAT(std::string(ExpandSweep(f).status().message()),
              HasSubstr("{samples}"));
  f.worker_command = "python3 train.py --samples {samples}";
  f.model_name = "a b";
  EXPECT_FALSE(ExpandSweep(f).ok());
}

// A script's model is scored only by the script: no accuracy of 0 is shown
// as its result.
TEST(BenchCompareTest, AScriptsRunWithoutAScoreShowsNone) {
  BenchConfig c;
  c.model = "resnet18";
  c.mlp_spec = "external";
  c.mode = "ring";
  c.worker_command = "python3 train.py --samples {samples}";
  BenchMeasurement m;
  m.steps = 10;
  m.step_seconds = 0.5;
  m.compute_seconds = 0.4;
  m.comm_seconds = 0.1;
  CostPrediction p;
  const nlohmann::json r = RunRecord(c, m, p);
  EXPECT_TRUE(r["test_accuracy"].is_null());
  EXPECT_THAT(r["trained"].get<std::string>(), HasSubstr("worker command"));
  const std::string md = ResultsMarkdown({r});
  EXPECT_THAT(md, HasSubstr("resnet18 (the worker command's model"));
  EXPECT_THAT(md, HasSubstr("— (not scored)"));
}

}  // namespace
}  // namespace ferry

// ferry-sparse-memory: what one PS shard's embedding rows cost in memory.
// Fills a SparseStore (ps/sparse_store.h), as a shard of a job with
// embedding tables holds it, with --rows rows of --dim floats spread over
// --tables tables, through ApplyStep in steps of --batch new ids (the path
// training takes: rows are created on their first update), then reports the
// process's peak and current RSS (VmHWM, VmRSS) against the rows' own bytes
// (values + row-wise optimizer state), the index's bytes per row and the
// insertion rate. Optionally writes one checkpoint of the rows as a shard
// does (--checkpoint DIR: streamed from the live tables, common/
// checkpoint_io.h CheckpointWriter) and/or exports them once (--export: the
// in-memory copy SparseStore::Export makes), to show each one's peak.
// With --restore DIR it fills nothing: it restores the newest checkpoint
// in DIR (one this tool wrote with --checkpoint, in another process) into
// an empty store as a resuming shard does (--restore-by read: the file read
// into memory and decoded into a copy first, FileSystem::ReadFile and
// DecodeCheckpoint, as shards did before).
//
//   ferry-sparse-memory [--rows 12500000] [--dim 16] [--tables 26]
//       [--optimizer adagrad] [--batch 100000] [--checkpoint DIR]
//       [--export] [--json PATH]
//   ferry-sparse-memory --restore DIR [--restore-by map|read] [--dim 16]
//       [--tables 26] [--optimizer adagrad] [--json PATH]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "nlohmann/json.hpp"
#include "ps/sparse_store.h"

namespace ferry {
namespace {

// A field of /proc/self/status in KiB (VmHWM, VmRSS), or -1.
int64_t StatusKib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

CheckpointIdentity ToolIdentity() {
  CheckpointIdentity identity;
  identity.job_id = "ferry-sparse-memory";
  return identity;
}

// Restores the newest checkpoint in `dir` into `store` (empty) by mapping
// it (as shards do) or by reading it whole; prints the figures.
int RestoreAndReport(SparseStore& store, const std::string& dir,
                     const std::string& by, const std::string& json_path) {
  const int64_t base_kib = StatusKib("VmRSS");
  const auto begin = std::chrono::steady_clock::now();
  CheckpointStore checkpoints(PosixFileSystem(), dir, ToolIdentity());
  absl::Status restored;
  std::string path;
  if (by == "map") {
    absl::StatusOr<MappedCheckpoint> mapped = checkpoints.MapNewest();
    restored = mapped.status();
    if (mapped.ok()) {
      path = mapped->path;
      MappedFile* file = mapped->file.get();
      restored = store.Restore(
          mapped->view.tables,
          [file](absl::string_view part) { file->Release(part); });
    }
  } else {
    absl::StatusOr<std::vector<int64_t>> versions = checkpoints.ListVersions();
    restored = versions.status();
    if (versions.ok() && versions->empty()) {
      restored = absl::NotFoundError("no checkpoint");
    } else if (versions.ok()) {
      path = CheckpointPath(dir, 0, versions->back());
      // The bytes are freed once decoded, as the old load did.
      absl::StatusOr<ShardCheckpoint> loaded = [&] {
        absl::StatusOr<std::string> bytes = PosixFileSystem()->ReadFile(path);
        return bytes.ok() ? DecodeCheckpoint(*bytes)
                          : absl::StatusOr<ShardCheckpoint>(bytes.status());
      }();
      restored = loaded.ok() ? store.Restore(loaded->tables) : loaded.status();
    }
  }
  if (!restored.ok()) {
    std::fprintf(stderr, "ferry-sparse-memory: restore from %s: %s\n",
                 dir.c_str(), restored.ToString().c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  const int64_t hwm_kib = StatusKib("VmHWM");
  const int64_t rss_kib = StatusKib("VmRSS");
  const SparseStoreStats stats = store.Stats();
  const double row_mib = static_cast<double>(stats.total.row_bytes) / (1 << 20);
  const double peak_mib = static_cast<double>(hwm_kib - base_kib) / 1024;
  const nlohmann::json out = {
      {"restored_from", path},
      {"restore_by", by},
      {"rows", stats.total.rows},
      {"rows_mib", row_mib},
      {"base_rss_mib", static_cast<double>(base_kib) / 1024},
      {"restore_peak_mib", peak_mib},
      {"restore_peak_over_rows", peak_mib / row_mib},
      {"store_rss_mib", static_cast<double>(rss_kib - base_kib) / 1024},
      {"restore_seconds", seconds},
  };
  std::printf("%s\n", out.dump(1).c_str());
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{
      "One PS shard's embedding rows in memory: peak RSS against "
      "the rows' bytes"};
  int64_t rows = 12'500'000;
  int dim = 16;
  int tables = 26;
  std::string optimizer = "adagrad";
  int64_t batch = 100'000;
  bool do_export = false;
  std::string checkpoint_dir;
  std::string json_path;
  std::string restore_dir;
  std::string restore_by = "map";
  app.add_option("--rows", rows, "rows to create")
      ->check(CLI::Range(1LL, 1LL << 33));
  app.add_option("--dim", dim, "floats per row")->check(CLI::Range(1, 4096));
  app.add_option("--tables", tables, "tables the rows spread over")
      ->check(CLI::Range(1, 4096));
  app.add_option("--optimizer", optimizer, "sgd, adagrad or ftrl");
  app.add_option("--batch", batch, "new ids per step")
      ->check(CLI::Range(1LL, 10'000'000LL));
  app.add_flag("--export", do_export,
               "export every row once at the end (an in-memory copy)");
  app.add_option("--checkpoint", checkpoint_dir,
                 "write one checkpoint of the rows here at the end, streamed "
                 "as a shard writes it");
  app.add_option("--json", json_path, "write the figures here too");
  app.add_option("--restore", restore_dir,
                 "fill nothing: restore the newest checkpoint in this "
                 "directory (written by --checkpoint) and report its peak");
  app.add_option("--restore-by", restore_by,
                 "map: read the file in place, as shards do; read: read it "
                 "whole and decode a copy first")
      ->check(CLI::IsMember({"map", "read"}));
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<RowOptimizerKind> kind = ParseRowOptimizerKind(optimizer);
  if (!kind.ok()) {
    std::fprintf(stderr, "ferry-sparse-memory: %s\n",
                 std::string(kind.status().message()).c_str());
    return 2;
  }
  SparseStoreConfig config;
  config.dims.assign(tables, dim);
  config.optimizer.kind = *kind;
  config.seed = 1;
  absl::StatusOr<std::unique_ptr<SparseStore>> store =
      SparseStore::Create(config);
  if (!store.ok()) {
    std::fprintf(stderr, "ferry-sparse-memory: %s\n",
                 store.status().ToString().c_str());
    return 2;
  }
  if (!restore_dir.empty()) {
    return RestoreAndReport(**store, restore_dir, restore_by, json_path);
  }
  const int64_t base_kib = StatusKib("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  std::vector<SparseRows> step(tables);
  int64_t created = 0;
  for (int64_t s = 0; created < rows; ++s) {
    const int64_t n = std::min(batch, rows - created);
    for (int t = 0; t < tables; ++t) {
      step[t].table = t;
      step[t].ids.clear();
    }
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t id = static_cast<uint64_t>(created + i);
      step[id % tables].ids.push_back(id * 2654435761u);  // scattered ids
    }
    for (int t = 0; t < tables; ++t) {
      step[t].grads.assign(step[t].ids.size() * dim, 0.01f);
    }
    const std::vector<SparseRows>* contribution = &step;
    if (absl::Status st =
            (*store)->ApplyStep(absl::MakeConstSpan(&contribution, 1), 1, s);
        !st.ok()) {
      std::fprintf(stderr, "ferry-sparse-memory: %s\n", st.ToString().c_str());
      return 1;
    }
    created += n;
    if (s % 20 == 0) {
      std::fprintf(stderr, "\r%lld / %lld rows, RSS %lld MiB",
                   static_cast<long long>(created),
                   static_cast<long long>(rows),
                   static_cast<long long>(StatusKib("VmRSS") / 1024));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::fprintf(stderr, "\n");
  step.clear();
  step.shrink_to_fit();
  const SparseStoreStats stats = (*store)->Stats();
  const int64_t filled_hwm_kib = StatusKib("VmHWM");
  const int64_t filled_rss_kib = StatusKib("VmRSS");
  int64_t checkpoint_hwm_kib = -1;
  double checkpoint_seconds = 0;
  if (!checkpoint_dir.empty()) {
    const CheckpointIdentity identity = ToolIdentity();
    CheckpointStore checkpoints(PosixFileSystem(), checkpoint_dir, identity);
    std::unique_ptr<CheckpointWriter> writer = checkpoints.NewWriter();
    CheckpointDenseView dense;
    dense.identity = identity;
    const std::vector<std::unique_ptr<TablePartSource>> sources =
        (*store)->CheckpointSources();
    std::vector<const TablePartSource*> parts;
    for (const auto& source : sources) parts.push_back(source.get());
    const auto begin = std::chrono::steady_clock::now();
    absl::Status written = writer->Write(dense, parts);
    absl::StatusOr<std::string> path =
        written.ok() ? writer->Commit() : absl::StatusOr<std::string>(written);
    if (!path.ok()) {
      std::fprintf(stderr, "ferry-sparse-memory: checkpoint: %s\n",
                   path.status().ToString().c_str());
      return 1;
    }
    checkpoint_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    checkpoint_hwm_kib = StatusKib("VmHWM");
    std::fprintf(stderr, "wrote %s in %.1f s\n", path->c_str(),
                 checkpoint_seconds);
  }
  int64_t export_hwm_kib = -1;
  if (do_export) {
    const std::vector<TableCheckpoint> exported = (*store)->Export();
    export_hwm_kib = StatusKib("VmHWM");
    std::fprintf(stderr, "exported %zu tables\n", exported.size());
  }
  const double row_mib = static_cast<double>(stats.total.row_bytes) / (1 << 20);
  const double rss_mib = static_cast<double>(filled_rss_kib - base_kib) / 1024;
  const double hwm_mib = static_cast<double>(filled_hwm_kib - base_kib) / 1024;
  nlohmann::json out = {
      {"rows", stats.total.rows},
      {"dim", dim},
      {"tables", tables},
      {"optimizer", optimizer},
      {"row_bytes_each",
       stats.total.rows > 0 ? stats.total.row_bytes / stats.total.rows : 0},
      {"rows_mib", row_mib},
      {"base_rss_mib", static_cast<double>(base_kib) / 1024},
      {"store_rss_mib", rss_mib},
      {"store_peak_mib", hwm_mib},
      {"rss_over_rows", rss_mib / row_mib},
      {"peak_over_rows", hwm_mib / row_mib},
      {"overhead_bytes_per_row",
       static_cast<double>(stats.total.overhead_bytes) / stats.total.rows},
      {"index_bytes_per_row",
       static_cast<double>(stats.total.index_bytes) / stats.total.rows},
      {"measured_bytes_per_row",
       (filled_rss_kib - base_kib) * 1024.0 / stats.total.rows},
      {"rows_per_second", static_cast<double>(rows) / seconds},
  };
  if (!checkpoint_dir.empty()) {
    out["checkpoint_peak_mib"] =
        static_cast<double>(checkpoint_hwm_kib - base_kib) / 1024;
    out["checkpoint_peak_over_rows"] =
        static_cast<double>(checkpoint_hwm_kib - base_kib) / 1024 / row_mib;
    out["checkpoint_seconds"] = checkpoint_seconds;
  }
  if (do_export) {
    out["export_peak_mib"] =
        static_cast<double>(export_hwm_kib - base_kib) / 1024;
  }
  std::printf("%s\n", out.dump(1).c_str());
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) { return ferry::Run(argc, argv); }

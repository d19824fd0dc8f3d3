// report / stats / export time against the number of runs in a capture: synthetic captures of
// 1k, 4k and 16k small runs (one layer, one token, ~20 rows each: 12 written through the real
// HostTracer -> Store path, one per scenario x policy x mode, the rest SQL copies of them), then
// `hookscope report --json`, `stats --format json`, `export --format chrome --run all` and
// `export --format csv` timed on each. Every per-run pass must be linear (or n log n): the
// growth ratios time(4k)/time(1k) and time(16k)/time(4k) should stay near 4 (quadratic: 16).
//   bench_runs_scaling --hookscope build/hookscope [--dir DIR] [--runs 1000,4000,16000]
// Captures are cached in DIR (default: a temporary folder) as runs-N.sqlite.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <sqlite3.h>

#include "storage/store.h"
#include "tests/synthetic.h"

namespace fs = std::filesystem;

namespace {

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error("SQL failed: " + msg + "\n  " + sql);
  }
}

std::vector<std::string> strings(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
  std::vector<std::string> out;
  while (sqlite3_step(st) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  return out;
}

/// `runs` runs: 12 written through the real HostTracer -> Store path (every scenario x policy x
/// mode of the list below, one layer and one token each), the others copies of them made in SQL
/// (every table with a runId column; the HostTracer's per-run chunk pool makes writing thousands
/// of runs through it take minutes), each with its own id and start.
void write_capture(const fs::path& path, int runs) {
  const fs::path partial = path.string() + ".partial";
  fs::remove(partial);
  constexpr int kTemplates = 12;
  {
    hs::storage::Store store(partial);
    hs::storage::add_synthetic_devices(store, 1);
    static const char* scenarios[] = {"sharded", "cpu-offload"};
    static const char* policies[] = {"whole-hook", "offload-only"};
    static const char* modes[] = {"eager", "default", "reduce-overhead"};
    for (int i = 0; i < std::min(runs, kTemplates); ++i) {
      hs::storage::SyntheticRun s;
      s.scenario = scenarios[i % 2];
      s.offload = i % 2 == 1;
      s.policy = policies[(i / 2) % 2];
      s.mode = modes[(i / 4) % 3];
      s.devices = 1;
      s.layers = 1;
      s.tokens = 1;
      s.start_ns = 1'000'000'000 + int64_t{i} * 10'000'000;
      hs::storage::write_synthetic_run(store, s);
    }
    store.finalize();
  }
  if (runs > kTemplates) {
    sqlite3* db = nullptr;
    if (sqlite3_open(partial.c_str(), &db) != SQLITE_OK) throw std::runtime_error("cannot open " + partial.string());
    exec(db, "BEGIN");
    exec(db, "CREATE TEMP TABLE copies (new INTEGER PRIMARY KEY, tmpl INTEGER NOT NULL)");
    exec(db, "WITH RECURSIVE k(n) AS (SELECT " + std::to_string(kTemplates + 1) + " UNION ALL SELECT n + 1 FROM k WHERE n < " +
                 std::to_string(runs) + ") INSERT INTO copies SELECT n, (n - 1) % " + std::to_string(kTemplates) +
                 " + 1 FROM k");
    for (const std::string& table : strings(db, "SELECT name FROM sqlite_master WHERE type = 'table'")) {
      const auto cols = strings(db, "SELECT name FROM pragma_table_info('" + table + "')");
      const bool is_runs = table == "RUNS";
      if (!is_runs && std::find(cols.begin(), cols.end(), "runId") == cols.end()) continue;
      std::string names, values;
      for (const std::string& c : cols) {
        names += (names.empty() ? "" : ", ") + c;
        std::string v = "t." + c;
        if (is_runs && c == "id") v = "c.new";
        else if (is_runs && c == "start") v = "t.start + (c.new - c.tmpl) * 10000000";
        else if (c == "runId") v = "c.new";
        else if (c == "id") v = "NULL";  // DIAGNOSTICS / DEVICES row ids: new ones
        values += (values.empty() ? "" : ", ") + v;
      }
      exec(db, "INSERT INTO " + table + " (" + names + ") SELECT " + values + " FROM copies c JOIN " + table +
                   " t ON t." + (is_runs ? "id" : "runId") + " = c.tmpl ORDER BY c.new");
    }
    exec(db, "COMMIT");
    sqlite3_close(db);
  }
  fs::rename(partial, path);
}

/// Seconds `cmd` took (stdout and stderr to /dev/null); -1 when it failed.
double time_command(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  const auto t1 = std::chrono::steady_clock::now();
  if (rc != 0) {
    std::fprintf(stderr, "failed (%d): %s\n", rc, cmd.c_str());
    return -1;
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

std::string quoted(const fs::path& p) {
  std::string out(1, '\'');
  out.append(p.string()).push_back('\'');
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path hookscope, dir;
  std::vector<int> sizes{1000, 4000, 16000};
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--hookscope") && has_value) {
      hookscope = argv[++i];
    } else if (!std::strcmp(argv[i], "--dir") && has_value) {
      dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--runs") && has_value) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string part; std::getline(ss, part, ',');) sizes.push_back(std::stoi(part));
    } else {
      std::fprintf(stderr, "usage: %s --hookscope PATH [--dir DIR] [--runs 1000,4000,16000]\n", argv[0]);
      return 2;
    }
  }
  if (hookscope.empty() || sizes.empty()) {
    std::fprintf(stderr, "--hookscope is required\n");
    return 2;
  }
  const bool temp_dir = dir.empty();
  if (temp_dir) dir = fs::temp_directory_path() / ("hookscope-runs-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  struct Command {
    const char* name;
    const char* args;  // after "hookscope CAPTURE"; the output path follows
  };
  std::vector<Command> commands = {
      {"report --json", "report --json"},
      {"stats", "stats --format json -o"},
      {"export chrome", "export --run all --format chrome -o"},  // a folder of run-ID.json files
      {"export csv", "export --run all --format csv -o"},        // a folder of TABLE.csv files
  };
  // The viewer, headless: open the capture and render its timeline and its compare matrix
  // (only with an X display: xvfb-run -a or tools/with_display.sh).
  if (std::getenv("DISPLAY")) {
    commands.push_back({"view timeline", "view --screenshot"});
    commands.push_back({"view compare", "view --view compare --screenshot"});
  }
  std::vector<std::vector<double>> seconds(commands.size());
  for (int n : sizes) {
    const fs::path capture = dir / ("runs-" + std::to_string(n) + ".sqlite");
    if (!fs::exists(capture)) {
      const auto t0 = std::chrono::steady_clock::now();
      write_capture(capture, n);
      std::printf("wrote %d runs in %.1f s: %s (%.1f MB)\n", n,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), capture.c_str(),
                  fs::file_size(capture) / 1e6);
    }
    for (size_t c = 0; c < commands.size(); ++c) {
      const bool png = std::strstr(commands[c].args, "--screenshot") != nullptr;
      const fs::path out = dir / ("out-" + std::to_string(n) + "-" + std::to_string(c) + (png ? ".png" : ""));
      fs::remove_all(out);
      const std::string verb = commands[c].args;
      const std::string cmd = quoted(hookscope) + " " + verb.substr(0, verb.find(' ')) + " " + quoted(capture) +
                              verb.substr(verb.find(' ')) + " " + quoted(out);
      seconds[c].push_back(time_command(cmd));
      fs::remove_all(out);
    }
  }
  std::printf("\n%-16s", "command");
  for (int n : sizes) std::printf(" %9d runs", n);
  for (size_t k = 1; k < sizes.size(); ++k) std::printf(" %8s", (std::to_string(sizes[k] / sizes[k - 1]) + "x ratio").c_str());
  std::printf("\n");
  for (size_t c = 0; c < commands.size(); ++c) {
    std::printf("%-16s", commands[c].name);
    for (double s : seconds[c]) std::printf(" %12.3f s", s);
    for (size_t k = 1; k < seconds[c].size(); ++k) std::printf(" %8.2f", seconds[c][k] / std::max(seconds[c][k - 1], 1e-9));
    std::printf("\n");
  }
  std::printf("ratio: time(N) / time(previous N); linear is the run ratio (4), quadratic its square (16)\n");
  if (temp_dir) fs::remove_all(dir);
  return 0;
}

// `hookscope export` on a LibTorch-engine capture of a tiny transformers-written Llama: the
// Chrome trace checked event by event, loaded by Holistic Trace Analysis (its counts per
// category against SQL over the capture), read back by `hookscope import` with the same rows per
// kind; CSV tables against SQL; and the CLI's flags and errors (--version, -o, did you mean).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include "exports/export_csv.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

struct Capture {
  fs::path dir, db;
  std::vector<int64_t> runs;
  std::string err;  ///< the capture command's stderr
};

// sharded and cpu-offload × eager and default (whole-hook): hook spans, swaps, transfers between
// two devices, module compute, compiled regions, graph breaks, steps and memory counters.
const Capture& capture() {
  static Capture c = [] {
    Capture k;
    k.dir = hs::test::scratch_dir("export-" + std::to_string(getpid()));
    k.db = k.dir / "capture.sqlite";
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                        "--devices", "2", "--scenarios", "sharded,cpu-offload", "--policies", "whole-hook", "--modes",
                        "eager,default", "--fullgraph", "off", "--prompt-ids", "5,17,99,3", "--max-new-tokens", "2",
                        "--repeats", "1", "--warmup", "0", "-o", k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    k.err = r.err;
    for (const auto& run : hs::storage::CaptureReader(k.db).runs()) k.runs.push_back(run.id);
    return k;
  }();
  return c;
}

// Rows per event table of one run.
std::map<std::string, int64_t> table_counts(const fs::path& db, int64_t run) {
  hs::storage::CaptureReader r(db);
  std::map<std::string, int64_t> out;
  for (const auto& t : hs::exports::csv_tables()) out[t] = r.count(t, run);
  return out;
}

// The run with the most kinds: sharded, compiled.
int64_t rich_run() {
  hs::storage::CaptureReader r(capture().db);
  for (const auto& run : r.runs())
    if (run.scenario == "sharded" && run.mode == "default") return run.id;
  throw std::runtime_error("no sharded/default run");
}

void export_chrome_from(const fs::path& db, const fs::path& out) {
  auto r = hookscope({"export", db.string(), "-o", out.string()});
  if (r.exit_code != 0) throw std::runtime_error("export failed: " + r.err);
}

fs::path export_chrome(int64_t run, const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"export", capture().db.string(), "--run", std::to_string(run), "--format", "chrome",
                                "-o", out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = hookscope(args);
  if (r.exit_code != 0) throw std::runtime_error("export failed: " + r.err);
  return out;
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

// The columns of a table, as SQLite declares them.
std::set<std::string> sql_columns(const fs::path& db, const std::string& table) {
  sqlite3* h = nullptr;
  std::set<std::string> out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) throw std::runtime_error("open");
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, ("PRAGMA table_info(" + table + ")").c_str(), -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) out.insert(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

void expect_event_shape(const json& e, std::set<int64_t>& pids, std::set<std::pair<int64_t, int64_t>>& tracks,
                        std::set<int64_t>& named_pids, std::set<std::pair<int64_t, int64_t>>& named_tracks) {
  SCOPED_TRACE(e.dump());
  ASSERT_TRUE(e.is_object());
  ASSERT_TRUE(e["ph"].is_string());
  ASSERT_TRUE(e["name"].is_string());
  ASSERT_TRUE(e["pid"].is_number_integer());
  const std::string ph = e["ph"];
  const int64_t pid = e["pid"];
  if (ph == "M") {
    ASSERT_TRUE(e["args"].is_object());
    if (e["name"] == "process_name") named_pids.insert(pid);
    if (e["name"] == "thread_name") named_tracks.insert({pid, e["tid"].get<int64_t>()});
    EXPECT_TRUE(e["args"].contains("name") || e["args"].contains("sort_index"));
    return;
  }
  ASSERT_TRUE(e["ts"].is_number());
  EXPECT_GE(e["ts"].get<double>(), 0.0);
  if (ph == "C") {
    ASSERT_TRUE(e["args"]["bytes"].is_number_integer());
    pids.insert(pid);
    return;
  }
  ASSERT_TRUE(e["tid"].is_number_integer());
  ASSERT_TRUE(e["cat"].is_string());
  if (ph == "X") {
    ASSERT_TRUE(e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  } else if (ph == "i") {
    EXPECT_EQ(e["s"], "t");
  } else if (ph == "s" || ph == "f") {
    ASSERT_TRUE(e["id"].is_number_integer());
    if (ph == "f") {
      EXPECT_EQ(e["bp"], "e");
    }
  } else {
    ADD_FAILURE() << "unexpected ph " << ph;
  }
  pids.insert(pid);
  tracks.insert({pid, e["tid"].get<int64_t>()});
}

// One `ProfilerStep#N` per generation step, N from 0 in time order, shaped as torch.profiler
// writes it (a user_annotation) on the thread and with the times of the step's own range.
void expect_profiler_steps(const json& doc, std::vector<hs::storage::GenerationStepRow> steps) {
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  const auto ns = [&](const json& us) { return doc["baseTimeNanoseconds"].get<int64_t>() + std::llround(us.get<double>() * 1000.0); };
  std::vector<json> marks, ranges;
  for (const json& e : doc["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name.rfind("ProfilerStep#", 0) == 0) marks.push_back(e);
    if (name.rfind("hookscope::step ", 0) == 0) ranges.push_back(e);
  }
  ASSERT_EQ(marks.size(), steps.size());
  ASSERT_EQ(ranges.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(marks[i].dump());
    EXPECT_EQ(marks[i]["name"], "ProfilerStep#" + std::to_string(i));
    EXPECT_EQ(marks[i]["ph"], "X");
    EXPECT_EQ(marks[i]["cat"], "user_annotation");
    EXPECT_EQ(ns(marks[i]["ts"]), steps[i].start_ns);
    EXPECT_EQ(ns(marks[i]["ts"]) + std::llround(marks[i]["dur"].get<double>() * 1000.0), steps[i].end_ns);
    EXPECT_EQ(marks[i]["pid"], ranges[i]["pid"]);
    EXPECT_EQ(marks[i]["tid"], ranges[i]["tid"]);
  }
}

TEST(Export, ChromeTraceIsKinetoShapedEventByEvent) {
  for (const int64_t run : capture().runs) {
    SCOPED_TRACE("run " + std::to_string(run));
    const fs::path out = export_chrome(run, capture().dir / ("shape-" + std::to_string(run) + ".json"));
    const std::string text = hs::test::read_file(out);
    const json doc = json::parse(text);
    ASSERT_TRUE(doc["traceEvents"].is_array());
    ASSERT_TRUE(doc["deviceProperties"].is_array());
    EXPECT_EQ(doc["distributedInfo"]["rank"], 0);
    ASSERT_TRUE(doc["baseTimeNanoseconds"].is_number_integer());
    EXPECT_EQ(doc["hookscope"]["run"], run);
    // µs with ns precision, written as Kineto writes them: three decimals.
    const std::regex ts(R"re("(ts|dur)": (-?[0-9.]+))re");
    int64_t times = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), ts); it != std::sregex_iterator(); ++it, ++times)
      ASSERT_TRUE(std::regex_match((*it)[2].str(), std::regex(R"(\d+\.\d{3})"))) << (*it)[0];
    EXPECT_GT(times, 0);
    std::set<int64_t> pids, named_pids;
    std::set<std::pair<int64_t, int64_t>> tracks, named_tracks;
    std::map<std::string, int64_t> per_cat, per_ph;
    for (const json& e : doc["traceEvents"]) {
      expect_event_shape(e, pids, tracks, named_pids, named_tracks);
      ++per_ph[e["ph"]];
      if (e["ph"] == "X" || e["ph"] == "i") ++per_cat[e["cat"]];
    }
    for (int64_t pid : pids) EXPECT_TRUE(named_pids.count(pid)) << "process " << pid << " has no process_name";
    for (const auto& t : tracks) EXPECT_TRUE(named_tracks.count(t)) << "track " << t.first << "/" << t.second;
    // Every kind of the run is there, as many times as SQL says.
    hs::storage::CaptureReader r(capture().db);
    auto n = [&](const char* table) { return r.count(table, run); };
    // ... and one ProfilerStep#N per generation step, as torch.profiler names its steps.
    EXPECT_EQ(per_cat["user_annotation"], n("HOOK_EVENTS") + n("WEIGHT_SWAPS") + n("TRANSFERS") + n("DISABLED_SCOPES") +
                                              2 * n("GENERATION_STEPS") + n("COMPILE_REGIONS"));
    expect_profiler_steps(doc, r.generation_steps(run));
    EXPECT_EQ(per_cat["gpu_user_annotation"], n("MODULE_COMPUTE"));
    EXPECT_EQ(per_cat["cpu_instant_event"], n("GRAPH_BREAKS"));
    EXPECT_EQ(per_ph["C"], n("MEMORY_COUNTERS"));
    int64_t moves = 0;
    for (const auto& t : r.transfers(run)) moves += t.bytes > 0 && t.src != t.dst;
    EXPECT_EQ(per_cat["hookscope_transfer"], 2 * moves);
    EXPECT_EQ(per_ph["s"], moves);
    EXPECT_EQ(per_ph["f"], moves);
    EXPECT_GT(n("HOOK_EVENTS"), 0);
    EXPECT_GT(n("GENERATION_STEPS"), 0);
    EXPECT_GT(n("MEMORY_COUNTERS"), 0);
    const auto info = r.run(run);
    if (info.scenario == "sharded") {
      EXPECT_GT(moves, 0);
    }
    if (info.scenario == "cpu-offload") {
      EXPECT_GT(n("WEIGHT_SWAPS"), 0);
    }
    if (info.mode == "default") {
      EXPECT_GT(n("GRAPH_BREAKS"), 0);
    }
  }
}

// Dynamo's graph-break records are instants where Dynamo logged them, on the thread that
// compiled (the one with the run's CPU ops); the trace's base time is the earliest of them, so a
// record logged while compiling, before the profiled generate, is at ts 0, not negative.
TEST(Export, DynamoGraphBreaksAreInstantsOnTheThreadThatCompiled) {
  const fs::path dir = hs::test::scratch_dir("export-dynamo-breaks");
  const fs::path db = dir / "trace.sqlite";
  int64_t run = 0;
  {
    hs::storage::Store store(db);
    run = hs::storage::write_synthetic_trace_run(store).run_id;
    hs::storage::write_dynamo_breaks(store, run);
    store.finalize();
    store.close();
  }
  const fs::path out = dir / "trace.json";
  auto r = hookscope({"export", db.string(), "--run", std::to_string(run), "--format", "chrome", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(hs::test::read_file(out));
  constexpr int64_t base = hs::storage::SyntheticTrace::kTraceBase - hs::storage::kDynamoBreakBefore;
  EXPECT_EQ(doc["baseTimeNanoseconds"], base);
  std::vector<json> marks;
  for (const json& e : doc["traceEvents"])
    if (e.value("name", "").rfind("hookscope::dynamo_graph_break", 0) == 0) marks.push_back(e);
  ASSERT_EQ(marks.size(), 2u);
  for (const json& m : marks) {
    EXPECT_EQ(m["ph"], "i");
    EXPECT_EQ(m["cat"], "cpu_instant_event");
    EXPECT_EQ(m["name"], "hookscope::dynamo_graph_break gb_code=GB0098 function=AlignDevicesHook.pre_forward");
    EXPECT_EQ(m["pid"], 4242);
    EXPECT_EQ(m["tid"], 4243);
    EXPECT_EQ(m["args"]["gb_code"], "GB0098");
    EXPECT_EQ(m["args"]["user_frame"], "/site-packages/accelerate/hooks.py:50");
  }
  EXPECT_DOUBLE_EQ(marks[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(marks[1]["ts"].get<double>(), (hs::storage::kDynamoBreakBefore + hs::storage::kDynamoBreakAt) / 1000.0);
  EXPECT_EQ(marks[1]["args"]["compile_id"], "2/1");
}

// What recording cost a torch engine run's timeline (facts/recording.h) is in the trace's
// "hookscope" metadata under its catalogue key and label: its profiled generate (130 ms) over the
// median of its unrecorded ones (90, 200, 100 ms: 100, where their mean would read 1.00× and the
// inverse 0.77×); null for a run without it (a LibTorch run).
TEST(Export, ATorchRunsTraceSaysWhatRecordingCostItsTimeline) {
  const fs::path dir = hs::test::scratch_dir("export-recording-overhead");
  const fs::path db = dir / "capture.sqlite";
  int64_t torch = 0, libtorch = 0;
  {
    hs::storage::Store store(db);
    hs::storage::add_synthetic_devices(store, 2);
    hs::storage::SyntheticRun s;
    s.devices = 2;
    s.layers = 2;
    s.tokens = 2;
    torch = hs::storage::write_synthetic_run(store, s).run_id;
    libtorch = hs::storage::write_synthetic_run(store, s).run_id;
    hs::storage::set_torch_generate_times(store, torch, 130.0, {90.0, 200.0, 100.0});
    store.set_run_engine(libtorch, "libtorch");
    store.finalize();
    store.close();
  }
  const auto exported = [&](int64_t run) {
    const fs::path out = dir / ("run-" + std::to_string(run) + ".json");
    auto r = hookscope({"export", db.string(), "--run", std::to_string(run), "--format", "chrome", "-o", out.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(hs::test::read_file(out))["hookscope"];
  };
  const json h = exported(torch);
  EXPECT_EQ(h["engine"], "torch");
  const json& o = h["recording_overhead"];
  ASSERT_TRUE(o.is_object()) << h.dump();
  EXPECT_DOUBLE_EQ(o["ratio"].get<double>(), 1.3);
  EXPECT_EQ(o["text"], "1.30×");
  EXPECT_EQ(o["label"], "timeline's generate vs unrecorded");
  EXPECT_EQ(o["profiled_ms"], 130.0);
  EXPECT_EQ(o["unrecorded_median_ms"], 100.0);
  EXPECT_EQ(o["unrecorded_n"], 3);
  const json l = exported(libtorch);
  ASSERT_TRUE(l.contains("recording_overhead")) << l.dump();
  EXPECT_TRUE(l["recording_overhead"].is_null()) << l.dump();
}

TEST(Export, HtaLoadsTheTraceAndCountsWhatSqlCounts) {
  const fs::path one = capture().dir / "hta-one";
  fs::create_directories(one);
  export_chrome(rich_run(), one / "trace.json");
  // --run all: a folder with one gzip file per run, ranked 0..n-1 as HTA wants.
  const fs::path all = capture().dir / "hta-all";
  auto r = hookscope({"export", capture().db.string(), "--run", "all", "--format", "chrome", "--gzip", "-o", all.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const fs::path& dir : {one, all}) {
    const std::string out = hs::test::run_oracle("hta_counts.py", {"--trace-dir", dir.string(), "--db", capture().db.string()});
    const json got = json::parse(last_line(out));
    ASSERT_EQ(got.size(), dir == one ? 1u : capture().runs.size()) << got.dump();
    for (const auto& [rank, v] : got.items()) {
      SCOPED_TRACE(dir.string() + " rank " + rank + " run " + v["run"].dump());
      EXPECT_FALSE(v["hta"].empty());
      EXPECT_EQ(v["hta"], v["sql"]);
    }
  }
}

// Exports run `run` of `db` and imports the trace into a new capture; returns its path.
fs::path round_trip(const fs::path& db, int64_t run, const fs::path& dir, const std::string& name) {
  const fs::path trace = dir / (name + ".json.gz"), back = dir / (name + ".sqlite");
  auto e = hookscope({"export", db.string(), "--run", std::to_string(run), "--format", "chrome", "-o", trace.string()});
  if (e.exit_code != 0) throw std::runtime_error("export failed: " + e.err);
  auto i = hookscope({"import", trace.string(), "-o", back.string()});
  if (i.exit_code != 0) throw std::runtime_error("import failed: " + i.err);
  EXPECT_EQ(i.err.find("skipped"), std::string::npos) << i.err;
  EXPECT_EQ(i.err.find("unknown kinds"), std::string::npos) << i.err;
  return back;
}

TEST(Export, ImportFlagsOverrideTheCellATraceNames) {
  const fs::path dir = capture().dir / "cell-flags";
  fs::create_directories(dir);
  const int64_t run = rich_run();
  const fs::path trace = export_chrome(run, dir / "t.json");
  auto i = hookscope({"import", trace.string(), "-o", (dir / "x.sqlite").string(), "--scenario", "mine"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const auto back = hs::storage::CaptureReader(dir / "x.sqlite").run(1);
  EXPECT_EQ(back.scenario, "mine");
  EXPECT_EQ(back.policy, "") << "a flag given: the trace's cell is not taken at all";
  // A "hookscope" object with one field off (here an unknown mode) is not taken at all either.
  json doc = json::parse(hs::test::read_file(trace));
  doc["hookscope"]["mode"] = "bogus\u001b[2J";
  std::ofstream(dir / "bad.json") << doc.dump();
  i = hookscope({"import", (dir / "bad.json").string(), "-o", (dir / "y.sqlite").string()});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.err.find("does not name a cell hookscope writes"), std::string::npos) << i.err;
  const auto kept = hs::storage::CaptureReader(dir / "y.sqlite").run(1);
  EXPECT_EQ(kept.scenario, "imported");
  EXPECT_EQ(kept.mode, "");
  EXPECT_EQ(kept.policy, "");
}

// The model the run's engine described travels with the trace ("hookscope"."model_info") and
// comes back as the imported run's model, which `report` shows; a description with a field
// hookscope never writes is dropped whole, with a note.
TEST(Export, TheRunsModelDescriptionComesBackWithTheImport) {
  const fs::path dir = capture().dir / "model-info";
  fs::create_directories(dir);
  const int64_t run = rich_run();
  const json want = hs::storage::CaptureReader(capture().db).run(run).results.at("model");
  ASSERT_TRUE(want.at("params").is_number());
  const fs::path trace = export_chrome(run, dir / "t.json");
  auto i = hookscope({"import", trace.string(), "-o", (dir / "x.sqlite").string()});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_EQ(hs::storage::CaptureReader(dir / "x.sqlite").run(1).results.value("model", json()), want);
  auto rep = hookscope({"report", (dir / "x.sqlite").string(), "--json", (dir / "x.json").string()});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(hs::test::read_json(dir / "x.json")["model"]["params"], want["params"]);
  for (const auto& [key, value] : {std::pair{std::string("params"), json(-5)}, std::pair{std::string("evil"), json("x")},
                                   std::pair{std::string("id"), json("a\u001b[2J")}}) {
    json doc = json::parse(hs::test::read_file(trace));
    doc["hookscope"]["model_info"][key] = value;
    std::ofstream(dir / "bad.json") << doc.dump();
    fs::remove(dir / "y.sqlite");
    i = hookscope({"import", (dir / "bad.json").string(), "-o", (dir / "y.sqlite").string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    EXPECT_NE(i.err.find("is not a model description hookscope writes"), std::string::npos) << key << ": " << i.err;
    EXPECT_FALSE(hs::storage::CaptureReader(dir / "y.sqlite").run(1).results.contains("model")) << key;
  }
}

// Perfetto and chrome://tracing draw a track's slices as a stack: each must nest inside the one
// it starts in. The LibTorch engine's regions end inside hook spans, so they have a track of
// their own ("compiled regions (thread T)").
TEST(Export, EverySliceNestsOnItsTrack) {
  const fs::path dir = capture().dir / "nesting";
  fs::create_directories(dir);
  for (const int64_t run : capture().runs) {
    SCOPED_TRACE("run " + std::to_string(run));
    const json doc = json::parse(hs::test::read_file(export_chrome(run, dir / ("run-" + std::to_string(run) + ".json"))));
    std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;  // ns
    std::set<std::string> track_names;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name") track_names.insert(e["args"]["name"].get<std::string>());
      if (e["ph"] != "X") continue;
      const auto ns = [](double us) { return static_cast<int64_t>(std::llround(us * 1000.0)); };
      const int64_t start = ns(e["ts"].get<double>());
      tracks[{e["pid"], e["tid"]}].push_back({start, start + ns(e["dur"].get<double>())});
    }
    int64_t crossings = 0;
    for (auto& [track, slices] : tracks) {
      std::sort(slices.begin(), slices.end(),
                [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
      std::vector<int64_t> open;  // ends of the enclosing slices
      for (const auto& [start, end] : slices) {
        while (!open.empty() && open.back() <= start) open.pop_back();
        if (!open.empty() && end > open.back()) {
          if (++crossings <= 3) ADD_FAILURE() << "slice [" << start << ", " << end << ") crosses the end " << open.back()
                                              << " of the slice it starts in, on track " << track.first << "/"
                                              << track.second;
          continue;
        }
        open.push_back(end);
      }
    }
    EXPECT_EQ(crossings, 0);
    if (hs::storage::CaptureReader(capture().db).regions(run).size() > 0) {
      bool region_track = false;
      for (const auto& n : track_names) region_track |= n.rfind("compiled regions (thread ", 0) == 0;
      EXPECT_TRUE(region_track) << testing::PrintToString(track_names);
    }
  }
}

TEST(Export, ImportReadsTheTraceBackWithTheSameRowsPerKind) {
  const fs::path dir = capture().dir / "round-trip";
  fs::create_directories(dir);
  for (const int64_t run : capture().runs) {
    SCOPED_TRACE("run " + std::to_string(run));
    const auto before = table_counts(capture().db, run);
    const fs::path once = round_trip(capture().db, run, dir, "once-" + std::to_string(run));
    const auto after = table_counts(once, 1);
    // The run comes back under its own cell and engine (the trace's "hookscope" object names them).
    const auto orig = hs::storage::CaptureReader(capture().db).run(run);
    const auto back = hs::storage::CaptureReader(once).run(1);
    EXPECT_EQ(back.scenario, orig.scenario);
    EXPECT_EQ(back.policy, orig.policy);
    EXPECT_EQ(back.mode, orig.mode);
    EXPECT_EQ(back.fullgraph, orig.fullgraph);
    EXPECT_EQ(back.model, orig.model);
    EXPECT_EQ(back.engine, orig.engine) << "the trace's hookscope.facts give the run its engine back";
    // Each hookscope range is also kept as a CPU_OPS row by the importer (as for any trace).
    int64_t ranges = 0;
    for (const char* t : {"HOOK_EVENTS", "WEIGHT_SWAPS", "TRANSFERS", "DISABLED_SCOPES", "GENERATION_STEPS",
                          "COMPILE_REGIONS", "MODULE_COMPUTE"})
      ranges += before.at(t);
    ranges += before.at("GENERATION_STEPS");  // the ProfilerStep#N ranges
    for (const auto& [table, n] : before) {
      const int64_t want = table == "CPU_OPS" ? n + ranges : n;
      EXPECT_EQ(after.at(table), want) << table;
    }
    // A second trip changes nothing: the ranges now come back through CPU_OPS, written once.
    const fs::path twice = round_trip(once, 1, dir, "twice-" + std::to_string(run));
    EXPECT_EQ(table_counts(twice, 1), after);
  }
}

// A GPU run as torch.profiler records one (this machine has no GPU): CUDA calls launching
// kernels and copies on two devices, tied by correlation ids and External ids.
constexpr const char* kGpuTrace = R"JSON({
  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150012411904, "computeMajor": 9,
                        "computeMinor": 0, "numSms": 132, "warpSize": 32, "maxThreadsPerMultiprocessor": 2048}],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4243, "ts": 10.000, "dur": 50.500,
   "args": {"External id": 7, "Sequence number": 11, "Input Dims": [[4, 8], [8, 16]]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4243, "ts": 20.100, "dur": 5.250,
   "args": {"External id": 7, "correlation": 101}},
  {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 30.000, "dur": 2.001,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 101, "grid": [64, 2, 1], "block": [128, 1, 1]}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "aten::mm", "pid": 0, "tid": 7, "ts": 29.999, "dur": 2.003},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 4242, "tid": 4243, "ts": 40.000, "dur": 3.000,
   "args": {"correlation": 102}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 41.000,
   "dur": 1.500, "args": {"device": 0, "context": 1, "stream": 7, "correlation": 102, "bytes": 4096}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 52.000, "dur": 0.250,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 106, "bytes": 512}},
  {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 4242, "tid": 4243, "ts": 80.000, "dur": 2.000,
   "args": {"External id": 9, "correlation": 108}},
  {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 1, "tid": 13, "ts": 85.000, "dur": 1.000,
   "args": {"device": 1, "context": 2, "stream": 13, "correlation": 108, "grid": [8, 1, 1], "block": [128, 1, 1]}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 90.000, "dur": 1.000,
   "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 109, "device": 0, "context": 1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4243, "ts": 95.000,
   "args": {"Total Allocated": 4096, "Device Id": 0, "Device Type": 1}}
  ]
})JSON";

TEST(Export, GpuRecordsGoOnTheirDeviceAndStreamWithFlowsFromTheirLaunches) {
  const fs::path dir = capture().dir / "gpu";
  fs::create_directories(dir);
  std::ofstream(dir / "gpu.json") << kGpuTrace;
  auto r = hookscope({"import", (dir / "gpu.json").string(), "-o", (dir / "gpu.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path once = round_trip(dir / "gpu.sqlite", 1, dir, "gpu-once");
  EXPECT_EQ(table_counts(once, 1), table_counts(dir / "gpu.sqlite", 1));
  hs::storage::CaptureReader back(once);
  ASSERT_EQ(back.kernels(1).size(), 2u);
  EXPECT_EQ(back.kernels(1)[1].correlation_id, 108u);
  EXPECT_EQ(back.external_correlations(1).size(), 2u);
  // In the file: each GPU record on (pid = device, tid = stream), a flow from each launch.
  r = hookscope({"export", (dir / "gpu.sqlite").string(), "-o", (dir / "hta" / "gpu.json").string()});
  EXPECT_NE(r.exit_code, 0) << "the folder does not exist";
  fs::create_directories(dir / "hta");
  export_chrome_from(dir / "gpu.sqlite", dir / "hta" / "gpu.json");
  const json trace = json::parse(hs::test::read_file(dir / "hta" / "gpu.json"));
  std::map<std::string, int> flows;
  std::map<std::string, std::set<std::pair<int64_t, int64_t>>> tracks_of;  // category -> (pid, tid)
  for (const json& e : trace["traceEvents"]) {
    if (e["cat"] == "kernel") {
      EXPECT_EQ(e["pid"], e["args"]["device"]);
      EXPECT_EQ(e["tid"], e["args"]["stream"]);
    }
    if (e["cat"] == "ac2g") ++flows[e["ph"]];
    if (e["ph"] == "X")
      tracks_of[e["cat"].get<std::string>()].insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
  }
  // The traced process keeps its pid (4242) for its ops and CUDA calls; a GPU annotation stays
  // on its device and stream (pid 0, tid 7), as in the trace imported.
  using Tracks = std::set<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(tracks_of["cpu_op"], (Tracks{{4242, 4243}}));
  EXPECT_EQ(tracks_of["cuda_runtime"], (Tracks{{4242, 4243}}));
  EXPECT_EQ(tracks_of["cuda_driver"], (Tracks{{4242, 4243}}));
  EXPECT_EQ(tracks_of["gpu_user_annotation"], (Tracks{{0, 7}}));
  EXPECT_EQ(flows["s"], 3);  // two kernel launches and a copy; the memset and the sync were launched outside
  EXPECT_EQ(flows["f"], 3);
  EXPECT_EQ(trace["deviceProperties"][0]["name"], "NVIDIA H200");
  const json hta = json::parse(last_line(
      hs::test::run_oracle("hta_counts.py", {"--trace-dir", (dir / "hta").string(), "--db", (dir / "gpu.sqlite").string()})));
  EXPECT_EQ(hta["0"]["hta"], hta["0"]["sql"]);
  EXPECT_EQ(hta["0"]["hta"]["kernel"], 2);
}

// HTA's analyses on exported runs, checked against the capture: the iterations HTA finds are the
// run's generation steps (ProfilerStep#N), each with the hook work SQL puts inside it. On a CPU
// run (no GPU kernels) HTA's temporal, idle-time and kernel breakdowns have nothing to measure:
// the README says so, and this says it still holds.
TEST(Export, HtaFindsOneIterationPerGenerationStep) {
  const fs::path dir = capture().dir / "hta-steps";
  fs::create_directories(dir);
  const int64_t run = rich_run();
  export_chrome(run, dir / "trace.json");
  const json got = json::parse(last_line(hs::test::run_oracle("hta_counts.py", {"--trace-dir", dir.string(), "--analyses"})));
  const json& v = got.at("0");
  hs::storage::CaptureReader r(capture().db);
  auto steps = r.generation_steps(run);
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  ASSERT_GE(steps.size(), 2u);
  ASSERT_EQ(v["steps"].size(), steps.size()) << v.dump();
  // Every hookscope range the run recorded, by its start: what HTA assigns to an iteration.
  std::vector<int64_t> starts;
  for (const auto& h : r.hook_events(run)) starts.push_back(h.start_ns);
  for (const auto& s : r.weight_swaps(run)) starts.push_back(s.start_ns);
  for (const auto& t : r.transfers(run)) starts.push_back(t.start_ns);
  for (const auto& s : r.disabled_scopes(run)) starts.push_back(s.start_ns);
  for (const auto& c : r.regions(run)) starts.push_back(c.start_ns);
  int64_t inside_steps = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = v["steps"][i];
    SCOPED_TRACE(s.dump());
    EXPECT_EQ(s["n"], i);
    EXPECT_EQ(s["start_ns"], steps[i].start_ns);
    EXPECT_EQ(s["end_ns"], steps[i].end_ns);
    const int64_t want = std::count_if(starts.begin(), starts.end(),
                                       [&](int64_t t) { return t >= steps[i].start_ns && t < steps[i].end_ns; });
    EXPECT_EQ(s["annotations"], want);
    inside_steps += want;
  }
  EXPECT_GT(inside_steps, 0);
  // As torch.profiler's traces: HTA leaves out the last step, unfinished in a real one.
  std::vector<int64_t> all_but_last(steps.size() - 1);
  std::iota(all_but_last.begin(), all_but_last.end(), 0);
  EXPECT_EQ(v["iterations"], all_but_last);
  EXPECT_EQ(v["profiler_steps"], all_but_last);
  for (const char* analysis : {"temporal", "idle"}) EXPECT_TRUE(v[analysis].contains("error")) << analysis << ": " << v.dump();
  EXPECT_EQ(v["kernels"], json::object());
}

// A torch engine run on a GPU, as its trace is shaped (this machine has none): per generate step a
// `hookscope::step` range holding a hook, an op launching a GEMM, a host-to-device copy and a fused
// kernel on stream 7. Step k's GEMM runs 100 + 10k µs; the steps are 1000 µs apart.
// With `first_profiler_step` >= 0 each step also lies in torch.profiler's own
// `ProfilerStep#N` (N from that number on), as a trace recorded with a schedule has them.
std::string gpu_steps_trace(int steps, int first_profiler_step = -1) {
  json events = json::array();
  auto x = [&](const char* cat, const std::string& name, int pid, int tid, double ts, double dur, json args) {
    json e{{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
    if (!args.is_null()) e["args"] = std::move(args);
    events.push_back(std::move(e));
  };
  for (int k = 0; k < steps; ++k) {
    const double s = 100 + 1000.0 * k;
    const int c = 1000 + 10 * k;
    const auto gpu = [](int corr) { return json{{"device", 0}, {"context", 1}, {"stream", 7}, {"correlation", corr}}; };
    if (first_profiler_step >= 0)
      x("user_annotation", "ProfilerStep#" + std::to_string(first_profiler_step + k), 4242, 4243, s - 1, 950, nullptr);
    x("user_annotation", "hookscope::step step=" + std::to_string(k) + " token=" + std::to_string(7 + k), 4242, 4243, s,
      900, nullptr);
    x("user_annotation", "hookscope::pre_forward hook=AlignDevicesHook module=model.layers.0 device=cuda:0", 4242, 4243,
      s + 5, 3, nullptr);
    x("cpu_op", "aten::mm", 4242, 4243, s + 10, 190, {{"External id", 10 + k}});
    x("cuda_runtime", "cudaLaunchKernel", 4242, 4243, s + 20, 10, {{"External id", 10 + k}, {"correlation", c}});
    x("kernel", "gemm_kernel", 0, 7, s + 50, 100 + 10 * k, gpu(c));
    x("cuda_runtime", "cudaMemcpyAsync", 4242, 4243, s + 300, 5, {{"correlation", c + 1}});
    x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, s + 310, 20,
      [&] { json a = gpu(c + 1); a["bytes"] = 4096; return a; }());
    x("cuda_runtime", "cudaLaunchKernel", 4242, 4243, s + 400, 5, {{"correlation", c + 2}});
    x("kernel", "triton_poi_fused_add_0", 0, 7, s + 500, 20, gpu(c + 2));
  }
  return json{{"deviceProperties", json::array({{{"id", 0}, {"name", "NVIDIA H200"}, {"totalGlobalMem", 150012411904},
                                                  {"computeMajor", 9}, {"computeMinor", 0}, {"numSms", 132}}})},
              {"distributedInfo", {{"backend", "nccl"}, {"rank", 0}, {"world_size", 1}}},
              {"baseTimeNanoseconds", 1700000000000000000},
              {"traceEvents", events}}
      .dump(1);
}

// The union of [start, end) intervals: their total length.
int64_t busy(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  int64_t total = 0, end = INT64_MIN;
  for (const auto& [s, e] : v) {
    if (s >= end) total += e - s, end = e;
    else if (e > end) total += e - end, end = e;
  }
  return total;
}

// HTA's temporal, idle-time and kernel breakdowns on an exported GPU run, each figure against
// the capture: HTA keeps what the ops of every iteration but the last launched (torch.profiler's
// last step is unfinished), so they hold only where the ProfilerStep#N are the run's steps; and
// per iteration, the kernels its launches started.
TEST(Export, HtaTemporalIdleAndKernelBreakdownsOnAGpuRunMatchItsSteps) {
  const fs::path dir = capture().dir / "hta-gpu-steps";
  fs::create_directories(dir / "trace");
  std::ofstream(dir / "gpu.json") << gpu_steps_trace(4);
  auto r = hookscope({"import", (dir / "gpu.json").string(), "-o", (dir / "gpu.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  export_chrome_from(dir / "gpu.sqlite", dir / "trace" / "gpu.json");
  const json v = json::parse(last_line(hs::test::run_oracle("hta_counts.py", {"--trace-dir", (dir / "trace").string(), "--analyses"})))
                     .at("0");
  hs::storage::CaptureReader rd(dir / "gpu.sqlite");
  auto steps = rd.generation_steps(1);
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  ASSERT_EQ(steps.size(), 4u);
  expect_profiler_steps(hs::test::read_json(dir / "trace" / "gpu.json"), steps);
  std::map<uint32_t, int64_t> launched_at;  // correlation -> the launching call's start
  for (const auto& c : rd.runtime_calls(1)) launched_at[c.correlation_id] = c.start_ns;
  // What HTA keeps: the GPU work launched before the last step began.
  const int64_t last = steps.back().start_ns;
  std::vector<std::pair<int64_t, int64_t>> all, compute;
  std::map<std::string, int64_t> per_kernel;
  int64_t first = INT64_MAX, end = INT64_MIN;
  auto keep = [&](uint32_t corr, int64_t s, int64_t e, const std::string& name, bool is_compute) {
    if (!launched_at.count(corr) || launched_at[corr] >= last) return;
    all.push_back({s, e});
    if (is_compute) compute.push_back({s, e});
    per_kernel[name] += e - s;
    first = std::min(first, s), end = std::max(end, e);
  };
  for (const auto& k : rd.kernels(1)) keep(k.correlation_id, k.start_ns, k.end_ns, k.demangled_name, true);
  for (const auto& m : rd.memcpys(1)) keep(m.correlation_id, m.start_ns, m.end_ns, "Memcpy HtoD (Pageable -> Device)", false);
  ASSERT_EQ(all.size(), 9u);
  const json& t = v["temporal"];
  ASSERT_FALSE(t.contains("error")) << t.dump();
  EXPECT_EQ(t["kernel_time_ns"], end - first);
  EXPECT_EQ(t["idle_time_ns"], end - first - busy(all));
  EXPECT_EQ(t["compute_time_ns"], busy(compute));
  EXPECT_EQ(t["non_compute_time_ns"], busy(all) - busy(compute));
  // One stream: its idle intervals add up to the temporal breakdown's idle time.
  ASSERT_FALSE(v["idle"].contains("error")) << v["idle"].dump();
  int64_t idle = 0;
  for (const auto& [category, ns] : v["idle"].at("7").items()) idle += ns.get<int64_t>();
  EXPECT_EQ(idle, t["idle_time_ns"].get<int64_t>());
  EXPECT_EQ(v["kernels"], json(per_kernel));
  // Per iteration (the last one included): the kernels its step's launches started.
  ASSERT_EQ(v["steps"].size(), steps.size()) << v.dump();
  for (size_t i = 0; i < steps.size(); ++i) {
    int64_t n = 0, ns = 0;
    for (const auto& k : rd.kernels(1))
      if (launched_at[k.correlation_id] >= steps[i].start_ns && launched_at[k.correlation_id] < steps[i].end_ns)
        ++n, ns += k.end_ns - k.start_ns;
    const json& s = v["steps"][i];
    EXPECT_EQ(s["start_ns"], steps[i].start_ns);
    EXPECT_EQ(s["kernels"], n) << s.dump();
    EXPECT_EQ(s["kernel_ns"], ns) << s.dump();
    EXPECT_EQ(s["annotations"], 1) << "the step's pre_forward";
  }
  EXPECT_EQ(v["iterations"], json({0, 1, 2}));
}

// A trace recorded with torch.profiler's own steps keeps them, numbers and all: the export
// writes them once (through the run's CPU ops) and makes none of its own; HTA's iterations are
// those numbers.
TEST(Export, ATracesOwnProfilerStepsAreKept) {
  const fs::path dir = capture().dir / "own-profiler-steps";
  fs::create_directories(dir / "trace");
  std::ofstream(dir / "gpu.json") << gpu_steps_trace(3, 10);
  auto r = hookscope({"import", (dir / "gpu.json").string(), "-o", (dir / "gpu.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  export_chrome_from(dir / "gpu.sqlite", dir / "trace" / "gpu.json");
  std::vector<std::string> names;
  const json doc = hs::test::read_json(dir / "trace" / "gpu.json");
  for (const json& e : doc["traceEvents"])
    if (e.value("name", "").rfind("ProfilerStep#", 0) == 0) names.push_back(e["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"ProfilerStep#10", "ProfilerStep#11", "ProfilerStep#12"}));
  const json v = json::parse(last_line(hs::test::run_oracle("hta_counts.py", {"--trace-dir", (dir / "trace").string(), "--analyses"})))
                     .at("0");
  EXPECT_EQ(v["iterations"], json({10, 11}));
  ASSERT_EQ(v["steps"].size(), 3u);
  EXPECT_EQ(v["steps"][2]["n"], 12);
}

// RFC 4180: fields separated by commas, quoted fields with doubled quotes, CRLF line ends.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') rows.back().back() += '"', ++i;
      else if (c == '"') quoted = false;
      else rows.back().back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.emplace_back(1);
      ++i;
    } else {
      rows.back().back() += c;
    }
  }
  if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
  return rows;
}

TEST(Export, CsvTablesHaveTheirColumnsAndSqlsRowCounts) {
  const int64_t run = rich_run();
  const fs::path dir = capture().dir / "csv";
  auto r = hookscope({"export", capture().db.string(), "--run", std::to_string(run), "--format", "csv", "-o", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto counts = table_counts(capture().db, run);
  hs::storage::CaptureReader reader(capture().db);
  int files = 0;
  for (const auto& [table, n] : counts) {
    const fs::path f = dir / (table + ".csv");
    EXPECT_EQ(fs::exists(f), n > 0) << table;  // default: every event table with rows
    if (!fs::exists(f)) continue;
    ++files;
    const auto rows = parse_csv(hs::test::read_file(f));
    ASSERT_FALSE(rows.empty()) << table;
    EXPECT_EQ(rows[0][0], "runId");
    EXPECT_EQ(static_cast<int64_t>(rows.size()) - 1, n) << table;
    for (const auto& row : rows) ASSERT_EQ(row.size(), rows[0].size()) << table;
    // Every header is a column of the table (nsys' own columns are left out).
    const auto columns = sql_columns(capture().db, table);
    for (const auto& col : rows[0]) EXPECT_TRUE(columns.count(col)) << table << "." << col;
  }
  EXPECT_GE(files, 8);
  // Graph-break reasons hold spaces, backquotes and parentheses: quoted as RFC 4180 says, read back whole.
  const auto breaks = parse_csv(hs::test::read_file(dir / "GRAPH_BREAKS.csv"));
  const auto want = reader.graph_breaks(run);
  ASSERT_EQ(breaks.size(), want.size() + 1);
  const auto col = std::find(breaks[0].begin(), breaks[0].end(), "reasonId") - breaks[0].begin();
  ASSERT_LT(static_cast<size_t>(col), breaks[0].size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(breaks[i + 1][col], want[i].reason);
  // --tables names tables either way; --run all adds every run's rows; a named empty table gets its header.
  const fs::path some = capture().dir / "csv-some";
  r = hookscope({"export", capture().db.string(), "--run", "all", "--format", "csv", "--tables",
                 "hook_events,TRANSFERS,CUPTI_ACTIVITY_KIND_KERNEL", "-o", some.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(some)) written.insert(e.path().filename().string());
  EXPECT_EQ(written, (std::set<std::string>{"HOOK_EVENTS.csv", "TRANSFERS.csv", "CUPTI_ACTIVITY_KIND_KERNEL.csv"}));
  int64_t hooks = 0;
  for (int64_t id : capture().runs) hooks += reader.count("HOOK_EVENTS", id);
  EXPECT_EQ(static_cast<int64_t>(parse_csv(hs::test::read_file(some / "HOOK_EVENTS.csv")).size()) - 1, hooks);
  EXPECT_EQ(parse_csv(hs::test::read_file(some / "CUPTI_ACTIVITY_KIND_KERNEL.csv")).size(), 1u);
}

TEST(ExportCli, BadArgumentsSayWhatIsWrongAndNeverTouchTheCapture) {
  const std::string db = capture().db.string();
  const std::string before = hs::test::read_file(db);
  const fs::path dir = capture().dir / "cli";
  fs::create_directories(dir);
  auto r = hookscope({"export", db, "--run", "999", "-o", (dir / "x.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no such run"), std::string::npos) << r.err;
  r = hookscope({"export", db, "--run", "three", "-o", (dir / "x.json").string()});
  EXPECT_EQ(r.exit_code, 2) << "a malformed value is a usage error";
  EXPECT_NE(r.err.find("neither a run id nor 'all'"), std::string::npos) << r.err;
  r = hookscope({"export", db, "-o", (dir / "x.json").string()});  // several runs, none named
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("give --run ID or --run all"), std::string::npos) << r.err;
  r = hookscope({"export", db, "--run", "1", "--format", "xml", "-o", (dir / "x.json").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("chrome"), std::string::npos) << r.err;
  r = hookscope({"export", db, "--run", "1", "--format", "csv", "--tables", "NOPE", "-o", (dir / "csv").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("HOOK_EVENTS"), std::string::npos) << r.err;
  r = hookscope({"export", db, "--run", "1", "-o", db});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is the capture being exported"), std::string::npos) << r.err;
  r = hookscope({"export", db, "--run", "1", "--format", "chrome", "--tables", "HOOK_EVENTS", "-o", (dir / "x.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(fs::exists(dir / "x.json"));
  EXPECT_EQ(hs::test::read_file(db), before);
  // --gzip appends .gz and writes gzip.
  r = hookscope({"export", db, "--run", "1", "--gzip", "-o", (dir / "z.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gz = hs::test::read_file(dir / "z.json.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
}

TEST(ExportCli, CaptureTakesDashOAndSaysHowToOpenTheResult) {
  const std::string db = capture().db.string();
  EXPECT_NE(capture().err.find("hookscope report " + db), std::string::npos) << capture().err;
  EXPECT_NE(capture().err.find("hookscope view " + db), std::string::npos) << capture().err;
  EXPECT_NE(capture().err.find("hookscope export " + db + " --run all --format chrome"), std::string::npos) << capture().err;
}

TEST(CliFlags, VersionNamesHookscopeAndTorch) {
  auto r = hookscope({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hookscope 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LibTorch 2."), std::string::npos) << r.out;
}

TEST(CliFlags, NearMissFlagsAndCommandsGetADidYouMean) {
  auto r = hookscope({"capture", "--model", "x", "--scenarioz", "sharded"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean --scenarios?"), std::string::npos) << r.err;
  r = hookscope({"export", "f.sqlite", "--fromat", "csv", "-o", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean --format?"), std::string::npos) << r.err;
  r = hookscope({"report", "f.sqlite", "--markdwn", "x.md"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean --markdown?"), std::string::npos) << r.err;
  r = hookscope({"captur", "--model", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean 'capture'?"), std::string::npos) << r.err;
  r = hookscope({"capture", "--model", "x", "--zzzzzzzzz"});  // nothing close: no guess
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  r = hookscope({"frobnicate"});  // no command at all: the commands listed, not "a subcommand is required"
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'frobnicate' is no command; the commands are: generate, plan, capture"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("A subcommand is required"), std::string::npos) << r.err;
}

TEST(CliFlags, OutOfRangeAndEmptyValuesNameTheFlag) {
  // Usage errors (exit 2) naming the flag and the value, before any model is read.
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--warmup", "-1"}, {"--repeats", "0"}, {"--max-new-tokens", "0"}, {"--repeats", "two"}}) {
    auto r = hookscope({"capture", "--model", "no-such-model", flag, value, "--out", "x.sqlite"});
    EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(value), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 400u) << "a short message: " << r.err;
  }
  // An empty value names nothing: refused, never taken as "use the default".
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"capture", "--model", "m", "--keep-offload-dir", "", "--out", "x.sqlite"},
           {"capture", "--model", "m", "--out", " "},
           {"report", "f.sqlite", "--markdown", ""},
           {"export", "f.sqlite", "--format", "csv", "-o", ""}}) {
    auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("an empty value names nothing"), std::string::npos) << r.err;
  }
}

}  // namespace

// Every output of the reading commands is checked against the checkpoint the capture's runs were
// made from (RUNS.model): naming one of its files, or a link to one, is refused before anything is
// written, as `capture --out` refuses it.
TEST(ExportCli, NoOutputReplacesAFileOfTheCapturedModel) {
  const std::string db = capture().db.string();
  const fs::path model = hs::test::tiny_checkpoint("tiny-llama");
  const fs::path config = model / "config.json";
  const std::string before = hs::test::read_file(config);
  const fs::path dir = capture().dir / "model-outputs";
  fs::create_directories(dir);
  fs::remove(dir / "link.json");
  fs::create_symlink(config, dir / "link.json");
  const std::string run = std::to_string(capture().runs.front());
  const std::vector<std::vector<std::string>> commands = {
      {"export", db, "--run", run, "-o", config.string()},
      {"export", db, "--run", run, "-o", (dir / "link.json").string()},
      {"report", db, "--markdown", config.string()},
      {"report", db, "--json", (dir / "link.json").string()},
      {"stats", db, "-o", config.string()},
  };
  for (const auto& args : commands) {
    const auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << " " << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("is (or links to) the model's file " + config.string()), std::string::npos) << r.err;
  }
  EXPECT_EQ(hs::test::read_file(config), before);
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
}

// The one output rule: no command writes into the folder a capture's runs were made from, under
// any name (the folder itself, a new file in it, a link to it), and every refusal reads the same,
// naming the flag, before anything is written.
TEST(ExportCli, NoCommandWritesIntoTheCapturedModelsFolder) {
  const std::string db = capture().db.string();
  const fs::path model = hs::test::tiny_checkpoint("tiny-llama");
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(model)) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> before = listing();
  const fs::path dir = hs::test::scratch_dir("model-folder-outputs");
  fs::create_directory_symlink(model, dir / "model-link");
  fs::create_symlink(model / "not-yet.md", dir / "dangling.md");  // writing through it would create the target
  const std::string run = std::to_string(capture().runs.front());
  const std::vector<std::vector<std::string>> commands = {
      {"report", db, "--markdown", (dir / "r.md").string(), "--assets", model.string()},
      {"report", db, "--markdown", (dir / "r.md").string(), "--assets", (model / "assets").string()},
      {"report", db, "--markdown", (dir / "r.md").string(), "--assets", (dir / "model-link" / "assets").string()},
      {"report", db, "--markdown", (model / "report.md").string()},
      {"report", db, "--html", (dir / "model-link" / "report.html").string()},
      {"report", db, "--markdown", (dir / "dangling.md").string()},
      {"stats", db, "-o", (model / "s").string()},
      {"stats", db, "--format", "csv", "-o", (model / "s").string()},
      {"export", db, "--run", "all", "-o", model.string()},
      {"export", db, "--run", run, "-o", (model / "trace.json").string()},
      {"export", db, "--format", "csv", "-o", (model / "csv").string()},
      {"view", db, "--screenshot", (model / "v.png").string()},
      {"view", db, "--screenshot", (dir / "v.png").string(), "--layout", (dir / "model-link" / "layout.json").string()},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + " " + args[args.size() - 2] + " " + args.back());
    const auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(args[args.size() - 2] + ": " + args.back() + " is or lies inside the model's folder " +
                         model.string() + " (a run of " + db + " was made from it); hookscope never writes into a "
                         "model's folder"),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(listing(), before) << "nothing was written into the model's folder";
}

// A capture made with --model given relative to its folder keeps the model's files safe too,
// from wherever the reading command runs.
TEST(ExportCli, AModelNamedRelativeToTheCapturesFolderIsKeptSafeToo) {
  const fs::path dir = hs::test::scratch_dir("relative-model");
  fs::copy(hs::test::tiny_checkpoint("tiny-llama"), dir / "m1", fs::copy_options::recursive);
  const std::string before = hs::test::read_file(dir / "m1" / "config.json");
  const auto cap = hs::test::run(
      {"bash", "-c",
       "cd '" + dir.string() + "' && '" + hs::test::cli() +
           "' capture --engine libtorch --model m1 --devices 2 --scenarios sharded --policies whole-hook --modes eager "
           "--prompt-ids 5,17 --max-new-tokens 1 --repeats 1 --warmup 0 --out rel.sqlite"});
  ASSERT_EQ(cap.exit_code, 0) << cap.err;
  for (const std::string& cmd : {std::string("report rel.sqlite --json m1/config.json"),
                                 std::string("stats rel.sqlite -o m1/config.json"),
                                 std::string("report rel.sqlite --markdown ../relative-model/m1/config.json")}) {
    SCOPED_TRACE(cmd);
    const auto r = hs::test::run({"bash", "-c", "cd '" + dir.string() + "' && '" + hs::test::cli() + "' " + cmd});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("is (or links to) the model's file"), std::string::npos) << r.err;
  }
  EXPECT_EQ(hs::test::read_file(dir / "m1" / "config.json"), before);
}

// A write that fails is an error with its reason, never "wrote ..." and exit 0; a device named as
// the output is written in place, never replaced by a renamed file.
TEST(ExportCli, AFailedWriteIsAnErrorAndADeviceStaysADevice) {
  const std::string db = capture().db.string();
  const std::string run = std::to_string(capture().runs.front());
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"export", db, "--run", run, "-o", "/dev/full"}, {"report", db, "--markdown", "/dev/full"},
           {"stats", db, "-o", "/dev/full"}}) {
    const auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("wrote run"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full")) << "an output rename replaced the device node";
  const auto piped = hs::test::run({"bash", "-c", hs::test::cli() + " report " + db + " > /dev/full"});
  EXPECT_EQ(piped.exit_code, 1) << piped.err;
  EXPECT_NE(piped.err.find("hookscope: error: cannot write to standard output"), std::string::npos) << piped.err;
  const fs::path folder = capture().dir / "a-folder.md";
  fs::create_directories(folder);
  const auto r = hookscope({"report", db, "--markdown", folder.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(folder.string() + " is a folder"), std::string::npos) << r.err;
  for (const auto& e : fs::directory_iterator(capture().dir))
    EXPECT_EQ(e.path().filename().string().rfind("a-folder.md.partial", 0), std::string::npos) << e.path();
}

// import takes the capture writer's lock (OUT.lock): it fails at once, naming the holder, while a
// capture writes OUT, and refuses to append into a running capture's temporary OUT.PID.partial
// (which used to make the capture fail on a UNIQUE constraint and never reach OUT).
TEST(ExportCli, ImportNeverWritesAFileACaptureIsWriting) {
  const fs::path dir = capture().dir / "import-lock";
  fs::create_directories(dir);
  const fs::path trace = export_chrome(rich_run(), dir / "t.json");
  const fs::path out = dir / "x.sqlite";
  const fs::path partial = dir / ("x.sqlite." + std::to_string(getpid()) + ".partial");
  fs::copy_file(capture().db, partial, fs::copy_options::overwrite_existing);
  const std::string before = hs::test::read_file(partial);
  const int fd = ::open((dir / "x.sqlite.lock").c_str(), O_RDWR | O_CREAT, 0644);  // as a running capture holds it
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(getpid()) + "\n";
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  auto r = hookscope({"import", trace.string(), "-o", partial.string(), "--append"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("is the temporary file of a capture into " + out.string() + " that is still running"),
            std::string::npos)
      << r.err;
  r = hookscope({"import", trace.string(), "-o", out.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("(pid " + std::to_string(getpid()) + ") is writing " + out.string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(hs::test::read_file(partial), before);
  ::close(fd);
  r = hookscope({"import", trace.string(), "-o", out.string()});  // the capture ended: the lock is free
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = hookscope({"import", trace.string(), "-o", "--append"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'--append' looks like a flag"), std::string::npos) << r.err;
}

// import's flags name what they store and what they read: text that is not UTF-8, or a name of
// more than one line, is refused by its flag (it used to reach the reports as nlohmann's raw type_error.316), and an -o that is the
// trace being imported is named as such rather than offered --append.
TEST(ExportCli, ImportRefusesTextThatIsNotUtf8AndAnOutThatIsItsInput) {
  const fs::path dir = capture().dir / "import-flags";
  fs::create_directories(dir);
  const fs::path trace = export_chrome(rich_run(), dir / "t.json");
  auto r = hookscope({"import", trace.string(), "-o", (dir / "u.sqlite").string(), "--label", "\xff\xfe"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--label: not valid UTF-8"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "u.sqlite"));
  // A name is one line of the reports: a newline in it is refused, naming the flag and offset.
  r = hookscope({"import", trace.string(), "-o", (dir / "u.sqlite").string(), "--policy", "P\n## injected"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--policy: holds a control character (a newline) at offset 1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "u.sqlite"));
  // Without --label the run is named after the file, as one line of UTF-8 too.
  const fs::path odd = dir / "tr\nace\xff.json";
  fs::copy_file(trace, odd, fs::copy_options::overwrite_existing);
  r = hookscope({"import", odd.string(), "-o", (dir / "odd.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(hs::storage::CaptureReader(dir / "odd.sqlite").runs().at(0).label, "tr ace\xef\xbf\xbd.json");
  fs::remove(dir / "odd.sqlite");
  const std::string before = hs::test::read_file(trace);
  r = hookscope({"import", trace.string(), "-o", trace.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("an input of this import"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(trace), before);
  // The hint import prints never suggests exporting over the trace it read (t.json -> t.sqlite
  // would suggest `-o t.json`).
  fs::remove(dir / "t.sqlite");
  r = hookscope({"import", trace.string(), "-o", (dir / "t.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("-o " + trace.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-o " + (dir / "t.trace.json").string()), std::string::npos) << r.err;
  r = hookscope({"generate", "--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--prompt", "\xff x"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--prompt: not valid UTF-8"), std::string::npos) << r.err;
}

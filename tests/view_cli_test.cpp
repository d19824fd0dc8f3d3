// `hookscope view` on a real capture of a tiny checkpoint (the demo's full matrix, small):
// headless screenshots of every view through the CLI, one lane group per device of the run,
// every run in the comparison, and the exit codes and messages for bad input. Runs under
// tools/with_display.sh (a private Xvfb when there is no display).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <unistd.h>

#include <fstream>
#include <map>
#include <set>

#include <stb_image.h>

#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using hs::test::hookscope;
using nlohmann::json;

struct Capture {
  fs::path dir, db;
};

const Capture& capture() {
  static Capture c = [] {
    Capture k;
    k.dir = hs::test::scratch_dir("view-cli-" + std::to_string(getpid()));
    k.db = k.dir / "demo.sqlite";
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "3",
                        "--modes", "eager,default", "--prompt-ids", "5,17,99,3", "--max-new-tokens", "3", "--repeats",
                        "1", "--warmup", "0", "--out", k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    return k;
  }();
  return c;
}

size_t distinct_colors(const fs::path& png) {
  int w = 0, h = 0, n = 0;
  unsigned char* d = stbi_load(png.c_str(), &w, &h, &n, 3);
  if (!d) throw std::runtime_error("cannot read " + png.string());
  std::set<uint32_t> c;
  for (int i = 0; i < w * h; ++i) c.insert(d[3 * i] << 16 | d[3 * i + 1] << 8 | d[3 * i + 2]);
  stbi_image_free(d);
  return c.size();
}

json shot(const std::string& view, std::vector<std::string> extra = {}) {
  const fs::path png = capture().dir / (view + ".png"), lay = capture().dir / (view + ".json");
  std::vector<std::string> args = {"view", capture().db.string(), "--view", view, "--screenshot", png.string(),
                                   "--layout", lay.string(), "--size", "1500x1600"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = hookscope(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(distinct_colors(png), 12u) << view << ": blank screenshot";
  return hs::test::read_json(lay);
}

TEST(ViewCli, TimelineHasOneLaneGroupPerDeviceOfTheRun) {
  hs::storage::CaptureReader rd(capture().db);
  int shown = 0;
  for (const auto& run : rd.runs()) {
    if (run.fullgraph || run.scenario != "sharded") continue;
    ++shown;
    json j = shot("timeline", {"--run", std::to_string(run.id)});
    EXPECT_EQ(j["run"], run.id);
    std::vector<std::string> groups;
    for (const auto& g : j["groups"]) {
      if (!g["host"].get<bool>()) groups.push_back(g["device"]);
      EXPECT_TRUE(g["visible"].get<bool>()) << g["title"] << " is scrolled out of the 1500x1600 screenshot";
    }
    // The sharded run computes on all three emulated accelerators and copies from/to the cpu.
    EXPECT_EQ(groups, (std::vector<std::string>{"0", "1", "2", "cpu"})) << j.dump();
    for (const auto& g : j["groups"]) {
      if (!g["host"].get<bool>() && g["device"] != "cpu") {
        EXPECT_TRUE(g["emulated"].get<bool>()) << g.dump();
      }
    }
    EXPECT_GT(j["drawn_boxes"].get<int64_t>(), 0);
    break;
  }
  EXPECT_EQ(shown, 1) << "the capture has a sharded run without fullgraph";
}

TEST(ViewCli, CompareShowsEveryRun) {
  json j = shot("compare");
  std::set<int64_t> shown;
  for (const auto& r : j["compare_rows"]) shown.insert(r["run"].get<int64_t>());
  hs::storage::CaptureReader rd(capture().db);
  EXPECT_EQ(shown.size(), rd.runs().size());
  EXPECT_EQ(rd.runs().size(), 4u * 2 * 3);  // scenarios x policies x (eager, default, default fullgraph)
}

TEST(ViewCli, TwoCapturesOpenTogether) {
  const fs::path other = capture().dir / "after.sqlite";
  fs::copy_file(capture().db, other, fs::copy_options::overwrite_existing);
  json j = shot("compare", {other.string()});
  std::set<std::pair<int, int64_t>> shown;
  for (const auto& r : j["compare_rows"]) shown.emplace(r["capture"].get<int>(), r["run"].get<int64_t>());
  hs::storage::CaptureReader rd(capture().db);
  EXPECT_EQ(shown.size(), 2 * rd.runs().size());
  EXPECT_EQ(j["run_rows"].size(), 2 * rd.runs().size());
  // The second file's run of the opened run's cell is aligned under it.
  EXPECT_EQ(j["compare_capture"], 1);
  EXPECT_EQ(j["compare_run"], j["run"]);

  const fs::path dir = hs::test::scratch_dir("view-cli-two-" + std::to_string(getpid()));
  auto r = hookscope({"view", capture().db.string(), (dir / "missing.sqlite").string(), "--screenshot",
                      (dir / "x.png").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.sqlite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.png"));
  const fs::path png_named = dir / "after.png";  // a capture may have any name
  fs::copy_file(capture().db, png_named);
  const std::string before = hs::test::read_file(png_named);
  r = hookscope({"view", capture().db.string(), png_named.string(), "--screenshot", (dir / "." / "after.png").string()});
  EXPECT_EQ(r.exit_code, 1) << "the second capture is never written over";
  EXPECT_NE(r.err.find("is the capture being viewed"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(png_named), before);
}

// The line saying where the screenshot went shows its name inert on the terminal: ESC
// sequences, an OSC title and U+202E as escapes, never raw. Outputs are checked before the
// window opens, and a capture beside itself is refused.
TEST(ViewCli, OutputsAreCheckedFirstAndTheirNamesSaidInert) {
  const fs::path dir = hs::test::scratch_dir("view-cli-nasty-" + std::to_string(getpid()));
  const std::string nasty = "n\u202e\x1b[2J\x1b]0;title\x07";
  const fs::path png = dir / (nasty + ".png");
  const auto r = hookscope({"view", capture().db.string(), "--screenshot", png.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(png));
  EXPECT_NE(r.err.find("n\\u202e\\x1b[2J\\x1b]0;title\\x07"), std::string::npos) << r.err;
  for (const std::string raw : {"\x1b", "\x07", "\u202e"}) EXPECT_EQ(r.err.find(raw), std::string::npos) << r.err;
  // Both outputs are checked before the window opens: a --layout name with no room for its
  // temporary file leaves no screenshot behind, and names its flag.
  const fs::path shot = dir / "first.png", layout = dir / (std::string(240, 'l') + ".json");
  const auto lr = hookscope({"view", capture().db.string(), "--screenshot", shot.string(), "--layout", layout.string()});
  EXPECT_EQ(lr.exit_code, 1) << lr.err;
  EXPECT_NE(lr.err.find("--layout: " + layout.string() + ": its file name is 245 bytes"), std::string::npos) << lr.err;
  EXPECT_FALSE(fs::exists(shot));
  // Two names of one file: the layout would have replaced the picture.
  const auto two = hookscope({"view", capture().db.string(), "--screenshot", shot.string(), "--layout",
                              (dir / "." / "first.png").string()});
  EXPECT_EQ(two.exit_code, 1) << two.err;
  EXPECT_NE(two.err.find("is also --screenshot's output"), std::string::npos) << two.err;
  EXPECT_FALSE(fs::exists(shot));
  // A capture beside itself is refused, as by report: a before/after view needs two files.
  const auto same = hookscope({"view", capture().db.string(), capture().db.string(), "--screenshot", shot.string()});
  EXPECT_EQ(same.exit_code, 1) << same.err;
  EXPECT_NE(same.err.find("is the same file as"), std::string::npos) << same.err;
  EXPECT_FALSE(fs::exists(shot));
}

// `--compare ID` aligns a second run of the same file under the opened one: both runs get
// their lane groups on one time scale; an unknown id is an error naming it.
TEST(ViewCli, CompareFlagAlignsASecondRunUnderTheFirst) {
  hs::storage::CaptureReader rd(capture().db);
  int64_t whole = 0, only = 0;
  for (const auto& run : rd.runs()) {
    if (run.scenario != "sharded" || run.mode != "default" || run.fullgraph) continue;
    (run.policy == "whole-hook" ? whole : only) = run.id;
  }
  ASSERT_GT(whole, 0);
  ASSERT_GT(only, 0);
  json j = shot("timeline", {"--run", std::to_string(whole), "--compare", std::to_string(only)});
  EXPECT_EQ(j["run"], whole);
  EXPECT_EQ(j["compare_run"], only);
  EXPECT_EQ(j["compare_capture"], 0);
  std::map<int64_t, std::vector<std::string>> groups;
  for (const auto& g : j["groups"])
    if (!g["host"].get<bool>()) groups[g["run"].get<int64_t>()].push_back(g["device"]);
  const std::vector<std::string> devices = {"0", "1", "2", "cpu"};
  EXPECT_EQ(groups[whole], devices) << j.dump();
  EXPECT_EQ(groups[only], devices) << j.dump();
  EXPECT_EQ(j["panes"].size(), 2u) << "one lane pane per run";
  // The second pane lies below the first.
  EXPECT_LE(j["panes"][0][1].get<double>(), j["panes"][1][0].get<double>() + 0.5);

  const fs::path dir = hs::test::scratch_dir("view-cli-cmp-" + std::to_string(getpid()));
  auto r = hookscope({"view", capture().db.string(), "--run", std::to_string(whole), "--compare", "999",
                      "--screenshot", (dir / "x.png").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--compare: no run 999"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.png"));
}

TEST(ViewCli, TablesOpenOnAnOffloadedRun) {
  hs::storage::CaptureReader rd(capture().db);
  int64_t offload = 0;
  for (const auto& run : rd.runs())
    if (run.scenario == "cpu-offload" && !run.fullgraph) offload = run.id;
  ASSERT_GT(offload, 0);
  for (const char* v : {"breaks", "transfers", "swaps"}) {
    json j = shot(v, {"--run", std::to_string(offload)});
    EXPECT_EQ(j["tab"], v);
    EXPECT_GT(j["table_rows"].get<int64_t>(), 0) << v << ": no rows drawn";
  }
}

TEST(ViewCli, BadInputExitsNonZeroWithAClearMessageAndTouchesNothing) {
  const fs::path dir = hs::test::scratch_dir("view-cli-bad-" + std::to_string(getpid()));
  const fs::path notes = dir / "notes.txt";
  {
    std::ofstream f(notes);
    f << "not a capture";
  }
  auto r = hookscope({"view", notes.string(), "--screenshot", (dir / "x.png").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a hookscope capture"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("notes.txt"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(notes), "not a capture");
  EXPECT_FALSE(fs::exists(dir / "x.png"));

  r = hookscope({"view", capture().db.string(), "--run", "9999", "--screenshot", (dir / "x.png").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("9999"), std::string::npos) << r.err;
  r = hookscope({"view", capture().db.string(), "--view", "flamegraph"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--view"), std::string::npos) << r.err;
  r = hookscope({"view", capture().db.string(), "--size", "10x10"});
  EXPECT_EQ(r.exit_code, 2);
  r = hookscope({"view", capture().db.string(), "--layout", (dir / "l.json").string()});
  EXPECT_EQ(r.exit_code, 2) << "--layout needs --screenshot";
  r = hookscope({"view", capture().db.string(), "--screenshot", ""});
  EXPECT_EQ(r.exit_code, 2);
  r = hookscope({"view", capture().db.string(), "--screenshot", (dir / "x.jpg").string()});
  EXPECT_EQ(r.exit_code, 2);

  // An output that is the capture itself (or names it another way) is refused: nothing written.
  const fs::path copy = dir / "copy.png";  // a capture may have any name
  fs::copy_file(capture().db, copy);
  const std::string before = hs::test::read_file(copy);
  r = hookscope({"view", copy.string(), "--screenshot", (dir / "." / "copy.png").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the capture being viewed"), std::string::npos) << r.err;
  r = hookscope({"view", copy.string(), "--screenshot", (dir / "s.png").string(), "--layout", copy.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(hs::test::read_file(copy), before);
  EXPECT_FALSE(fs::exists(dir / "s.png"));
}

}  // namespace

namespace {
// A copy of the capture named `name`, edited by `sql` (as a hand-edited or damaged file).
fs::path edited_copy(const std::string& name, const std::string& sql) {
  return hs::test::edited_copy(capture().db, capture().dir / (name + ".sqlite"), sql);
}
}  // namespace

// A hand-edited capture: results of another type and rows no capture writes fail before a
// window opens, naming the run and field (or table) as report does — not with nlohmann's bare
// "type must be string" — while names that are not UTF-8 or megabytes long still draw, and the
// layout stays JSON.
TEST(ViewCli, AHandEditedCaptureFailsNamingWhatIsWrongOrDraws) {
  const fs::path png = capture().dir / "edited.png", lay = capture().dir / "edited.json";
  auto view = [&](const fs::path& db, const std::string& tab) {
    fs::remove(png);
    return hookscope({"view", db.string(), "--run", "2", "--view", tab, "--screenshot", png.string(), "--layout",
                      lay.string()});
  };
  auto r = view(edited_copy("status-7", "UPDATE RUNS SET results = json_set(results, '$.status', 7) WHERE id = 2"), "compare");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("run 2: RUNS.results field 'status' is 7, where hookscope writes a string"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(png));
  r = view(edited_copy("backwards", "UPDATE HOOK_EVENTS SET end = start - 1 WHERE runId = 2"), "timeline");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("run 2: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of HOOK_EVENTS that no capture writes; the first (rowid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") it ends before it starts"), std::string::npos) << r.err;
  const fs::path odd = edited_copy(
      "odd-names", "UPDATE RUNS SET scenario = CAST(X'FFFE' AS TEXT) || scenario WHERE id = 2; UPDATE DEVICES SET "
                   "label = CAST(X'C3' AS TEXT) WHERE id = 1; UPDATE StringIds SET value = printf('%.*c', 2000000, 'm') "
                   "WHERE id IN (SELECT moduleId FROM MODULE_COMPUTE WHERE runId = 2)");
  for (const char* tab : {"timeline", "compare", "breaks"}) {
    r = view(odd, tab);
    EXPECT_EQ(r.exit_code, 0) << tab << ": " << r.err;
    EXPECT_NO_THROW(hs::test::read_json(lay)) << tab;
    EXPECT_GT(distinct_colors(png), 12u) << tab << ": blank screenshot";
  }
}

namespace {

// A capture of one program profiled under both policies (RUNS.engine "profile", as `hookscope
// profile` files them: mode "", the command and exit status in the results, the compile log's
// figures carried) beside a generate run: hook calls, weight onloads and generation steps come
// from the synthetic rows.
fs::path profiled_capture() {
  const fs::path db = hs::test::scratch_dir("view-cli-profile-" + std::to_string(getpid())) / "profile.sqlite";
  hs::storage::Store store(db);
  hs::storage::add_synthetic_devices(store, 2);
  hs::storage::SyntheticRun s;
  s.devices = 2;
  s.layers = 4;
  s.scenario = "net.py";
  s.offload = true;
  s.tokens = 6;
  int64_t i = 0;
  for (const char* policy : {"whole-hook", "offload-only"}) {
    s.policy = policy;
    s.tokens = 6 + i;  // iterations differ: 6 and 7
    const auto r = hs::storage::write_synthetic_run(store, s);
    store.set_run_cell(r.run_id, "net.py", policy, "", false, "synthetic");
    store.set_run_engine(r.run_id, "profile");
    store.set_run_result(r.run_id, {{"command", {"python", "net.py", "--steps", "it's"}},
                                    {"exit_status", 3 * i},
                                    {"status", "ok"},
                                    {"carried_log",
                                     {{"log_compiles", 21 + i},
                                      {"log_graphs", 1 + 3 * i},
                                      {"log_graph_break_records", 11 - i},
                                      {"log_graph_break_count", 3 * i},
                                      {"log_recompiles", 4 - 2 * i},
                                      {"log_frames_skipped", 1 + i},
                                      {"log_recompile_limit_hits", 0}}}});
    ++i;
  }
  s.scenario = "sharded";
  s.policy = "whole-hook";
  s.offload = false;
  s.tokens = 4;
  hs::storage::write_synthetic_run(store, s);
  store.finalize();
  store.close();
  return db;
}

}  // namespace

// The Compare tab of profiled programs shows the figures of the report's verdict block, each
// under its catalogue label with the value `hookscope report --json` gives for the same run, a
// column per policy, and the block's iteration_speedup; the generate run beside them keeps its
// matrix row.
TEST(ViewCli, AProfiledProgramsCompareTableReadsWhatTheReportGives) {
  const fs::path db = profiled_capture(), dir = db.parent_path();
  auto r = hookscope({"report", db.string(), "--json", (dir / "report.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = hs::test::read_json(dir / "report.json");
  json block;
  for (const auto& v : report["verdicts"])
    if (v["engine"] == "profile") block = v;
  ASSERT_TRUE(block.is_object()) << report["verdicts"].dump();
  ASSERT_TRUE(block["after"].is_object()) << block.dump();

  const fs::path png = dir / "compare.png", lay = dir / "compare.json";
  r = hookscope({"view", db.string(), "--view", "compare", "--screenshot", png.string(), "--layout", lay.string(),
                 "--size", "1600x900"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(distinct_colors(png), 12u) << "blank screenshot";
  const json j = hs::test::read_json(lay);
  ASSERT_EQ(j["compare_programs"].size(), 1u) << j.dump();
  const json& p = j["compare_programs"][0];
  EXPECT_EQ(p["program"], "net.py");
  EXPECT_EQ(p["headers"], json({"figure", "whole-hook (before)", "offload-only (after)"}));
  ASSERT_EQ(p["runs"].size(), 2u);
  EXPECT_EQ(p["runs"][0]["run"], block["before"]["run"]);
  EXPECT_EQ(p["runs"][1]["run"], block["after"]["run"]);

  // Every figure of the block, in the report's order, under its label, with the report's value.
  const std::vector<std::string> keys = {"command",        "exit_status",         "log_graphs",
                                         "log_graph_break_count", "log_graph_break_records", "log_recompiles",
                                         "log_frames_skipped",    "hook_busy_ns",   "hook_compile_ns",
                                         "weight_onloads",        "weight_onload_bytes", "iterations",
                                         "iteration_ms"};
  ASSERT_EQ(p["figures"].size(), keys.size()) << p.dump();
  for (size_t k = 0; k < keys.size(); ++k) {
    const json& f = p["figures"][k];
    EXPECT_EQ(f["key"], keys[k]);
    EXPECT_EQ(f["label"], report["definitions"][keys[k]]["label"]) << keys[k];
    EXPECT_EQ(f["values"][0], block["before"][keys[k]]) << keys[k];
    EXPECT_EQ(f["values"][1], block["after"][keys[k]]) << keys[k];
  }
  // Not vacuous: the synthetic rows give each figure a value, and they differ between policies.
  auto figure = [&](const std::string& key) {
    for (const auto& f : p["figures"])
      if (f["key"] == key) return f;
    return json();
  };
  EXPECT_EQ(figure("command")["values"][0], "python net.py --steps 'it'\\''s'");
  EXPECT_EQ(figure("exit_status")["values"], json({0, 3}));
  EXPECT_EQ(figure("log_graphs")["values"], json({1, 4}));
  EXPECT_EQ(figure("log_graph_break_count")["values"], json({0, 3}));
  EXPECT_EQ(figure("log_graph_break_records")["values"], json({11, 10}));
  EXPECT_EQ(figure("log_recompiles")["values"], json({4, 2}));
  EXPECT_EQ(figure("log_frames_skipped")["values"], json({1, 2}));
  EXPECT_EQ(figure("iterations")["values"], json({6, 7}));
  EXPECT_EQ(figure("iterations")["cells"], json({"6 (generation step)", "7 (generation step)"}));
  for (const char* key : {"hook_busy_ns", "weight_onloads", "weight_onload_bytes", "iteration_ms"}) {
    const json f = figure(key);  // named: a range-for over a temporary's member dangles (ASan)
    for (const auto& v : f["values"]) EXPECT_TRUE(v.is_number() && v.get<double>() > 0) << key << ": " << v;
  }
  // Hook time as the report reads it: ms over the calls of stats' totals.
  const int64_t calls = block["before"]["hook_calls"].get<int64_t>();
  char hook[64];
  std::snprintf(hook, sizeof hook, "%.1f ms (%lld calls)", block["before"]["hook_busy_ns"].get<double>() / 1e6,
                static_cast<long long>(calls));
  EXPECT_EQ(figure("hook_busy_ns")["cells"][0], hook);
  // The block's verdict on the iterations, under its label.
  EXPECT_EQ(p["speedup"], block["iteration_speedup"]);
  ASSERT_TRUE(block["iteration_speedup"].is_object()) << block.dump();
  const std::string label = report["definitions"]["iteration_speedup"]["label"];
  EXPECT_EQ(p["speedup_text"].get<std::string>().rfind(label + ": ", 0), 0u) << p["speedup_text"];
  EXPECT_NE(p["speedup_text"].get<std::string>().find(block["iteration_speedup"]["verdict"].get<std::string>()),
            std::string::npos)
      << p["speedup_text"];
  // Under the table, the block's diagnosis, a claim each as the report lists them (its names
  // there in backticks): as many, the first the log's graphs − 1 before → after.
  const std::string md = hookscope({"report", db.string()}).out;
  const size_t block_at = md.find("**a profiled script");
  const size_t claims_end = md.find("\n\n", md.find("\n- ", block_at));
  size_t report_claims = 0;
  for (size_t at = md.find("\n- ", block_at); at < claims_end; at = md.find("\n- ", at + 1)) ++report_claims;
  EXPECT_EQ(p["claims"].size(), report_claims) << md.substr(block_at, claims_end - block_at);
  ASSERT_FALSE(p["claims"].empty());
  EXPECT_EQ(p["claims"][0].get<std::string>().rfind("graphs − 1 in the log: 0 under whole-hook → 3 under offload-only", 0), 0u)
      << p["claims"][0];

  // The profiled runs and the generate run are all rows of the tab; the generate one keeps its
  // matrix (its mode), the profiled ones name no mode.
  std::map<int64_t, std::string> modes;
  for (const auto& row : j["compare_rows"]) modes[row["run"].get<int64_t>()] = row["mode"];
  EXPECT_EQ(modes, (std::map<int64_t, std::string>{{1, ""}, {2, ""}, {3, "default"}})) << j["compare_rows"].dump();
}

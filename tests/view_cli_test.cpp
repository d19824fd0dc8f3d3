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

// `hookscope report A B`: the noise verdict on hand-made latency objects and report JSONs, and
// the comparison of two real captures of the tiny Llama (LibTorch engine) matched cell by cell
// against each file's own report, with the CLI's exit codes for bad second files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <set>

#include "app/report_diff.h"
#include "storage/capture_reader.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using hs::test::hookscope;
using nlohmann::json;

json lat(double median, double min, double max, int n = 3) {
  return {{"median", median}, {"min", min}, {"max", max}, {"n", n}};
}

TEST(ReportDiffVerdict, OverlappingSpreadsAreWithinNoise) {
  const json v = hs::app::compare_latency(lat(100, 90, 110), lat(105, 100, 130));
  EXPECT_EQ(v["verdict"], "within noise");
  EXPECT_EQ(v["spread"], "min-max");
  EXPECT_DOUBLE_EQ(v["ratio"].get<double>(), 1.05);
  EXPECT_NEAR(v["delta_pct"].get<double>(), 5.0, 1e-9);
  // Touching spreads overlap too.
  EXPECT_EQ(hs::app::compare_latency(lat(100, 90, 110), lat(120, 110, 130))["verdict"], "within noise");
  // A capture against itself is never faster or slower.
  EXPECT_EQ(hs::app::compare_latency(lat(100, 90, 110), lat(100, 90, 110))["verdict"], "within noise");
}

TEST(ReportDiffVerdict, DisjointSpreadsAreFasterOrSlower) {
  json v = hs::app::compare_latency(lat(100, 95, 105), lat(50, 48, 52));
  EXPECT_EQ(v["verdict"], "faster");
  EXPECT_DOUBLE_EQ(v["ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(v["delta_pct"].get<double>(), -50.0);
  v = hs::app::compare_latency(lat(50, 48, 52), lat(100, 95, 105));
  EXPECT_EQ(v["verdict"], "slower");
  EXPECT_DOUBLE_EQ(v["ratio"].get<double>(), 2.0);
}

TEST(ReportDiffVerdict, QuartilesAreUsedWhenBothSidesHaveThem) {
  // min–max overlap (one slow outlier in A), the interquartile ranges do not.
  json a = lat(100, 95, 300), b = lat(80, 78, 99);
  a["q1"] = 98, a["q3"] = 102;
  b["q1"] = 79, b["q3"] = 82;
  json v = hs::app::compare_latency(a, b);
  EXPECT_EQ(v["spread"], "iqr");
  EXPECT_EQ(v["verdict"], "faster");
  // Only one side has quartiles: min–max for both, which overlap.
  b.erase("q1");
  v = hs::app::compare_latency(a, b);
  EXPECT_EQ(v["spread"], "min-max");
  EXPECT_EQ(v["verdict"], "within noise");
}

TEST(ReportDiffVerdict, NoVerdictWithoutTwoRepeatsOrALatency) {
  EXPECT_EQ(hs::app::compare_latency(lat(100, 100, 100, 1), lat(50, 50, 50, 1))["verdict"], "not judged");
  json v = hs::app::compare_latency(nullptr, lat(50, 48, 52));
  EXPECT_TRUE(v["verdict"].is_null());
  EXPECT_TRUE(v["ratio"].is_null());
  EXPECT_TRUE(v["a"].is_null());
  // --max-new-tokens 1: no decode step, a median of 0.
  EXPECT_TRUE(hs::app::compare_latency(lat(0, 0, 0), lat(0, 0, 0))["ratio"].is_null());
}

json hand_run(int64_t id, const std::string& policy, const std::string& mode, bool fullgraph, const std::string& status,
              json breaks, json latency) {
  return {{"id", id},         {"engine", "torch"}, {"scenario", "sharded"},   {"policy", policy},
          {"mode", mode},     {"fullgraph", fullgraph}, {"status", status},    {"graph_break_count", breaks},
          {"decode_ms_per_token", latency}, {"error", status == "ok" ? json(nullptr) : json("Unsupported: graph break\nmore")}};
}

hs::app::DiffSide hand_side(const std::string& label, json runs, json settings) {
  return {label, label + ".sqlite", {{"schema", 1}, {"model", {{"id", "tiny"}}}, {"runs", runs}}, settings, {}};
}

TEST(ReportDiff, HandMadeReportsMatchCellsAndListTheRest) {
  json a = json::array(), b = json::array();
  a.push_back(hand_run(1, "whole-hook", "eager", false, "ok", nullptr, lat(100, 95, 105)));
  a.push_back(hand_run(2, "whole-hook", "default", false, "ok", 9, lat(120, 110, 130)));
  a.push_back(hand_run(3, "whole-hook", "default", true, "error", 9, nullptr));
  a.push_back(hand_run(4, "offload-only", "default", false, "ok", 0, lat(60, 55, 65)));
  b.push_back(hand_run(1, "whole-hook", "eager", false, "ok", nullptr, lat(101, 96, 106)));
  b.push_back(hand_run(2, "whole-hook", "default", false, "ok", 0, lat(60, 58, 62)));
  b.push_back(hand_run(3, "whole-hook", "default", true, "ok", 0, lat(61, 59, 63)));
  b.push_back(hand_run(4, "whole-hook", "reduce-overhead", false, "ok", 0, lat(40, 39, 41)));
  const json diff = hs::app::build_report_diff(
      hand_side("main", a, {{"model", "tiny"}, {"new tokens", "8"}, {"repeats", "3"}}),
      hand_side("pr", b, {{"model", "tiny"}, {"new tokens", "16"}, {"repeats", "3"}, {"settings.prompt", "Hi"}}));
  ASSERT_EQ(diff["cells"].size(), 3u) << diff.dump(1);
  std::map<std::string, json> cell;
  for (const auto& c : diff["cells"]) cell[c["mode"].get<std::string>() + (c["fullgraph"].get<bool>() ? "+fg" : "")] = c;
  EXPECT_EQ(cell["eager"]["latency"]["decode_ms_per_token"]["verdict"], "within noise");
  EXPECT_EQ(cell["default"]["latency"]["decode_ms_per_token"]["verdict"], "faster");
  EXPECT_EQ(cell["default"]["a"]["graph_break_count"], 9);
  EXPECT_EQ(cell["default"]["b"]["graph_break_count"], 0);
  EXPECT_TRUE(cell["default"]["breaks_changed"].get<bool>());
  EXPECT_FALSE(cell["eager"]["breaks_changed"].get<bool>());
  EXPECT_EQ(cell["default+fg"]["a"]["outcome"], "raises");
  EXPECT_EQ(cell["default+fg"]["a"]["error"], "Unsupported: graph break");
  EXPECT_EQ(cell["default+fg"]["b"]["outcome"], "works");
  EXPECT_TRUE(cell["default+fg"]["outcome_changed"].get<bool>());
  EXPECT_TRUE(cell["default+fg"]["latency"]["decode_ms_per_token"]["verdict"].is_null());
  ASSERT_EQ(diff["only_in_a"].size(), 1u);
  EXPECT_EQ(diff["only_in_a"][0]["policy"], "offload-only");
  EXPECT_EQ(diff["only_in_a"][0]["run"], 4);
  ASSERT_EQ(diff["only_in_b"].size(), 1u);
  EXPECT_EQ(diff["only_in_b"][0]["mode"], "reduce-overhead");
  EXPECT_EQ(diff["counts"]["matched"], 3);
  EXPECT_EQ(diff["counts"]["faster"], 1);
  EXPECT_EQ(diff["counts"]["within noise"], 1);
  // Settings: the token counts differ; the prompt only pr's capture records.
  EXPECT_EQ(diff["settings_differ"],
            json::parse(R"([{"setting": "new tokens", "a": "8", "b": "16"}, {"setting": "settings.prompt", "a": null, "b": "Hi"}])"));

  const std::string md = hs::app::render_diff_markdown(diff);
  EXPECT_NE(md.find("**Settings differ between the two captures**"), std::string::npos) << md;
  EXPECT_NE(md.find("| new tokens | 8 | 16 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| settings.prompt | – | Hi |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sharded | whole-hook | default | 9 | **0** | ok | ok | 120.0 (110.0–130.0) | 60.0 (58.0–62.0) | "
                    "0.50× | -50.0% | **faster** |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sharded | whole-hook | eager | – | – | ok | ok | 100.0 (95.0–105.0) | 101.0 (96.0–106.0) | 1.01× | "
                    "+1.0% | within noise |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| default fullgraph | 9 | **0** | raises | **works** |"), std::string::npos) << md;
  EXPECT_NE(md.find("### only in `main` (1)"), std::string::npos) << md;
  EXPECT_NE(md.find("| torch | sharded | offload-only | default | 4 | ok |"), std::string::npos) << md;
  EXPECT_NE(md.find("### only in `pr` (1)"), std::string::npos) << md;
}

// Labels, policies and settings with pipes, backticks and newlines keep the tables' columns.
TEST(ReportDiff, HostileLabelsAndNamesStayInTheirCells) {
  json a = json::array(), b = json::array();
  a.push_back(hand_run(1, "P|q\n## injected", "default", false, "ok", 3, lat(100, 95, 105)));
  a.push_back(hand_run(2, "only|a", "default", false, "ok", 3, lat(100, 95, 105)));
  b.push_back(hand_run(1, "P|q\n## injected", "default", false, "ok", 0, lat(50, 45, 55)));
  const json diff = hs::app::build_report_diff(hand_side("m`a|in", a, {{"prompt", "x|y\n# injected"}}),
                                               hand_side("pr", b, {{"prompt", json{{"k", "v|w"}}}}));
  const std::string md = hs::app::render_diff_markdown(diff);
  EXPECT_EQ(hs::test::broken_markdown_line(md, "injected"), "") << md;
  EXPECT_NE(md.find("### only in ``m`a|in`` (1)"), std::string::npos) << md;
  EXPECT_NE(md.find("| prompt | x\\|y \\# injected | {\"k\":\"v\\|w\"} |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sharded | P\\|q \\#\\# injected | default | 3 | **0** |"), std::string::npos) << md;
  EXPECT_THROW(hs::app::diff_labels("a", "b", {"x\ny", "z"}), std::invalid_argument);
}

TEST(ReportDiff, RepeatedCellsMatchInRunOrderAndLabelsDefaultToStems) {
  json a = json::array(), b = json::array();
  for (int64_t id : {1, 2}) a.push_back(hand_run(id, "whole-hook", "default", false, "ok", 1, lat(10, 9, 11)));
  b.push_back(hand_run(7, "whole-hook", "default", false, "ok", 1, lat(10, 9, 11)));
  const json diff = hs::app::build_report_diff(hand_side("a", a, json::object()), hand_side("b", b, json::object()));
  ASSERT_EQ(diff["cells"].size(), 1u);
  EXPECT_EQ(diff["cells"][0]["a"]["run"], 1);
  EXPECT_EQ(diff["cells"][0]["b"]["run"], 7);
  ASSERT_EQ(diff["only_in_a"].size(), 1u);
  EXPECT_EQ(diff["only_in_a"][0]["run"], 2);
  EXPECT_EQ(diff["only_in_a"][0]["occurrence"], 1);

  EXPECT_EQ(hs::app::diff_labels("x/main.sqlite", "y/pr.sqlite", {}), std::make_pair(std::string("main"), std::string("pr")));
  EXPECT_EQ(hs::app::diff_labels("x/demo.sqlite", "y/demo.sqlite", {}),
            std::make_pair(std::string("x/demo"), std::string("y/demo")));
  EXPECT_EQ(hs::app::diff_labels("x/demo.sqlite", "x/demo.sqlite", {}),
            std::make_pair(std::string("x/demo (A)"), std::string("x/demo (B)")));
  EXPECT_THROW(hs::app::diff_labels("a", "b", {"same", "same"}), std::invalid_argument);
  EXPECT_THROW(hs::app::diff_labels("a", "b", {"one"}), std::invalid_argument);
  EXPECT_THROW(hs::app::build_report_diff(hand_side("a", a, {}), {"b", "b.sqlite", json::object(), {}, {}}),
               std::invalid_argument);
}

// ------------------------------------------------------------------ two real captures

struct Captures {
  fs::path dir, main, pr;
};

/// main: sharded under both policies, eager and default (+ fullgraph), 3 new tokens;
/// pr: the offload-only half of that matrix with 4 new tokens.
const Captures& captures() {
  static Captures c = [] {
    Captures k;
    k.dir = hs::test::scratch_dir("report-diff-" + std::to_string(getpid()));
    k.main = k.dir / "main.sqlite";
    k.pr = k.dir / "pr.sqlite";
    const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
    for (const auto& [out, policies, tokens] : {std::tuple{k.main, "whole-hook,offload-only", "3"},
                                                std::tuple{k.pr, "offload-only", "4"}}) {
      auto r = hookscope({"capture", "--engine", "libtorch", "--model", model, "--devices", "2", "--scenarios", "sharded",
                          "--policies", policies, "--modes", "eager,default", "--prompt-ids", "5,17,99,3",
                          "--max-new-tokens", tokens, "--repeats", "3", "--warmup", "0", "--out", out.string()});
      if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    }
    return k;
  }();
  return c;
}

/// The single-file report JSON of a capture, by run id.
std::map<int64_t, json> runs_by_id(const fs::path& capture, const std::string& name) {
  const fs::path out = captures().dir / (name + ".json");
  auto r = hookscope({"report", capture.string(), "--json", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<int64_t, json> runs;
  const json report = hs::test::read_json(out);
  for (const auto& run : report["runs"]) runs[run["id"].get<int64_t>()] = run;
  return runs;
}

TEST(ReportDiffCli, TwoCapturesAreMatchedCellByCell) {
  const Captures& c = captures();
  const fs::path md = c.dir / "diff.md", js = c.dir / "diff.json";
  auto r = hookscope({"report", c.main.string(), c.pr.string(), "--labels", "before,after", "--markdown", md.string(),
                      "--json", js.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, hs::test::read_file(md));
  const json diff = hs::test::read_json(js);
  EXPECT_EQ(diff["kind"], "report-diff");
  EXPECT_EQ(diff["a"]["label"], "before");
  EXPECT_EQ(diff["b"]["label"], "after");
  EXPECT_EQ(diff["a"]["runs"], 6);  // 2 policies x (eager, default, default fullgraph)
  EXPECT_EQ(diff["b"]["runs"], 3);

  // The offload-only cells are matched, each side exactly as its own report says.
  const auto main_runs = runs_by_id(c.main, "main"), pr_runs = runs_by_id(c.pr, "pr");
  ASSERT_EQ(diff["cells"].size(), 3u) << diff.dump(1);
  std::set<std::string> modes;
  for (const auto& cell : diff["cells"]) {
    EXPECT_EQ(cell["engine"], "libtorch");
    EXPECT_EQ(cell["policy"], "offload-only");
    modes.insert(cell["mode"].get<std::string>() + (cell["fullgraph"].get<bool>() ? " fullgraph" : ""));
    const json& ra = main_runs.at(cell["a"]["run"].get<int64_t>());
    const json& rb = pr_runs.at(cell["b"]["run"].get<int64_t>());
    for (const auto& [side, run] : {std::pair{cell["a"], ra}, std::pair{cell["b"], rb}}) {
      EXPECT_EQ(run["mode"], cell["mode"]);
      EXPECT_EQ(run["fullgraph"], cell["fullgraph"]);
      EXPECT_EQ(side["disabled_scope_entries"], run["disabled_scope_entries"]);
      EXPECT_TRUE(side["graph_break_count"].is_null()) << "the LibTorch engine reports no Dynamo count";
      EXPECT_EQ(side["status"], run["status"]);
    }
    const json& l = cell["latency"]["decode_ms_per_token"];
    EXPECT_EQ(l["a"], ra["decode_ms_per_token"]);
    EXPECT_EQ(l["b"], rb["decode_ms_per_token"]);
    EXPECT_EQ(l["verdict"], hs::app::compare_latency(ra["decode_ms_per_token"], rb["decode_ms_per_token"])["verdict"]);
    if (ra["status"] == "ok" && rb["status"] == "ok") {
      EXPECT_NEAR(l["ratio"].get<double>(),
                  rb["decode_ms_per_token"]["median"].get<double>() / ra["decode_ms_per_token"]["median"].get<double>(), 1e-12);
    }
  }
  EXPECT_EQ(modes, (std::set<std::string>{"eager", "default", "default fullgraph"}));
  ASSERT_EQ(diff["only_in_a"].size(), 3u);
  for (const auto& cell : diff["only_in_a"]) EXPECT_EQ(cell["policy"], "whole-hook");
  EXPECT_TRUE(diff["only_in_b"].empty());

  // The token counts differ and are warned about; the model and devices are the same.
  std::map<std::string, json> differ;
  for (const auto& d : diff["settings_differ"]) differ[d["setting"]] = d;
  ASSERT_TRUE(differ.count("new tokens")) << diff["settings_differ"].dump();
  EXPECT_EQ(differ["new tokens"]["a"], "3");
  EXPECT_EQ(differ["new tokens"]["b"], "4");
  EXPECT_FALSE(differ.count("model"));
  EXPECT_FALSE(differ.count("devices"));
  EXPECT_FALSE(differ.count("versions.torch [libtorch]"));

  const std::string text = hs::test::read_file(md);
  EXPECT_NE(text.find("## hookscope: before/after, `before` → `after`"), std::string::npos) << text;
  EXPECT_NE(text.find("| new tokens | 3 | 4 |"), std::string::npos) << text;
  EXPECT_NE(text.find("### libtorch engine"), std::string::npos) << text;
  EXPECT_NE(text.find("| sharded | offload-only | default fullgraph |"), std::string::npos) << text;
  EXPECT_NE(text.find("### only in `before` (3)"), std::string::npos) << text;
  EXPECT_NE(text.find("† LibTorch engine"), std::string::npos) << text;
}

TEST(ReportDiffCli, ACaptureAgainstACopyOfItselfIsAllWithinNoiseWithTheSameSettings) {
  const Captures& c = captures();
  const fs::path copy = c.dir / "copy" / "main.sqlite";
  fs::create_directories(copy.parent_path());
  fs::copy_file(c.main, copy, fs::copy_options::overwrite_existing);
  const fs::path js = c.dir / "self.json";
  auto r = hookscope({"report", c.main.string(), copy.string(), "--json", js.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json diff = hs::test::read_json(js);
  // Labels default to the stems, with their folders when the stems are the same.
  EXPECT_EQ(diff["a"]["label"], fs::path(c.dir.filename() / "main").string());
  EXPECT_EQ(diff["b"]["label"], "copy/main");
  EXPECT_TRUE(diff["settings_differ"].empty()) << diff["settings_differ"].dump();
  EXPECT_EQ(diff["cells"].size(), 6u);
  EXPECT_TRUE(diff["only_in_a"].empty());
  EXPECT_TRUE(diff["only_in_b"].empty());
  for (const auto& cell : diff["cells"]) {
    // A fullgraph run that raised has no latency on either side.
    const json v = cell["latency"].value("decode_ms_per_token", json::object()).value("verdict", json());
    EXPECT_TRUE(v.is_null() || v == "within noise") << cell.dump();
    EXPECT_FALSE(cell["breaks_changed"].get<bool>());
    EXPECT_FALSE(cell["outcome_changed"].get<bool>());
  }
  EXPECT_EQ(r.out.find("Settings differ"), std::string::npos) << r.out;
}

TEST(ReportDiffCli, ABadSecondFileOrLabelIsRefusedNamingIt) {
  const Captures& c = captures();
  const fs::path dir = hs::test::scratch_dir("report-diff-bad-" + std::to_string(getpid()));
  auto r = hookscope({"report", c.main.string(), (dir / "missing.sqlite").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.sqlite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "missing.sqlite"));
  const fs::path notes = dir / "notes.txt";
  {
    std::ofstream f(notes);
    f << "not a capture";
  }
  r = hookscope({"report", c.main.string(), notes.string(), "--json", (dir / "d.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a hookscope capture"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("notes.txt"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(notes), "not a capture");
  EXPECT_FALSE(fs::exists(dir / "d.json"));

  // --labels: two different names, and only with two files (usage errors).
  for (const char* bad : {"one", "a,a", "a,b,c", ""}) {
    r = hookscope({"report", c.main.string(), c.pr.string(), "--labels", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--labels"), std::string::npos) << r.err;
  }
  r = hookscope({"report", c.main.string(), "--labels", "a,b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--labels"), std::string::npos) << r.err;
  r = hookscope({"report", c.main.string(), c.pr.string(), c.main.string()});
  EXPECT_EQ(r.exit_code, 2) << "at most two files";

  // An output that is one of the captures is refused: nothing written.
  const std::string before = hs::test::read_file(c.pr);
  r = hookscope({"report", c.main.string(), c.pr.string(), "--json", c.pr.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the capture being compared"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(c.pr), before);

  // The help documents the comparison's JSON.
  r = hookscope({"report", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("report-diff"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("within noise"), std::string::npos) << r.out;
}

}  // namespace

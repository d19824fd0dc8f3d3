// One fact, one number: a capture made here (both engines, a tiny transformers-written Llama,
// both policies, eager and compiled, fullgraph on and off) read through every view — report
// JSON, Markdown and HTML, `stats --format json`, `explain --json`, the viewer's layout
// (compare matrix, Breaks tab, timeline header) and the Chrome export's run object — must show the same value
// for each named fact of facts/catalogue.h. Also: the verdict comes first, an exported run comes
// back through import with its engine and figures, and the verdict rules on made-up reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/recording.h"
#include "facts/verdicts.h"
#include "storage/capture_reader.h"
#include "tests/test_util.h"
#include "ui/run_timeline.h"
#include "ui/typography.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

// Every break fact a run carries in the report JSON (facts/breaks.h).
const char* const kBreakFacts[] = {
    "graph_count",          "graph_break_count",       "recompiles",           "frames_skipped",
    "recompile_limit_hits", "log_compiles",            "log_graphs",           "log_graph_break_records",
    "log_graph_break_count", "disabled_scope_entries", "captured_regions",     "recorded_disabled_scope_entries",
    "guard_recompiles",      "breaks_source"};

struct Capture {
  fs::path dir, db;
  json report;  ///< `report --json`
  std::string markdown, html;
};

json run_cli_json(const std::vector<std::string>& args) {
  const auto r = hookscope(args);
  if (r.exit_code != 0) throw std::runtime_error(args[0] + " failed: " + r.err);
  return json::parse(r.out);
}

const Capture& capture() {
  static const Capture c = [] {
    Capture k;
    k.dir = hs::test::scratch_dir("facts");
    k.db = k.dir / "capture.sqlite";
    auto r = hookscope({"capture", "--engine", "both", "--backend", "eager", "--model",
                        hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2", "--scenarios", "sharded",
                        "--policies", "whole-hook,offload-only", "--modes", "eager,default", "--fullgraph", "both",
                        "--prompt-ids", "5,17,99,3", "--max-new-tokens", "3", "--repeats", "1", "--warmup", "0",
                        "--threads", "1", "-o", k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    r = hookscope({"report", k.db.string(), "--json", (k.dir / "r.json").string(), "--markdown",
                   (k.dir / "r.md").string(), "--html", (k.dir / "r.html").string()});
    if (r.exit_code != 0) throw std::runtime_error("report failed: " + r.err);
    k.report = hs::test::read_json(k.dir / "r.json");
    k.markdown = hs::test::read_file(k.dir / "r.md");
    k.html = hs::test::read_file(k.dir / "r.html");
    return k;
  }();
  return c;
}

// The compiled runs without fullgraph that finished: where every break figure is defined.
std::vector<json> compiled_runs() {
  std::vector<json> out;
  for (const auto& r : capture().report["runs"])
    if (r["mode"] != "eager" && !r["fullgraph"].get<bool>() && r["status"] == "ok") out.push_back(r);
  return out;
}

std::string id_of(const json& r) { return std::to_string(r["id"].get<int64_t>()); }

// A report cell as the viewer draws it: the same text where its font has '†', '–' and '−' (the
// window merges them from DejaVu Sans when the file is there, as the README's setup makes it).
std::string viewer_text(std::string s) {
  return hs::ui::display_text(std::move(s), fs::is_regular_file(hs::ui::kTypographyFont));
}

void EveryRunHasEachBreakFactUnderOneName() {
  const auto runs = compiled_runs();
  ASSERT_EQ(runs.size(), 4u) << "both engines, both policies, mode default";
  for (const auto& r : runs) {
    SCOPED_TRACE("run " + id_of(r) + " " + r["engine"].get<std::string>() + " " + r["policy"].get<std::string>());
    for (const char* k : kBreakFacts) EXPECT_TRUE(r.contains(k)) << k;
    if (r["engine"] == "torch") {
      // Dynamo's names hold Dynamo's figures; the LibTorch engine's are absent.
      EXPECT_EQ(r["breaks_source"], "dynamo");
      EXPECT_TRUE(r["graph_break_count"].is_number());
      EXPECT_TRUE(r["disabled_scope_entries"].is_null());
      EXPECT_TRUE(r["log_graph_break_records"].is_number()) << "the driver's compile log was imported";
    } else {
      EXPECT_EQ(r["breaks_source"], "libtorch");
      EXPECT_TRUE(r["graph_break_count"].is_null()) << "never under Dynamo's name";
      EXPECT_TRUE(r["graph_count"].is_null());
      EXPECT_TRUE(r["disabled_scope_entries"].is_number());
    }
  }
  // Both engines describe the model alike: transformers' parameters, counted once, and the port's.
  hs::storage::CaptureReader rd(capture().db);
  std::map<std::string, json> model_of;
  for (const auto& run : rd.runs()) model_of[run.engine] = run.results.value("model", json());
  for (const char* k : {"params", "bytes", "architecture", "dtype"})
    EXPECT_EQ(model_of["torch"][k], model_of["libtorch"][k]) << "model." << k;
  EXPECT_GT(model_of["torch"].value("params", 0), 0);
  // Each report run's definitions come with it.
  for (const hs::facts::Fact& f : hs::facts::catalogue())
    EXPECT_EQ(capture().report["definitions"][std::string(f.key)]["definition"], f.definition) << f.key;
}

void ExplainAndStatsShowTheReportsFigures() {
  for (const auto& r : compiled_runs()) {
    SCOPED_TRACE("run " + id_of(r));
    const json e = run_cli_json({"explain", capture().db.string(), "--run", id_of(r), "--json"});
    for (const char* k : kBreakFacts) EXPECT_EQ(e[k], r[k]) << "explain " << k;
    if (r["engine"] == "torch") {
      EXPECT_EQ(e["break_reasons"], r["break_reasons"]) << "explain's reasons: one forward";
    }
    const json s = run_cli_json({"stats", capture().db.string(), "--run", id_of(r), "--format", "json"});
    ASSERT_EQ(s["runs"].size(), 1u);
    const json& t = s["runs"][0]["totals"];
    for (const char* k : {"graph_count", "graph_break_count", "recompiles", "frames_skipped", "recompile_limit_hits",
                          "log_graph_break_records", "disabled_scope_entries", "recorded_disabled_scope_entries"})
      EXPECT_EQ(s["runs"][0]["breaks"][k], r[k]) << "stats " << k;
    EXPECT_EQ(t["recorded_disabled_scope_entries"], r["recorded_disabled_scope_entries"]);
    EXPECT_EQ(t["log_graph_break_records"], r["log_graph_break_records"].is_null() ? json(0) : r["log_graph_break_records"]);
    std::map<std::string, int64_t> by_source;
    for (const auto& row : s["reports"]["graph_breaks"]) by_source[row["source"]] += row["count"].get<int64_t>();
    EXPECT_EQ(by_source["libtorch"], r["recorded_disabled_scope_entries"].get<int64_t>());
    EXPECT_EQ(by_source["log"], t["log_graph_break_records"].get<int64_t>());
  }
}

void MarkdownAndHtmlShowTheSameBreaksCell() {
  const Capture& c = capture();
  std::map<std::string, std::map<std::string, std::string>> cell;  // engine -> policy -> breaks text
  for (const auto& r : compiled_runs()) {
    const std::string text = hs::facts::breaks_text(r);
    cell[r["engine"]][r["policy"]] = text;
    // The HTML runs table: the run's row (id run-N) holds the same text.
    const size_t row = c.html.find("id=\"run-" + id_of(r) + "\"");
    ASSERT_NE(row, std::string::npos) << id_of(r);
    const std::string tr = c.html.substr(row, c.html.find("</tr>", row) - row);
    EXPECT_NE(tr.find(">" + text + "<"), std::string::npos) << text << " in " << tr;
  }
  for (const char* engine : {"torch", "libtorch"}) {
    SCOPED_TRACE(engine);
    const std::string wh = cell[engine]["whole-hook"], oo = cell[engine]["offload-only"];
    // The breaks table per engine and the verdict's row name the same figures.
    EXPECT_NE(c.markdown.find("| sharded | default | " + wh + " | " + oo + " |"), std::string::npos) << c.markdown;
    const std::string label(hs::facts::fact(std::string(engine) == "torch" ? "graph_break_count" : "disabled_scope_entries").label);
    EXPECT_NE(c.markdown.find("| " + label + " | " + wh + " | " + oo + " |"), std::string::npos) << c.markdown;
  }
}

TEST(Facts, TheViewerShowsTheReportsFigures) {
  const Capture& c = capture();
  const fs::path layout = c.dir / "compare.json";
  auto r = hookscope({"view", c.db.string(), "--view", "compare", "--size", "1600x1000", "--screenshot",
                      (c.dir / "compare.png").string(), "--layout", layout.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = hs::test::read_json(layout)["compare_rows"];
  size_t checked = 0;
  for (const auto& run : compiled_runs())
    for (const auto& row : rows)
      if (row["run"] == run["id"]) {
        EXPECT_EQ(row["breaks"], viewer_text(hs::facts::breaks_text(run))) << id_of(run);
        ++checked;
      }
  EXPECT_EQ(checked, compiled_runs().size());
  // The Breaks tab of a torch run lists Dynamo's records under the report's figures.
  int with_records = 0;
  for (const auto& run : compiled_runs()) {
    if (run["engine"] != "torch") continue;
    const fs::path breaks = c.dir / ("breaks-" + id_of(run) + ".json");
    r = hookscope({"view", c.db.string(), "--run", id_of(run), "--view", "breaks", "--size", "1400x800", "--screenshot",
                   (c.dir / "breaks.png").string(), "--layout", breaks.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string title = hs::test::read_json(breaks)["table_title"];
    EXPECT_NE(title.find("graph breaks (Dynamo, one forward): " + std::to_string(run["graph_break_count"].get<int64_t>())),
              std::string::npos)
        << title;
    EXPECT_NE(title.find("graph-break records in the log: " + std::to_string(run["log_graph_break_records"].get<int64_t>())),
              std::string::npos)
        << title;
    const json headers = hs::test::read_json(breaks)["table_headers"];
    if (run["log_graph_break_records"].get<int64_t>() > 0) {
      ++with_records;
      EXPECT_NE(headers.dump().find("hooked module call"), std::string::npos) << headers.dump();
    }
    // Each of the log's records is an instant on the timeline, where Dynamo logged it.
    const hs::ui::RunTimeline tl = hs::ui::load_run_timeline(hs::storage::CaptureReader(c.db), run["id"].get<int64_t>());
    size_t instants = 0;
    for (const auto& g : tl.groups)
      for (const auto& t : g.tracks)
        if (t.lane == hs::ui::Lane::DynamoBreaks) instants += t.instants.size();
    EXPECT_EQ(static_cast<int64_t>(instants), run["log_graph_break_records"].get<int64_t>()) << id_of(run);
  }
  EXPECT_GT(with_records, 0) << "the whole-hook torch runs broke";
}

TEST(Facts, TheChromeExportCarriesTheFactsAndImportGivesThemBack) {
  const Capture& c = capture();
  for (const auto& run : compiled_runs()) {
    SCOPED_TRACE("run " + id_of(run));
    const fs::path trace = c.dir / ("run-" + id_of(run) + ".json"), back = c.dir / ("back-" + id_of(run) + ".sqlite");
    auto r = hookscope({"export", c.db.string(), "--run", id_of(run), "--format", "chrome", "-o", trace.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json exported = hs::test::read_json(trace)["hookscope"]["facts"];
    for (const char* k : kBreakFacts) EXPECT_EQ(exported[k], run[k]) << "export " << k;
    fs::remove(back);
    r = hookscope({"import", trace.string(), "-o", back.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = hookscope({"report", back.string(), "--json", (c.dir / "back.json").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json b = hs::test::read_json(c.dir / "back.json")["runs"].at(0);
    for (const char* k : {"engine", "scenario", "policy", "mode", "fullgraph"}) EXPECT_EQ(b[k], run[k]) << k;
    for (const char* k : kBreakFacts) EXPECT_EQ(b[k], run[k]) << "after the round trip: " << k;
    EXPECT_EQ(b["break_reasons"], run["break_reasons"]);
    EXPECT_EQ(b["log_break_reasons"], run["log_break_reasons"]);
    // stats' totals say the same as the run's facts, the log's rows being left behind.
    const fs::path st = c.dir / ("back-stats-" + id_of(run) + ".json");
    r = hookscope({"stats", back.string(), "--format", "json", "-o", st.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json sr = hs::test::read_json(st)["runs"].at(0);
    EXPECT_EQ(sr["totals"]["log_graph_break_records"], sr["breaks"]["log_graph_break_records"].is_null()
                                                           ? json(0)
                                                           : sr["breaks"]["log_graph_break_records"]);
  }
}

void TheVerdictComesFirstWithItsEvidence() {
  const Capture& c = capture();
  const json& v = c.report["verdicts"];
  ASSERT_EQ(v.size(), 2u) << "one block per engine for the one scenario";
  EXPECT_EQ(v[0]["engine"], "torch") << "the real torch.compile first";
  for (const auto& b : v) {
    EXPECT_EQ(b["before"]["policy"], "whole-hook");
    EXPECT_EQ(b["after"]["policy"], "offload-only");
    EXPECT_EQ(b["mode"], "default");
    EXPECT_EQ(b["after"]["fullgraph"], "works");
    EXPECT_EQ(b["before"]["fullgraph"], "raises");
    EXPECT_TRUE(b["policy_speedup"].is_object());
    const double ratio = b["policy_speedup"]["ratio"].get<double>();
    EXPECT_NEAR(ratio, b["before"]["decode_ms_per_token"].get<double>() / b["after"]["decode_ms_per_token"].get<double>(),
                1e-9);
  }
  const size_t verdict = c.markdown.find("### Verdict"), setup = c.markdown.find("### setup"),
               settings = c.markdown.find("### settings");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, setup);
  EXPECT_LT(setup, settings);
  // The whole-hook run the diagnosis rests on is named; in the HTML it links to its row.
  const std::string wh = std::to_string(v[0]["before"]["run"].get<int64_t>());
  EXPECT_NE(c.markdown.find("`whole-hook` compile"), std::string::npos) << c.markdown;
  EXPECT_NE(c.html.find("<a href=\"#run-" + wh + "\">" + wh + "</a>"), std::string::npos);
  EXPECT_LT(c.html.find("id=\"verdict\""), c.html.find("id=\"tables\""));
  EXPECT_LT(c.html.find("id=\"runs-section\""), c.html.find("<details>\n<summary><h2>Settings"));
}

// Each capture-based check makes the capture once in its process (ctest runs each TEST apart):
// the report, explain, stats and HTML checks share one.
TEST(Facts, ReportExplainStatsAndHtmlAgree) {
  EveryRunHasEachBreakFactUnderOneName();
  ExplainAndStatsShowTheReportsFigures();
  MarkdownAndHtmlShowTheSameBreaksCell();
  TheVerdictComesFirstWithItsEvidence();
}

// What recording cost the torch runs' timelines (facts/recording.h): in report.json, the
// Markdown latency table and the HTML runs table, the same figure, from the driver's own times.
TEST(Facts, TheTimelinesRecordingOverheadReadsTheSameInEveryReport) {
  const Capture& c = capture();
  int torch_runs = 0;
  for (const auto& run : c.report["runs"]) {
    const auto o = hs::facts::recording_overhead(run);
    if (run["engine"] != "torch") {
      EXPECT_FALSE(o) << "only the torch engine times a generate unrecorded: run " << id_of(run);
      EXPECT_TRUE(run["recording_overhead"].is_null());
      continue;
    }
    if (run["status"] != "ok") continue;  // e.g. fullgraph raised: no generate ran
    ++torch_runs;
    ASSERT_TRUE(o) << run.dump();
    EXPECT_EQ(run["recording_overhead"].get<double>(), o->ratio);
    EXPECT_EQ(o->ratio, run["profiled_run"]["generate_ms"].get<double>() / o->unrecorded_median_ms);
    EXPECT_GT(o->ratio, 0.2) << "a recorded generate is not five times faster than an unrecorded one";
    const std::string text = hs::facts::recording_overhead_text(*o);
    if (!run["fullgraph"].get<bool>()) {  // the latency table's runs
      EXPECT_NE(c.markdown.find(" | " + text + " |"), std::string::npos) << text;
    }
    EXPECT_NE(c.html.find(">" + text + "</td>"), std::string::npos) << text;
  }
  EXPECT_GT(torch_runs, 0);
}

// The same figure in the views that read a capture directly: `stats --format json` and `explain
// --json` (report.json's number, null where not measured), the viewer's timeline header (under
// the catalogue's label) and the Chrome export's run object.
TEST(Facts, TheRecordingOverheadReadsTheSameInStatsExplainTheViewerAndTheExport) {
  const Capture& c = capture();
  const json stats = run_cli_json({"stats", c.db.string(), "--format", "json", "--report", "hook_time"});
  std::map<int64_t, json> stats_of;
  for (const auto& s : stats["runs"]) stats_of[s["run"].get<int64_t>()] = s.value("recording_overhead", json("absent"));
  const std::string label(hs::facts::fact("recording_overhead").label);
  int torch_runs = 0;
  for (const auto& run : c.report["runs"]) {
    if (run["status"] != "ok") continue;  // e.g. fullgraph raised: nothing ran to export
    SCOPED_TRACE("run " + id_of(run));
    const auto o = hs::facts::recording_overhead(run);
    const json want = o ? json(o->ratio) : json(nullptr);
    EXPECT_EQ(run_cli_json({"explain", c.db.string(), "--run", id_of(run), "--json"})["recording_overhead"], want);
    const int64_t id = run["id"].get<int64_t>();
    EXPECT_EQ(stats_of.count(id) ? stats_of[id] : json("not in stats"), want);
    const fs::path trace = c.dir / ("overhead-" + id_of(run) + ".json");
    auto r = hookscope({"export", c.db.string(), "--run", id_of(run), "--format", "chrome", "-o", trace.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json exported = hs::test::read_json(trace)["hookscope"]["recording_overhead"];
    EXPECT_EQ(o ? exported.value("ratio", json()) : exported, want);
    if (!o) continue;
    ++torch_runs;
    const fs::path layout = c.dir / ("overhead-" + id_of(run) + "-layout.json");
    r = hookscope({"view", c.db.string(), "--run", id_of(run), "--size", "1600x600", "--screenshot",
                   (c.dir / "overhead.png").string(), "--layout", layout.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string header = hs::test::read_json(layout)["run_headers"].at(0);
    const std::string tail = viewer_text("    " + label + " " + hs::facts::recording_overhead_text(*o));
    EXPECT_EQ(header.substr(header.size() - std::min(header.size(), tail.size())), tail) << header;
  }
  EXPECT_GT(torch_runs, 0);
}

// The verdict rules on made-up report runs: the ratio, each side against eager, and a result
// against the hypothesis (offload-only breaking more) said as such.
json made_up_run(int64_t id, const std::string& policy, const std::string& mode, std::vector<double> decode,
                 std::optional<int64_t> breaks) {
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return json{{"median", v[v.size() / 2]}, {"min", v.front()}, {"max", v.back()}, {"q1", v[v.size() / 4]},
                {"q3", v[(3 * v.size()) / 4]}, {"iqr", v[(3 * v.size()) / 4] - v[v.size() / 4]}, {"mad", 0.0},
                {"n", v.size()}};
  };
  json r{{"id", id}, {"engine", "torch"}, {"scenario", "cpu-offload"}, {"policy", policy}, {"mode", mode},
         {"fullgraph", false}, {"status", "ok"}, {"decode_ms_per_token", spread(decode)},
         {"graph_break_count", breaks ? json(*breaks) : json(nullptr)}, {"break_reasons", json::array()}};
  if (mode != "eager") r["speedup"] = {{"vs_eager", 0.8}, {"verdict", "slower"}, {"why", "made up"}};
  return r;
}

TEST(Facts, AResultAgainstTheHypothesisIsSaid) {
  json report{{"runs", json::array()}};
  report["runs"].push_back(made_up_run(1, "whole-hook", "eager", {10, 10.1, 10.2, 10.3}, std::nullopt));
  report["runs"].push_back(made_up_run(2, "whole-hook", "default", {12, 12.1, 12.2, 12.3}, 22));
  report["runs"].push_back(made_up_run(3, "offload-only", "eager", {10, 10.1, 10.2, 10.3}, std::nullopt));
  report["runs"].push_back(made_up_run(4, "offload-only", "default", {14, 14.1, 14.2, 14.3}, 29));
  const json v = hs::facts::scenario_verdicts(report);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["before"]["run"], 2);
  EXPECT_EQ(v[0]["after"]["run"], 4);
  EXPECT_NEAR(v[0]["policy_speedup"]["ratio"].get<double>(), 12.15 / 14.15, 0.01);
  EXPECT_EQ(v[0]["policy_speedup"]["verdict"], "slower");
  ASSERT_EQ(v[0]["against_hypothesis"].size(), 2u) << v[0].dump();
  EXPECT_EQ(v[0]["against_hypothesis"][0], (json{{"kind", "more_breaks"}, {"before", 22}, {"after", 29}}));
  const hs::facts::Markup plain{[](const std::string& s) { return "`" + s + "`"; }, [](const std::string& s) { return s; }};
  const auto claims = hs::facts::diagnosis(v[0], plain);
  ASSERT_FALSE(claims.empty());
  EXPECT_EQ(claims.front().text, "`offload-only` compiled decode is 1.16× slower than `whole-hook` compiled (12.20 → 14.20 ms/token)")
      << claims.front().text;
  EXPECT_EQ(claims.front().runs, (std::vector<int64_t>{2, 4}));
  EXPECT_NE(claims.back().text.find("Against the hypothesis here: `offload-only` gives more breaks (29) than `whole-hook` (22)"),
            std::string::npos)
      << claims.back().text;
}

// One round per cell cannot judge eager's drift, but eager moving 3× between the two cells is
// said beside the raw ratio.
TEST(Facts, EagerMovingBetweenTheCellsIsSaidEvenWhenNotJudged) {
  json report{{"runs", json::array()}};
  json b = made_up_run(2, "whole-hook", "default", {12}, 22), a = made_up_run(4, "offload-only", "default", {30}, 0);
  b["eager_decode_ms_per_token"] = b["decode_ms_per_token"];
  b["eager_decode_ms_per_token"]["median"] = 10.0;
  a["eager_decode_ms_per_token"] = a["decode_ms_per_token"];
  a["eager_decode_ms_per_token"]["median"] = 30.0;
  report["runs"] = {b, a};
  const json v = hs::facts::scenario_verdicts(report);
  ASSERT_EQ(v.size(), 1u);
  const std::string why = v[0]["policy_speedup"]["why"];
  EXPECT_NE(why.find("eager itself moved 3.0× between the two cells (whole-hook 10.00, offload-only 30.00 ms/token)"),
            std::string::npos)
      << why;
}

// A capture of one policy still opens with a verdict: what its compiled run did against eager,
// its breaks, and the command that runs the comparison.
TEST(Facts, OnePolicyGetsItsVerdictAndTheCommandForTheComparison) {
  json report{{"runs", json::array()}};
  report["runs"].push_back(made_up_run(1, "whole-hook", "eager", {10, 10.1, 10.2, 10.3}, std::nullopt));
  report["runs"].push_back(made_up_run(2, "whole-hook", "default", {12, 12.1, 12.2, 12.3}, 22));
  const json v = hs::facts::scenario_verdicts(report);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["before"]["run"], 2);
  EXPECT_TRUE(v[0]["after"].is_null());
  EXPECT_TRUE(v[0]["policy_speedup"].is_null());
  const hs::facts::Markup plain{[](const std::string& s) { return "`" + s + "`"; }, [](const std::string& s) { return s; }};
  const auto claims = hs::facts::diagnosis(v[0], plain);
  ASSERT_EQ(claims.size(), 2u);
  EXPECT_EQ(claims[0].text.rfind("`whole-hook` compile is 1.25× slower than eager: Dynamo broke the forward 22 times", 0), 0u)
      << claims[0].text;
  EXPECT_EQ(claims[0].runs, (std::vector<int64_t>{2}));
  EXPECT_EQ(claims[1].text,
            "no `offload-only` run of this scenario and mode in the capture (not captured, or failed): `hookscope "
            "capture --policies whole-hook,offload-only` runs the comparison");
}

}  // namespace

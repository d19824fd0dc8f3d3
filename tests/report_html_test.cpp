// `hookscope report --html` / `--assets`: a capture of the tiny Llama (LibTorch engine) reported
// as one self-contained page, read back by Python's html.parser (tests/oracles/html_report_check.py):
// nothing outside the file, the pictures present with their lanes, one table row per run
// (counted by SQL in the capture), text from the capture escaped; the SVG pictures and the
// Markdown converter on their own; and a headless Chromium screenshot when Chromium is there.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "reports/report.h"
#include "reports/report_html.h"
#include "reports/report_svg.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

// Text a capture could hold that breaks HTML unless escaped.
const std::string kNastyLabel = "<script>alert(\"x&y\")</script> '<b>";
const std::string kNastyModule = "model.layers.0<&>\"'";

struct Sql {
  sqlite3* db = nullptr;
  explicit Sql(const fs::path& p) {
    if (sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) throw std::runtime_error("open " + p.string());
  }
  ~Sql() { sqlite3_close(db); }
  // The first column of every row of `q`, as text.
  std::vector<std::string> column(const std::string& q) const {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, q.c_str(), -1, &st, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    std::vector<std::string> out;
    while (sqlite3_step(st) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    return out;
  }
  void exec(const std::string& q) const {
    if (sqlite3_exec(db, q.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
  }
};

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

struct Page {
  fs::path dir, db, html, md;
  std::string raw, markdown;
  json report, parsed;  ///< the report JSON; the oracle's reading of the page and the asset files
};

json check_html(const fs::path& html, const std::vector<fs::path>& svgs = {}) {
  std::vector<std::string> args{"--html", html.string()};
  if (!svgs.empty()) args.push_back("--svg");
  for (const auto& s : svgs) args.push_back(s.string());
  return json::parse(hs::test::run_oracle("html_report_check.py", args));
}

// One capture (two scenarios × both policies × eager/default), its strings made hostile, reported
// as HTML + Markdown with assets; shared by the tests of this process.
const Page& page() {
  static Page p = [] {
    Page k;
    k.dir = hs::test::scratch_dir("report-html-" + std::to_string(getpid()));
    k.db = k.dir / "capture.sqlite";
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--devices",
                        "2", "--scenarios", "sharded,cpu-offload", "--modes", "eager,default", "--prompt-ids", "5,17,99,3",
                        "--max-new-tokens", "3", "--repeats", "2", "--warmup", "1", "--out", k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    {
      Sql sql(k.db);
      sql.exec("UPDATE RUNS SET label = " + quoted(kNastyLabel) + " WHERE id = (SELECT MIN(id) FROM RUNS)");
      sql.exec("UPDATE StringIds SET value = " + quoted(kNastyModule) + " WHERE value = 'model.layers.0'");
    }
    k.html = k.dir / "out" / "report.html";
    k.md = k.dir / "out" / "report.md";
    fs::create_directories(k.dir / "out");
    auto rep = hookscope({"report", k.db.string(), "--html", k.html.string(), "--markdown", k.md.string(), "--assets",
                          (k.dir / "out" / "assets").string(), "--json", (k.dir / "out" / "report.json").string()});
    if (rep.exit_code != 0) throw std::runtime_error("report failed: " + rep.err);
    k.raw = hs::test::read_file(k.html);
    k.markdown = hs::test::read_file(k.md);
    k.report = hs::test::read_json(k.dir / "out" / "report.json");
    std::vector<fs::path> svgs;
    for (const auto& e : fs::directory_iterator(k.dir / "out" / "assets")) svgs.push_back(e.path());
    std::sort(svgs.begin(), svgs.end());
    k.parsed = check_html(k.html, svgs);
    return k;
  }();
  return p;
}

const json* table_with_header(const json& parsed, const std::string& cell) {
  for (const auto& t : parsed["tables"])
    for (const auto& h : t["header"])
      if (h.get<std::string>() == cell) return &t;
  return nullptr;
}

bool contains_text(const json& texts, const std::string& needle) {
  for (const auto& t : texts)
    if (t.get<std::string>().find(needle) != std::string::npos) return true;
  return false;
}

TEST(ReportHtml, StandsAloneWithNothingOutsideTheFile) {
  const json& p = page().parsed;
  EXPECT_TRUE(p["doctype"].get<bool>());
  EXPECT_TRUE(p["external"].empty()) << p["external"].dump();
  EXPECT_TRUE(p["active"].empty()) << p["active"].dump();
  EXPECT_TRUE(p["errors"].empty()) << p["errors"].dump();
  EXPECT_EQ(p["css_imports"], 0);
  ASSERT_FALSE(p["svg_xml_ok"].empty());
  for (const auto& ok : p["svg_xml_ok"]) EXPECT_TRUE(ok.get<bool>());
  EXPECT_NE(page().raw.find("<style>"), std::string::npos);
}

TEST(ReportHtml, TablesHaveOneRowPerRunScenarioAndCell) {
  const Page& pg = page();
  Sql sql(pg.db);
  const auto ids = sql.column("SELECT id FROM RUNS ORDER BY id");
  const json* runs = nullptr;
  for (const auto& t : pg.parsed["tables"])
    if (t["id"] == "runs") runs = &t;
  ASSERT_NE(runs, nullptr);
  ASSERT_EQ((*runs)["rows"].size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*runs)["rows"][i][0].get<std::string>(), ids[i]);
  // The Markdown's tables: correctness per scenario, latency per scenario × mode × policy.
  const json* checks = table_with_header(pg.parsed, "prefill argmax = eager");
  ASSERT_NE(checks, nullptr);
  EXPECT_EQ(std::to_string((*checks)["rows"].size()), sql.column("SELECT COUNT(DISTINCT scenario) FROM RUNS")[0]);
  const json* latency = table_with_header(pg.parsed, "eager decode, ms/token (interleaved)");
  ASSERT_NE(latency, nullptr);
  EXPECT_EQ(std::to_string((*latency)["rows"].size()),
            sql.column("SELECT COUNT(*) FROM (SELECT DISTINCT scenario, mode, policy FROM RUNS WHERE fullgraph = 0)")[0]);
  // Every Markdown table made it into the page.
  size_t md_tables = 0;
  for (size_t at = 0; (at = pg.markdown.find("\n|---", at)) != std::string::npos; ++at) ++md_tables;
  EXPECT_EQ(pg.parsed["tables"].size(), md_tables + 1);  // + the runs table
}

TEST(ReportHtml, ChartAndTimelinesAreInlineSvgWithTheirLanes) {
  const Page& pg = page();
  Sql sql(pg.db);
  const json& svgs = pg.parsed["svgs"];
  // The chart, then by default one compiled run per policy of the first scenario.
  std::vector<std::string> want_runs;
  const std::string first = sql.column("SELECT scenario FROM RUNS ORDER BY id LIMIT 1")[0];
  for (const auto& pol : sql.column("SELECT DISTINCT policy FROM RUNS ORDER BY id"))
    want_runs.push_back(sql.column("SELECT id FROM RUNS WHERE scenario = " + quoted(first) + " AND policy = " + quoted(pol) +
                                   " AND mode != 'eager' AND fullgraph = 0 ORDER BY id LIMIT 1")[0]);
  ASSERT_EQ(svgs.size(), 1 + want_runs.size()) << pg.parsed["headings"].dump();
  const json& chart = svgs[0];
  for (const char* t : {"sharded · default", "cpu-offload · eager", "whole-hook", "offload-only", "ms"})
    EXPECT_TRUE(contains_text(chart["texts"], t)) << t;
  for (size_t i = 0; i < want_runs.size(); ++i) {
    const json& tl = svgs[1 + i];
    EXPECT_EQ(tl["label"].get<std::string>().rfind("run " + want_runs[i] + ": " + first, 0), 0u) << tl["label"];
    for (const char* lane : {"compute", "transfers in", "transfers out", "hooks", "compiler-disabled", "compiled regions",
                             "graph breaks", "generation steps", "accelerator 0"})
      EXPECT_TRUE(contains_text(tl["texts"], lane)) << lane << " in " << tl["label"];
    EXPECT_TRUE(contains_text(tl["texts"], " ms")) << "time axis";
    EXPECT_NE(pg.raw.find("per host thread (model forward, hooks, compiler-disabled, compiled regions, graph breaks ▼, generation steps)"),
              std::string::npos)
        << "the caption names the lanes drawn";
  }
  for (const auto& s : svgs) EXPECT_LE(s["elements"].get<int>(), 20000) << s["label"];
}

TEST(ReportHtml, TextFromTheCaptureIsEscaped) {
  const Page& pg = page();
  EXPECT_EQ(pg.raw.find(kNastyLabel), std::string::npos);
  EXPECT_EQ(pg.raw.find("<script"), std::string::npos);
  const json* runs = nullptr;
  for (const auto& t : pg.parsed["tables"])
    if (t["id"] == "runs") runs = &t;
  ASSERT_NE(runs, nullptr);
  EXPECT_EQ((*runs)["header"][1], "label");
  EXPECT_EQ((*runs)["rows"][0][1].get<std::string>(), kNastyLabel);
  // A module name from the capture's string table, in the timelines' texts and tooltips.
  bool module_seen = false;
  for (const auto& s : pg.parsed["svgs"]) module_seen |= contains_text(s["texts"], kNastyModule);
  EXPECT_TRUE(module_seen);
}

TEST(ReportHtml, SettingsAndEveryCheckAreExplained) {
  const Page& pg = page();
  const json& h = pg.parsed["headings"];
  EXPECT_NE(std::find(h.begin(), h.end(), "Settings"), h.end()) << h.dump();
  if (pg.report.contains("settings") && pg.report["settings"].is_object()) {
    for (const auto& [k, v] : pg.report["settings"].items()) EXPECT_TRUE(pg.parsed["settings"].contains(k)) << k;
  }
  for (const char* check : {"prefill argmax = eager", "logits bit-identical", "params on meta after forward", "fullgraph",
                            "vs eager", "†", "graph break"})
    EXPECT_NE(pg.raw.find("\">" + hs::reports::xml_escape(check) + "</dt>"), std::string::npos) << check;
  // A check explained once; the runs table links back to it, and every link lands.
  EXPECT_NE(pg.raw.find("Explained above: <a href=\"#check-"), std::string::npos);
  EXPECT_TRUE(pg.parsed["broken_fragments"].empty()) << pg.parsed["broken_fragments"].dump();
  EXPECT_NE(pg.raw.find("<th title=\"Every prefill logit equals"), std::string::npos);
}

TEST(ReportHtml, AssetsAreSvgFilesTheMarkdownLinks) {
  const Page& pg = page();
  const json& files = pg.parsed["svg_files"];
  ASSERT_EQ(files.size(), pg.parsed["svgs"].size());
  for (const auto& f : files) {
    EXPECT_TRUE(f["xml_ok"].get<bool>()) << f.dump();
    EXPECT_TRUE(f["external"].empty()) << f.dump();
    const std::string name = fs::path(f["path"].get<std::string>()).filename().string();
    EXPECT_NE(pg.markdown.find("](assets/" + name + ")"), std::string::npos) << name;
  }
  EXPECT_TRUE(fs::exists(pg.dir / "out" / "assets" / "compare.svg"));
  // The page's tables are the Markdown's, without the picture links.
  EXPECT_EQ(pg.raw.find("assets/compare.svg"), std::string::npos);
}

TEST(ReportHtml, NeverWritesOverTheCapture) {
  const Page& pg = page();
  const std::string before = hs::test::read_file(pg.db);
  auto r = hookscope({"report", pg.db.string(), "--html", pg.db.string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--html"), std::string::npos) << r.err;
  r = hookscope({"report", pg.db.string(), "--markdown", (pg.dir / "x.md").string(), "--assets", pg.db.string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a folder"), std::string::npos) << r.err;
  r = hookscope({"report", pg.db.string(), "--assets", (pg.dir / "a").string()});
  EXPECT_NE(r.exit_code, 0) << "--assets needs --markdown";
  EXPECT_EQ(hs::test::read_file(pg.db), before);
  EXPECT_FALSE(fs::exists(pg.dir / "x.md"));
}

TEST(ReportHtml, TimelineRunsAreChosenByIdAndUnknownIdsRefused) {
  const Page& pg = page();
  Sql sql(pg.db);
  const std::string eager = sql.column("SELECT id FROM RUNS WHERE mode = 'eager' ORDER BY id DESC LIMIT 1")[0];
  const fs::path out = pg.dir / "chosen.html";
  auto r = hookscope({"report", pg.db.string(), "--html", out.string(), "--timeline-runs", eager});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json p = check_html(out);
  ASSERT_EQ(p["svgs"].size(), 2u);
  EXPECT_EQ(p["svgs"][1]["label"].get<std::string>().rfind("run " + eager + ": ", 0), 0u) << p["svgs"][1]["label"];
  // A run named again is drawn once (200 repeats had taken 18 s, 2.6 GB and 49 MB of HTML).
  std::string again = eager;
  for (int i = 0; i < 200; ++i) again += "," + eager;
  r = hookscope({"report", pg.db.string(), "--html", out.string(), "--timeline-runs", again});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(check_html(out)["svgs"].size(), 2u);
  r = hookscope({"report", pg.db.string(), "--html", out.string(), "--timeline-runs", "9999"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no run 9999"), std::string::npos) << r.err;
}

// ---- without a capture ----------------------------------------------------------------------

json run_json(int id, const std::string& pol, const std::string& mode, double ms, double spread) {
  return {{"id", id}, {"scenario", "sharded"}, {"policy", pol}, {"mode", mode}, {"fullgraph", false},
          {"status", "ok"}, {"engine", "libtorch"}, {"error", nullptr}, {"argmax_match", true},
          {"logits_identical", id == 2 ? json(false) : json(true)}, {"logits_max_abs_diff", 3e-6},
          {"logits_max_ulp", 7}, {"params_on_meta_after", true}, {"weight_devices", {"0", "1"}},
          {"break_reasons", json::array()}, {"graph_break_count", nullptr}, {"disabled_scope_entries", 4},
          {"decode_ms_per_token", {{"median", ms}, {"min", ms - spread}, {"max", ms + spread}, {"n", 3}}}, {"new_tokens", 4}};
}

json sample_report() {
  json runs = json::array({run_json(1, "whole-hook", "eager", 100, 5), run_json(2, "whole-hook", "default", 97, 5),
                           run_json(3, "offload-only", "eager", 100, 2), run_json(4, "offload-only", "default", 50, 2)});
  // The verdicts build_report gives them (measurement::judge_runs).
  runs[1]["speedup"] = {{"vs_eager", 100.0 / 97}, {"verdict", "within noise"}, {"why", "overlap"}};
  runs[3]["speedup"] = {{"vs_eager", 2.0}, {"verdict", "faster"}, {"why", "apart"}};
  return {{"schema", 2},
          {"model", {{"id", "tiny <model>"}, {"path", "/x"}, {"dtype", "f32"}, {"params", 1000000}, {"bytes", 4000000}}},
          {"devices", json::array({{{"id", 0}, {"kind", "emulated"}, {"backing", "cpu"}, {"max_memory", nullptr}}})},
          {"runs", runs}};
}

TEST(ReportHtmlRender, SettingsArePrintedWhateverKeysTheyHave) {
  json rep = sample_report();
  rep["settings"] = {{"prompt", "Hi <there> & \"you\""},
                     {"max_new_tokens", 8},
                     {"versions", {{"torch", "2.5.1"}, {"transformers", "4.46"}}},
                     {"command_line", {"hookscope", "capture", "--prompt", "a b"}}};
  const fs::path dir = hs::test::scratch_dir("report-html-settings-" + std::to_string(getpid()));
  {
    std::ofstream(dir / "r.html") << hs::reports::render_html(rep, hs::reports::render_markdown(rep), {}, "c.sqlite");
  }
  const json p = check_html(dir / "r.html");
  EXPECT_TRUE(p["errors"].empty()) << p["errors"].dump();
  EXPECT_EQ(p["settings"]["prompt"], "Hi <there> & \"you\"");
  EXPECT_EQ(p["settings"]["max_new_tokens"], "8");
  EXPECT_NE(p["settings"]["versions"].get<std::string>().find("2.5.1"), std::string::npos);
  EXPECT_EQ(p["settings"]["command_line"], "hookscope capture --prompt a b");
  EXPECT_EQ(p["headings"][0], "hookscope report: tiny <model>");
}

TEST(ReportHtmlRender, ChartShowsTheReportsVerdicts) {
  json rep = sample_report();
  std::string svg = hs::reports::compare_chart_svg(rep);
  EXPECT_NE(svg.find("1.03× within noise"), std::string::npos) << svg;
  EXPECT_NE(svg.find("2.00× faster"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("1.03× faster"), std::string::npos);
  // The chart draws the report's verdict, not a rule of its own: a verdict made "within noise"
  // by drift (ranges apart) reads so in the chart too.
  rep["runs"][3]["speedup"]["verdict"] = "within noise";
  svg = hs::reports::compare_chart_svg(rep);
  EXPECT_NE(svg.find("2.00× within noise"), std::string::npos) << svg;
  json none = sample_report();
  for (auto& r : none["runs"]) r["decode_ms_per_token"] = nullptr;
  EXPECT_EQ(hs::reports::compare_chart_svg(none), "");
}

TEST(ReportHtmlRender, MarkdownConstructsBecomeHtml) {
  const std::string h = hs::reports::markdown_to_html(
      "## title `a<b>`\n\n| scenario | logits bit-identical |\n|---|---|\n| x | **no** (max \\|Δ\\| 1e-06, 2 ulp) |\n"
      "| `f\\|g` | `` raises: <x> `` |\n| `a|b` |\n\n> **note** & more\n\n- one\n- two\n\npara\nline\n");
  EXPECT_NE(h.find("<h3>title <code>a&lt;b&gt;</code></h3>"), std::string::npos) << h;
  EXPECT_NE(h.find("<td class=\"bad\"><strong>no</strong> (max |Δ| 1e-06, 2 ulp)</td>"), std::string::npos) << h;
  // As in GFM, a pipe in a cell's code span is `\|`; an unescaped one ends the cell.
  EXPECT_NE(h.find("<td><code>f|g</code></td><td><code>raises: &lt;x&gt;</code></td>"), std::string::npos) << h;
  EXPECT_NE(h.find("<td>`a</td><td>b`</td>"), std::string::npos) << h;
  EXPECT_NE(h.find("<blockquote><p><strong>note</strong> &amp; more</p></blockquote>"), std::string::npos) << h;
  EXPECT_NE(h.find("<ul>\n<li>one</li>\n<li>two</li>\n</ul>"), std::string::npos) << h;
  EXPECT_NE(h.find("<p>para line</p>"), std::string::npos) << h;
  EXPECT_NE(h.find("\">logits bit-identical</dt>"), std::string::npos) << h;
}

TEST(ReportHtmlRender, TimelineStaysWithinItsElementBudget) {
  // Ten lanes of 505 one-pixel events one pixel apart (1010 px wide, 1 µs per pixel): each is
  // drawn as itself while the budget allows, merged into blocks when it does not.
  hs::ui::RunTimeline tl;
  tl.run.id = 3;
  tl.run.scenario = "sharded";
  tl.strings = {"", "model.layers.0"};
  hs::ui::LaneGroup g;
  g.device = "0";
  g.title = "accelerator 0";
  for (int lane = 0; lane < 10; ++lane) {
    hs::ui::Track t;
    t.name = "compute";
    std::vector<hs::ui::Slice> slices;
    for (int64_t i = 0; i < 505; ++i)
      slices.push_back({i * 2000, i * 2000 + 1000, 1, static_cast<uint32_t>(i), hs::ui::kCompute});
    t.levels = hs::ui::build_levels(slices);
    g.tracks.push_back(t);
  }
  tl.groups.push_back(g);
  tl.duration_ns = 1010 * 1000;
  auto elements = [](const std::string& svg) {
    size_t n = 0;
    for (size_t at = 0; (at = svg.find('<', at)) != std::string::npos; ++at) n += svg[at + 1] != '/';
    return n;
  };
  const std::string all = hs::reports::timeline_svg(tl, tl.duration_ns);
  EXPECT_GT(elements(all), 10000u);
  size_t said_events = 0;  // only the title bar's count: nothing merged
  for (size_t at = 0; (at = all.find(" events", at)) != std::string::npos; ++at) ++said_events;
  EXPECT_EQ(said_events, 1u);
  const std::string small = hs::reports::timeline_svg(tl, tl.duration_ns, 3000);
  EXPECT_LE(elements(small), 3000u);
  EXPECT_NE(small.find("505 events"), std::string::npos);  // a lane merged into one block
  EXPECT_NE(small.find(">compute</text>"), std::string::npos);
}

// ---- in a browser ---------------------------------------------------------------------------

TEST(ReportHtml, HeadlessChromiumRendersThePageOffline) {
  if (hs::test::run({"sh", "-c", "command -v chromium || command -v chromium-browser"}).exit_code != 0)
    GTEST_SKIP() << "no Chromium on PATH (Debian: apt-get install chromium); tools/report_screenshot.sh needs it";
  const Page& pg = page();
  const fs::path png = pg.dir / "out" / "report.png";
  auto r = hs::test::run({(hs::test::source_dir() / "tools/report_screenshot.sh").string(), pg.html.string(), png.string(), "1400x3000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bytes = hs::test::read_file(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
           (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1400u);  // IHDR width
  EXPECT_EQ(be32(20), 3000u);  // IHDR height
}

}  // namespace

// `report --html`: the Markdown's tables converted to HTML with each check explained beside
// them, the settings, a table of every run, and the pictures inline — one file, no scripts.
#include "reports/report_html.h"

#include "output/text.h"
#include "reports/report.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/recording.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace hs::reports {

using nlohmann::json;

const std::vector<std::pair<std::string, std::string>>& check_explanations() {
  static const std::vector<std::pair<std::string, std::string>> e = {
      {"fullgraph",
       "<code>torch.compile(model, fullgraph=True)</code> under the policy. <b>works</b>: the whole forward compiled "
       "into one graph. <b>raises</b>: the compiler refused (Dynamo's <code>Unsupported</code> on the torch engine, its "
       "equivalent on the LibTorch engine), naming the compiler-disabled function and module it stopped at. In the runs "
       "table: whether the run compiled with <code>fullgraph=True</code>."},
      {"prefill argmax = eager",
       "The token the hooked model picks after the prompt (the argmax of the prefill's last logits) is the one an "
       "undispatched single-device reference picks. <b>yes</b> when every run of the scenario agrees; <b>no</b>: the "
       "hooks or the compiler changed the model's answer."},
      {"logits bit-identical",
       "Every prefill logit equals the reference's bit for bit, in the model's dtype. When not, the cell says how far: "
       "the largest absolute difference (max |Δ|) and the largest distance in ulps, units in the last place of the "
       "dtype (how many representable numbers apart: 1 ulp is a rounding difference, thousands a different "
       "computation); a NaN where the reference has a number is named. Offloading moves weights without changing "
       "them, so eager offloaded runs should be bit-identical; compiled modes may reorder float sums by a few ulps."},
      {"params on meta after forward",
       "After the forward, the parameters of offloaded modules are back on the <code>meta</code> device: their weights "
       "live only in the CPU weights map or the offload folder, as accelerate's <code>AlignDevicesHook</code> leaves "
       "them. <b>no</b>: onloaded weights stayed resident, memory the offload was meant to free."},
      {"weights on", "The devices that hold the model's weights in the scenario (accelerators by index, cpu, disk)."},
      {"vs eager",
       "Speed-up against eager under the same policy: eager's decode ms/token ÷ this mode's (above 1 = faster), the "
       "median of the per-round ratios when the engine measured eager and compiled in alternation (A B A B in one "
       "cell, after its warm-ups). <b>faster</b> / <b>slower</b> only when both sides have at least 3 measured "
       "generates, their interquartile ranges are apart and every round's ratio is on the same side of 1; otherwise "
       "<i>within noise</i> (with the reason, e.g. eager itself drifted between policies by more than its spread, "
       "and by a ratio at least as large as this effect) or "
       "<i>not judged</i>."},
      {"prefill, ms", "The prompt's forward (the first step of <code>generate</code>): median (min–max) over the repeats."},
      {"decode",
       "Decode time per token of one <code>generate</code>, prefill excluded: (end of the last step − end of the "
       "prefill) ÷ (new tokens − 1); median (interquartile range in the tables, min–max in the chart) over the "
       "measured generates, which follow the warm-ups. tokens/s = new tokens ÷ the whole generate."},
      {"graph break",
       "Torch engine: Dynamo's own <code>graph_break_count</code> from <code>torch._dynamo.explain</code> of one "
       "compiled forward, the times Dynamo split the forward into separate graphs (the code between them runs eagerly "
       "in Python, and nothing fuses across a break). An imported run: its compile log's graphs − 1 over every "
       "compile the log holds, one forward's count only when the log holds one forward."},
      {"†",
       "LibTorch engine: compiler-disabled scopes entered inside a captured region of one compiled forward, where "
       "hookscope's port cuts its regions. Not Dynamo's <code>graph_break_count</code>: Dynamo also skips frames whose "
       "loops break and stops at <code>recompile_limit</code>; the torch engine reports Dynamo's real count."},
      {"peak resident memory",
       "The largest bytes resident on each device over the scenario's runs: weights, buffers and the activations the "
       "hooks moved; not the KV cache, forward temporaries or allocator overhead."},
      {"break sites",
       "Where the LibTorch engine's compiled regions were cut: the compiler-disabled function and the module it ran "
       "for, counted over all runs."},
      {"break reasons",
       "Dynamo's reasons for its graph breaks, grouped by gb code (Dynamo's catalogue of break kinds), reason and the "
       "user frame it broke in; count = breaks over all compiled runs."},
      {"transfers",
       "Activation transfers recorded in the run (the hooks moving inputs and outputs between devices): count and "
       "bytes, summed by SQL over the capture's events."},
      {"weight onloads",
       "Weight onloads recorded in the run: an offloaded module's weights materialised on its execution device "
       "before its forward (count and bytes)."},
      {"status", "ok: the run finished; error: it raised (its first line shown); incomplete: the capture stopped "
                 "before the run ended, so its numbers are missing."},
  };
  return e;
}

namespace {

std::string esc(std::string_view s) { return xml_escape(s); }

std::string strip_tags(const std::string& html) {
  std::string out;
  bool tag = false;
  for (char c : html) {
    if (c == '<') tag = true;
    else if (c == '>') tag = false;
    else if (!tag) out += c;
  }
  return out;
}

// Where the run of exactly `n` backticks that closes a code span opened before `from` starts.
size_t closing_ticks(std::string_view s, size_t from, size_t n) {
  for (size_t p = s.find('`', from); p != std::string_view::npos; p = s.find('`', p)) {
    size_t q = p;
    while (q < s.size() && s[q] == '`') ++q;
    if (q - p == n) return p;
    p = q;
  }
  return std::string_view::npos;
}

// The length of "[N](#run-N)" at `at` (N digits, the same twice), else 0: the only link the
// report's Markdown writes (capture text cannot make one: md_text escapes its brackets).
size_t run_link_length(std::string_view s, size_t at) {
  if (s[at] != '[') return 0;
  size_t i = at + 1;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  const std::string_view id = s.substr(at + 1, i - at - 1);
  const std::string tail = "](#run-" + std::string(id) + ")";
  if (id.empty() || id.size() > 18 || s.compare(i, tail.size(), tail) != 0) return 0;
  return i + tail.size() - at;
}

std::string inline_html(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\\' && i + 1 < s.size() && std::ispunct(static_cast<unsigned char>(s[i + 1]))) {
      out += esc(s.substr(i + 1, 1));
      i += 2;
    } else if (c == '`') {
      size_t k = i;
      while (k < s.size() && s[k] == '`') ++k;
      const size_t close = closing_ticks(s, k, k - i);
      if (close == std::string_view::npos) {
        out += s.substr(i, k - i);
        i = k;
        continue;
      }
      std::string_view code = s.substr(k, close - k);
      if (code.size() >= 2 && code.front() == ' ' && code.back() == ' ' && code.find_first_not_of(' ') != code.npos)
        code = code.substr(1, code.size() - 2);
      out += "<code>" + esc(code) + "</code>";
      i = close + (k - i);
    } else if (const size_t n = run_link_length(s, i); n > 0) {  // "[8](#run-8)": the verdict's evidence
      const std::string_view id = s.substr(i + 1, s.find(']', i) - i - 1);
      out += "<a href=\"#run-" + std::string(id) + "\">" + std::string(id) + "</a>";
      i += n;
    } else if (s.compare(i, 2, "**") == 0 && s.find("**", i + 2) != std::string_view::npos &&
               s.find("**", i + 2) > i + 2) {
      const size_t close = s.find("**", i + 2);
      out += "<strong>" + inline_html(s.substr(i + 2, close - i - 2)) + "</strong>";
      i = close + 2;
    } else {  // one character (all bytes of a UTF-8 one: esc writes a lone byte as U+FFFD)
      const size_t n = std::max<size_t>(output::utf8_length_at(s, i), 1);
      out += esc(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string_view::npos ? "" : std::string(s.substr(a, b - a + 1));
}

// A cell's text as GFM hands it to the inline parser: each `\|` a pipe (in code spans too),
// every other backslash kept for the inline escapes.
std::string unescape_pipes(std::string_view cell) {
  std::string out;
  out.reserve(cell.size());
  for (size_t i = 0; i < cell.size(); ++i)
    if (!(cell[i] == '\\' && i + 1 < cell.size() && cell[i + 1] == '|')) out += cell[i];
  return out;
}

// A pipe-table line's cells: split at every pipe not escaped, code spans included (GFM splits a
// row before it reads code spans: a lone backtick in a cell cannot swallow the next cells).
std::vector<std::string> split_row(std::string_view line) {
  std::string_view s = line;
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  if (!s.empty() && s.front() == '|') s.remove_prefix(1);
  if (!s.empty() && s.back() == '|' && (s.size() < 2 || s[s.size() - 2] != '\\')) s.remove_suffix(1);
  std::vector<std::string> cells;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      cur += s.substr(i, 2);
      i += 2;
    } else if (s[i] == '|') {
      cells.push_back(unescape_pipes(trim(cur)));
      cur.clear();
      ++i;
    } else {
      cur += s[i++];
    }
  }
  cells.push_back(unescape_pipes(trim(cur)));
  return cells;
}

bool separator_row(const std::vector<std::string>& cells) {
  for (const auto& c : cells)
    if (c.empty() || c.find_first_not_of(":-") != std::string::npos) return false;
  return !cells.empty();
}

// A table (header cells as plain text, body cells as HTML) with the checks its header or the
// heading above it names explained beside it: in full the first time (their indexes into
// check_explanations() are added to `explained`), later as links to that first explanation.
std::string explained_table(const std::string& heading, const std::vector<std::string>& headers,
                            const std::vector<std::vector<std::string>>& rows, std::set<size_t>& explained,
                            const std::string& id = "") {
  std::ostringstream h;
  std::vector<size_t> shown;
  auto match = [&](const std::string& text) -> const std::pair<std::string, std::string>* {
    for (const auto& e : check_explanations())
      if (text.find(e.first) != std::string::npos) return &e;
    return nullptr;
  };
  for (size_t i = 0; i < check_explanations().size(); ++i) {
    const std::string& name = check_explanations()[i].first;
    bool hit = heading.find(name) != std::string::npos;
    for (const auto& c : headers) hit |= c.find(name) != std::string::npos;
    if (hit) shown.push_back(i);
  }
  h << "<div class=\"pair\"><div class=\"tbl\"><table" << (id.empty() ? "" : " id=\"" + esc(id) + "\"") << ">\n<thead><tr>";
  for (const auto& c : headers) {
    const auto* e = match(c);
    h << "<th" << (e ? " title=\"" + esc(strip_tags(e->second)) + "\"" : "") << ">" << inline_html(c) << "</th>";
  }
  h << "</tr></thead>\n<tbody>\n";
  for (const auto& r : rows) {
    h << "<tr>";
    for (const auto& c : r) h << (c.rfind("<td", 0) == 0 ? c : "<td>" + c + "</td>");
    h << "</tr>\n";
  }
  h << "</tbody></table></div>";
  if (!shown.empty()) {
    h << "\n<aside class=\"explain\">";
    std::string again;
    bool list = false;
    for (size_t i : shown) {
      const auto& [name, text] = check_explanations()[i];
      if (explained.count(i)) {
        again += (again.empty() ? "" : ", ") + ("<a href=\"#check-" + std::to_string(i) + "\">" + esc(name) + "</a>");
        continue;
      }
      explained.insert(i);
      if (!list) h << "<dl>";
      list = true;
      h << "<dt id=\"check-" << i << "\">" << esc(name) << "</dt><dd>" << text << "</dd>";
    }
    if (list) h << "</dl>";
    if (!again.empty()) h << "<p>Explained above: " << again << ".</p>";
    h << "</aside>";
  }
  h << "</div>\n";
  return h.str();
}

// A Markdown table cell as a <td>, coloured when it is a check's answer.
std::string md_cell(const std::string& cell) {
  const std::string html = inline_html(cell);
  if (cell == "yes" || cell == "works") return "<td class=\"ok\">" + html + "</td>";
  if (cell.rfind("**no**", 0) == 0 || cell.rfind("raises", 0) == 0) return "<td class=\"bad\">" + html + "</td>";
  return "<td>" + html + "</td>";
}

std::string md_table(const std::vector<std::string>& lines, const std::string& heading, std::set<size_t>& explained) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& l : lines) cells.push_back(split_row(l));
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 1; i < cells.size(); ++i) {
    if (i == 1 && separator_row(cells[i])) continue;
    std::vector<std::string> r;
    for (const auto& c : cells[i]) r.push_back(md_cell(c));
    rows.push_back(std::move(r));
  }
  return explained_table(heading, cells[0], rows, explained);
}

// Whether the check named `name` has been explained beside a table already.
bool is_explained(const std::set<size_t>& explained, std::string_view name) {
  const auto& checks = check_explanations();
  for (size_t i = 0; i < checks.size(); ++i)
    if (checks[i].first == name) return explained.count(i) != 0;
  return false;
}

std::string markdown_html(const std::string& markdown, std::set<size_t>& explained) {
  std::vector<std::string> lines;
  std::istringstream in(markdown);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::ostringstream h;
  std::string para, heading;
  bool list = false;
  auto flush = [&] {
    if (!para.empty()) h << "<p>" << inline_html(para) << "</p>\n";
    para.clear();
    if (list) h << "</ul>\n";
    list = false;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = trim(lines[i]);
    const size_t hashes = line.find_first_not_of('#');
    if (line.empty()) {
      flush();
    } else if (hashes >= 1 && hashes <= 6 && hashes < line.size() && line[hashes] == ' ') {
      flush();
      heading = line.substr(hashes + 1);
      h << "<h" << hashes + 1 << ">" << inline_html(heading) << "</h" << hashes + 1 << ">\n";
    } else if (line[0] == '|') {
      flush();
      std::vector<std::string> rows;
      for (; i < lines.size() && !trim(lines[i]).empty() && trim(lines[i])[0] == '|'; ++i) rows.push_back(trim(lines[i]));
      --i;
      h << md_table(rows, heading, explained);
    } else if (line[0] == '>') {
      flush();
      std::string quote;
      for (; i < lines.size() && !trim(lines[i]).empty() && trim(lines[i])[0] == '>'; ++i) {
        if (!quote.empty()) quote += ' ';
        quote.append(trim(std::string_view(lines[i]).substr(lines[i].find('>') + 1)));
      }
      --i;
      h << "<blockquote><p>" << inline_html(quote) << "</p></blockquote>\n";
    } else if (line.rfind("- ", 0) == 0) {
      if (!para.empty()) h << "<p>" << inline_html(para) << "</p>\n", para.clear();
      if (!list) h << "<ul>\n";
      list = true;
      h << "<li>" << inline_html(line.substr(2)) << "</li>\n";
    } else if (line.rfind("† ", 0) == 0 && is_explained(explained, "†")) {
      flush();  // the Markdown's footnote to '†': the page explains it beside the table already
    } else {
      if (list) h << "</ul>\n", list = false;
      if (!para.empty()) para += ' ';
      para += line;
    }
  }
  flush();
  return h.str();
}

}  // namespace

std::string markdown_to_html(const std::string& markdown) {
  std::set<size_t> explained;
  return markdown_html(markdown, explained);
}

namespace {

const char* const kCss = R"css(
body { font: 14px/1.45 "DejaVu Sans", Helvetica, Arial, sans-serif; color: #1e2026; background: #fff;
       max-width: 1300px; margin: 0 auto; padding: 12px 24px 40px; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 19px; border-bottom: 2px solid #d8dce3; padding-bottom: 3px; margin-top: 30px; }
h3 { font-size: 17px; margin-top: 26px; }
h4 { font-size: 15px; margin: 20px 0 6px; }
p.sub { color: #555b66; margin: 0 0 8px; }
nav a { margin-right: 14px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0; }
th, td { border: 1px solid #d0d5de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f6; }
th[title] { text-decoration: underline dotted #8a8f99; cursor: help; }
tbody tr:nth-child(even) td { background: #f8f9fb; }
td.ok { color: #1f7a35; }
td.bad { color: #b0302a; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.err { min-width: 220px; max-width: 420px; font-size: 12px; overflow-wrap: anywhere; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; background: #f1f3f6;
       padding: 0 3px; border-radius: 3px; }
.pair { display: flex; flex-wrap: wrap; gap: 10px 22px; align-items: flex-start; }
.tbl { overflow-x: auto; max-width: 100%; }
aside.explain { flex: 1 1 280px; max-width: 460px; font-size: 12.5px; color: #3a3f48; background: #f6f8fb;
                border-left: 3px solid #9fb3d6; padding: 4px 12px; }
aside.explain dt { font-weight: bold; margin-top: 4px; }
aside.explain dd { margin: 0 0 4px; }
aside.explain p { margin: 4px 0; }
aside.explain a, nav a { color: #2c5aa0; }
blockquote { margin: 8px 0; padding: 2px 12px; border-left: 3px solid #e0b050; background: #fdf8ec; }
dl.settings { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px; margin: 6px 0; }
dl.settings dt { font-weight: bold; }
dl.settings dd { margin: 0; overflow-wrap: anywhere; }
dl.settings dl.settings { margin: 0; }
figure { margin: 14px 0 24px; }
figure svg { display: block; max-width: 100%; height: auto; border: 1px solid #d8dce3; }
figcaption { font-size: 12.5px; color: #3a3f48; margin: 4px 0 6px; max-width: 1000px; }
figcaption b { color: #1e2026; font-size: 14px; }
footer { margin-top: 36px; color: #8a8f99; font-size: 12px; }
)css";

std::string fmt(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A settings value: objects as nested definition lists, arrays of scalars joined by spaces.
std::string setting_html(const json& v) {
  if (v.is_object()) {
    std::string s = "<dl class=\"settings\">";
    for (const auto& [k, x] : v.items()) s += "<dt>" + esc(k) + "</dt><dd>" + setting_html(x) + "</dd>";
    return s + "</dl>";
  }
  if (v.is_array()) {
    const bool scalars = std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_primitive(); });
    std::string s;
    for (const auto& x : v)
      s += scalars ? (s.empty() ? "" : " ") + (x.is_string() ? esc(x.get<std::string>()) : esc(x.dump()))
                   : "<div>" + setting_html(x) + "</div>";
    return scalars ? "<code>" + s + "</code>" : s;
  }
  if (v.is_string()) return esc(v.get<std::string>());
  return v.is_null() ? "–" : esc(v.dump());
}

// The settings, collapsed: what a reader opens to rerun the capture, after the findings.
std::string settings_section(const json& report) {
  std::string s = "<section id=\"settings\">\n<details>\n<summary><h2>Settings</h2></summary>\n";
  if (report.contains("settings") && report["settings"].is_object() && !report["settings"].empty())
    return s + setting_html(report["settings"]) + "\n</details>\n</section>\n";
  return s + "<p class=\"sub\">This capture does not record its settings (prompt, tokens, repeats, warm-ups, command "
             "line, versions, machine, date): it was written before hookscope stored them.</p>\n</details>\n</section>\n";
}

std::string stats_cell(const json& r, const char* key) {
  const auto it = r.find(key);
  if (it == r.end() || !it->is_object() || !it->contains("median")) return "<td class=\"num\">–</td>";
  const json& l = *it;
  return "<td class=\"num\">" + fmt(l.value("median", 0.0), "%.2f") + " (" + fmt(l.value("min", 0.0), "%.2f") + "–" +
         fmt(l.value("max", 0.0), "%.2f") + ")</td>";
}

std::string check_cell(const json& r, const char* key) {
  const auto it = r.find(key);
  if (it == r.end() || !it->is_boolean()) return "<td>–</td>";
  if (it->get<bool>()) return "<td class=\"ok\">yes</td>";
  std::string more;
  if (std::string(key) == "logits_identical" && r.value("logits_max_ulp", json()).is_number()) {
    const int64_t ulp = r["logits_max_ulp"].get<int64_t>();
    more = ulp < 0 ? " (NaN where the reference has a number)"
                   : " (max |Δ| " + fmt(r.value("logits_max_abs_diff", 0.0), "%.2g") + ", " + std::to_string(ulp) + " ulp)";
  }
  return "<td class=\"bad\">no" + esc(more) + "</td>";
}

std::string bytes_h(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  for (; b >= 1024 && i < 4; ++i) b /= 1024;
  return fmt(b, i ? "%.1f" : "%.0f") + " " + u[i];
}

// One row per run: what it was, how it ended, its numbers and checks.
std::string runs_section(const json& runs, std::set<size_t>& explained) {
  const bool labels = std::any_of(runs.begin(), runs.end(), [](const json& r) { return r.contains("label"); });
  std::vector<std::pair<const char*, const char*>> stats = {{"prefill_ms", "prefill, ms"},
                                                            {"decode_ms_per_token", "decode, ms/token"},
                                                            {"tokens_per_s", "tokens/s"}};
  stats.erase(std::remove_if(stats.begin(), stats.end(),
                             [&](const auto& s) {
                               return std::none_of(runs.begin(), runs.end(), [&](const json& r) {
                                 return r.value(s.first, json()).is_object();
                               });
                             }),
              stats.end());
  std::vector<std::string> headers = {"run"};
  if (labels) headers.push_back("label");
  for (const char* h : {"engine", "scenario", "policy", "mode", "fullgraph", "status"}) headers.push_back(h);
  for (const auto& s : stats) headers.push_back(s.second);
  const bool overheads =
      std::any_of(runs.begin(), runs.end(), [](const json& r) { return facts::recording_overhead(r).has_value(); });
  if (overheads) headers.push_back(std::string(facts::fact("recording_overhead").label));
  // The generate's checks, where some run made them (a profiled program makes none).
  std::vector<std::pair<const char*, const char*>> checks = {{"argmax_match", "prefill argmax = eager"},
                                                             {"logits_identical", "logits bit-identical"},
                                                             {"params_on_meta_after", "params on meta after forward"}};
  std::erase_if(checks, [&](const auto& k) {
    return std::none_of(runs.begin(), runs.end(), [&](const json& r) { return r.value(k.first, json()).is_boolean(); });
  });
  headers.push_back("graph breaks / disabled-scope entries†");
  for (const auto& k : checks) headers.push_back(k.second);
  for (const char* h : {"transfers", "weight onloads", "error"}) headers.push_back(h);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : runs) {
    const std::string id = esc(r.value("id", json()).dump());
    std::vector<std::string> c = {"<td class=\"num\" id=\"run-" + id + "\">" + id + "</td>"};
    if (labels) c.push_back(esc(r.value("label", "")));
    for (const char* k : {"engine", "scenario", "policy", "mode"}) c.push_back(esc(r.value(k, "")));
    c.push_back(r.value("fullgraph", false) ? "yes" : "no");
    const std::string st = r.value("status", "?");
    c.push_back("<td class=\"" + std::string(st == "ok" ? "ok" : "bad") + "\">" + esc(st) + "</td>");
    for (const auto& s : stats) c.push_back(stats_cell(r, s.first));
    if (overheads) {
      const auto o = facts::recording_overhead(r);
      c.push_back("<td class=\"num\">" + (o ? esc(facts::recording_overhead_text(*o)) : std::string("–")) + "</td>");
    }
    c.push_back("<td class=\"num\">" + esc(facts::breaks_text(r)) + "</td>");
    for (const auto& k : checks) c.push_back(check_cell(r, k.first));
    const json rec = r.value("recorded", json::object());
    c.push_back("<td class=\"num\">" + std::to_string(rec.value("transfers", int64_t{0})) + " (" +
                bytes_h(rec.value("transfer_bytes", 0.0)) + ")</td>");
    c.push_back("<td class=\"num\">" + std::to_string(rec.value("weight_onloads", int64_t{0})) + " (" +
                bytes_h(rec.value("weight_onload_bytes", 0.0)) + ")</td>");
    const std::string err = r.value("error", json()).is_string() ? r["error"].get<std::string>() : "";
    std::string first = err.substr(0, err.find('\n'));
    if (first.size() > 140) first = first.substr(0, 137) + "...";
    c.push_back(err.empty() ? "<td></td>" : "<td class=\"err\" title=\"" + esc(err) + "\">" + esc(first) + "</td>");
    rows.push_back(std::move(c));
  }
  return "<section id=\"runs-section\">\n<h2>Runs</h2>\n<p class=\"sub\">Every run of the capture, one row each.</p>\n" +
         explained_table("", headers, rows, explained, "runs") + "</section>\n";
}

std::string figure_html(const ReportPicture& p) {
  return "<figure id=\"" + esc(p.file) + "\">\n<figcaption><b>" + esc(p.title) + "</b><br>" + inline_html(p.caption) +
         "</figcaption>\n" + p.svg + "</figure>\n";
}

}  // namespace

std::string html_document(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         esc(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n" + body + "</body>\n</html>\n";
}

std::string render_html(const json& report, const std::string& markdown, const std::vector<ReportPicture>& pictures,
                        const std::string& capture_name) {
  if (!report.contains("runs") || !report.contains("model"))
    throw std::invalid_argument("report: missing field '" + std::string(report.contains("runs") ? "model" : "runs") + "'");
  const json& runs = report["runs"];
  std::set<size_t> explained;  // checks explained in full so far: later tables link to them
  std::string model = report["model"].is_object() ? report["model"].value("id", "?") : "?";
  if (model.empty() || model == "?") model = capture_name;  // an import given no --model
  std::ostringstream h;
  h << "<header>\n<h1>hookscope report: " << esc(model) << "</h1>\n<p class=\"sub\">capture <code>" << esc(capture_name)
    << "</code> · " << runs.size() << " runs</p>\n<nav><a href=\"#verdict\">verdict</a><a href=\"#pictures\">chart and "
    << "timelines</a><a href=\"#tables\">tables</a><a href=\"#runs-section\">runs</a><a href=\"#settings\">settings</a>"
    << "</nav>\n</header>\n";
  // The verdict first, its evidence one click away (each run a link to its row below).
  h << "<section id=\"verdict\">\n" << markdown_html(render_verdict_markdown(report, true), explained) << "</section>\n";
  h << "<section id=\"pictures\">\n<h2>Chart and timelines</h2>\n";
  if (pictures.empty()) h << "<p class=\"sub\">No run has a latency or a timeline to draw.</p>\n";
  for (const auto& p : pictures) h << figure_html(p);
  h << "</section>\n";
  h << "<section id=\"tables\">\n<h2>Tables</h2>\n" << markdown_html(markdown, explained) << "</section>\n";
  h << runs_section(runs, explained) << settings_section(report);
  h << "<footer>Written by <code>hookscope report --html</code>. One file: no scripts, nothing fetched; the pictures "
       "are inline SVG, their text searchable.</footer>\n";
  return html_document("hookscope report: " + model, h.str());
}

}  // namespace hs::reports

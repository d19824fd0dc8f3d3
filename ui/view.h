// The viewer's one View class, laid out as Tracy lays out its own: it owns the open capture
// and the navigation state and draws one ImGui frame per call. Split by feature across files:
//   view.cpp           frame layout, runs list, diagnostics strip, details pane
//   view_timeline.cpp  the timeline tab: ruler, lane panes, zoom/pan, hover/select
//   view_lanes.cpp     one run's lanes: lane groups, tracks, residency, flows, break lines
//   view_range.cpp     statistics of the time range picked on the ruler
//   view_compare.cpp   the policy × mode matrix per scenario, a profiled program's verdict figures per
//                      policy, aligned timelines of two runs
//   view_tables.cpp    graph breaks, transfers, weight swaps (sortable; rows jump to the timeline)
//   view_search.cpp    the timeline's toolbar: find box (match k of n, next/previous), legend/help buttons
//   view_overlays.cpp  the legend, the key/mouse help, the keys that open and close them
//
// The views draw through ImGui only: no window, GLFW or OpenGL here (ui/window.h is the
// platform layer). Input comes only through ImGui (mouse, wheel, keys), so a test or
// `--screenshot` that feeds ImGuiIO drives exactly the code a person drives. The View never
// writes to the capture. It may hold two captures (before/after a change): their runs are
// listed together, each labelled by its file, and a run of one can be aligned under a run of
// the other; a run is then named by its capture's index and its id.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"
#include "ui/run_timeline.h"
#include "ui/time_axis.h"
#include "ui/text_fit.h"
#include "ui/timeline_loader.h"

struct ImDrawList;
struct ImVec2;
struct ImGuiTextFilter;

namespace hs::ui {

struct LanePass;       // view_lanes.cpp: one run's lanes being drawn
struct CompareMatrix;  // view_compare.cpp: the capture's runs as rows of the comparison matrix
struct MatrixKey;      // view_compare.cpp: a row's scenario, policy and mode
struct MatrixRow;      // view_compare.cpp: a row's runs (without and with fullgraph)

enum class Tab { Timeline, Compare, Breaks, Transfers, Swaps };
/// "timeline", "compare", "breaks", "transfers", "swaps"; throws std::invalid_argument naming
/// the allowed values.
Tab parse_tab(const std::string& s);
const char* tab_name(Tab t);

/// A slice picked by hover or click: run (0 = primary, 1 = compared), its source row.
struct Pick {
  int run = 0;
  Source source = Source::Compute;
  uint32_t row = 0;
  bool operator==(const Pick& o) const { return run == o.run && source == o.source && row == o.row; }
};

/// What the last frame drew where (screen pixels), for `--layout` and the tests.
struct FrameLayout {
  struct Group {
    int64_t run_id;
    int capture;  ///< index of the run's capture
    std::string device, title;
    bool host, emulated;
    float x0, y0, x1, y1;
    bool visible;  ///< some of it lies inside its pane (not scrolled out of view)
  };
  struct CompareRow {
    int64_t run_id;
    int capture;  ///< index of the run's capture (0 = the first file)
    std::string scenario, policy, mode;
    bool fullgraph;
    std::string breaks;  ///< the row's graph-breaks cell as drawn (facts::breaks_text through ui/typography.h)
    float y0, y1;
  };
  /// A profiled program's table (`hookscope profile` runs, RUNS.engine "profile"): its verdict
  /// block of facts::profile_verdicts, a row per figure (each under its catalogue label), a
  /// column per policy (before, after).
  struct CompareProgram {
    int capture;
    std::string program;               ///< RUNS.scenario (the script's file name)
    std::vector<std::string> headers;  ///< the table's column headers as drawn
    struct RunCell {                   ///< a policy column's run: click opens it, Ctrl+click compares it
      int64_t run_id;
      std::string policy;
      float x0, y0, x1, y1;
    };
    std::vector<RunCell> runs;
    struct Figure {
      std::string key, label;             ///< facts/catalogue.h
      std::vector<nlohmann::json> values;  ///< per policy column: the block's field (null: none)
      std::vector<std::string> cells;      ///< as drawn
      float y0, y1;
    };
    std::vector<Figure> figures;
    /// The block's iteration_speedup ({"ratio", "verdict", "why"} or null) and its line as drawn
    /// ("after vs before, iterations: 1.01× within noise"; "" when there is none).
    nlohmann::json speedup;
    std::string speedup_text;
    std::vector<std::string> claims;  ///< the block's diagnosis (facts::diagnosis), a line each as drawn
  };
  struct RunRow {  ///< a row of the runs list
    int capture;
    int64_t run_id;
    float y0, y1;
  };
  struct TableRow {
    uint32_t row;  ///< source row (index into the run's breaks / transfers / swaps)
    float y0, y1;
  };
  Tab tab = Tab::Timeline;
  float canvas_x0 = 0, canvas_x1 = 0;  ///< the time axis' pixel span
  float ruler_y0 = 0, ruler_y1 = 0;
  float lanes_y0 = 0, lanes_y1 = 0;    ///< the visible (scrolling) part of the lanes
  std::vector<std::pair<float, float>> panes;  ///< one scrolling lane pane per run shown (y0, y1)
  double view_start_ns = 0, view_end_ns = 0;
  std::vector<Group> groups;           ///< lane groups drawn (visible or not)
  std::vector<CompareRow> compare_rows;
  std::vector<CompareProgram> compare_programs;
  std::vector<RunRow> run_rows;        ///< rows of the runs list drawn this frame (filtered, scrolled in)
  float run_filter[4] = {0, 0, 0, 0};  ///< the runs list's filter box (x0, y0, x1, y1)
  std::vector<TableRow> table_rows;    ///< rows of the breaks/transfers/swaps table drawn this frame
  struct TableHeader {  ///< a column header of that table (click: sort by it; Shift+click: add it)
    std::string name;
    float x0, y0, x1, y1;
  };
  std::vector<TableHeader> table_headers;
  /// The run header bars drawn this frame (the primary run's, then the compared one's), as drawn:
  /// "run 3: sharded, whole-hook, default [torch] (complete, ...)    timeline's generate vs
  /// unrecorded 1.27×".
  std::vector<std::string> run_headers;
  /// The diagnostics strip's lines as drawn this frame: "[tag] text" ("[warning] run 3: ...").
  std::vector<std::string> diagnostic_lines;
  /// The first merged "zoom in" blocks drawn this frame (kMergedSamples at most): the time
  /// span their events cover (the timeline's ns, as view_start_ns) and where they were drawn.
  struct MergedBox {
    double start_ns, end_ns;
    int64_t count;  ///< events merged
    float x0, y0, x1, y1;
  };
  static constexpr size_t kMergedSamples = 8;
  std::vector<MergedBox> merged_samples;
  int64_t merged_boxes = 0, drawn_boxes = 0;
  int64_t drawn_flows = 0;  ///< transfer and launch flows drawn (none when too many are in view)
  int64_t aggregated_boxes = 0;  ///< weight-swap groups drawn in place of the swaps (Track::aggregate)
  int64_t elided_labels = 0;     ///< slice labels drawn shortened (fit_label)
  std::vector<std::string> elided_samples;  ///< the first few of them, as drawn
  /// The timeline's search: its query, how many events match, which one is shown (1-based;
  /// 0 = none yet), its time (relative ns) and where its highlight was drawn (x0, y0, x1, y1;
  /// `highlighted` false when it was not, e.g. scrolled out of view).
  struct Search {
    std::string query;
    int64_t matches = 0, current = 0;
    double start_ns = 0, end_ns = 0;
    bool highlighted = false;
    float rect[4] = {0, 0, 0, 0};
    float box[4] = {0, 0, 0, 0};  ///< the search box itself
  } search;
  /// An overlay window (legend, help) if drawn this frame: its rect and its lines.
  struct Overlay {
    bool shown = false;
    float rect[4] = {0, 0, 0, 0};
    std::vector<std::string> lines;  ///< legend: category names; help: "keys: action"
  } legend, help;
  float legend_button[4] = {0, 0, 0, 0}, help_button[4] = {0, 0, 0, 0};
  /// A table tab with no rows says why (e.g. "this run offloads nothing (...)"); "" otherwise.
  std::string empty_message;
  /// The line above the breaks or transfers table as drawn (its figures: facts/breaks.h, stats'
  /// transfers that moved bytes); "" on other tabs.
  std::string table_title;
  struct MemoryAxis {  ///< the scale of a memory lane
    int64_t run_id;
    std::string device;
    int64_t top_bytes;  ///< the value at the lane's top (its peak)
    std::vector<std::string> labels;  ///< top, middle, bottom ("0")
    float y0, y1;
  };
  std::vector<MemoryAxis> memory_axes;
  /// A run still loading, or that failed to, in either slot (0 primary, 1 compared), as the
  /// views said it this frame.
  struct Load {
    int slot = 0, capture = 0;
    int64_t run_id = 0;
    int64_t rows_read = 0, rows_total = -1;  ///< −1: not counted (yet)
    bool laying_out = false;  ///< every row read, lanes being laid out
    bool preview = false;     ///< a preview of the run is drawn meanwhile
    std::string text;         ///< "loading run 3 (...): 1,234,567 of 10,000,049 rows (12%)", or why it failed
    bool failed = false;
  };
  std::vector<Load> loads;
  nlohmann::json to_json() const;
};

/// How a View loads the runs it shows.
struct ViewOptions {
  /// On a thread of their own while frames are drawn (the window: usable at once, the timeline
  /// saying what it loads, Nsight-style). False: the constructor, SelectRun and SetCompareRun
  /// return with the run loaded (headless: --screenshot, tests), and throw what a load throws.
  bool background = false;
  TimelineLoader::Options load;  ///< reading threads, preview, a hook (tests)
};

class View {
 public:
  /// Opens nothing itself: takes a reader the caller opened (read-only).
  explicit View(std::shared_ptr<const storage::CaptureReader> reader, ViewOptions options = {});
  /// Several captures side by side (before/after), each shown under its label (default: the
  /// file names). Throws std::invalid_argument when `readers` is empty or `labels` is given
  /// with another count.
  View(std::vector<std::shared_ptr<const storage::CaptureReader>> readers, std::vector<std::string> labels = {},
       ViewOptions options = {});
  /// Cancels the loads under way and waits for their threads (a few thousand rows).
  ~View();
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  /// Draws one full-window frame of `width` × `height` pixels (call between ImGui::NewFrame
  /// and ImGui::Render).
  void Frame(float width, float height);

  // Programmatic state (the CLI flags; tests).
  /// Opens run `run_id` of capture `capture`; throws std::out_of_range naming the run (or the
  /// capture index).
  void SelectRun(int64_t run_id, size_t capture = 0);
  /// A second run (of capture `capture`), aligned under the first; nullopt closes it.
  void SetCompareRun(std::optional<int64_t> run_id, size_t capture = 0);
  void SetTab(Tab t);
  Tab tab() const { return m_tab; }
  const TimeView& time_view() const { return m_time; }
  TimeView& time_view() { return m_time; }
  std::optional<int64_t> run_id() const;
  /// The capture of the run shown in slot 0 (primary) or 1 (compared), if any.
  std::optional<size_t> run_capture(int slot = 0) const;
  /// The first run of `capture` with the primary run's engine, scenario, policy, mode and
  /// fullgraph (other than the primary itself), if any: the "after" of a before/after pair.
  std::optional<int64_t> MatchingRun(size_t capture) const;
  size_t capture_count() const { return m_captures.size(); }
  const std::string& capture_label(size_t capture) const { return m_captures.at(capture).label; }
  std::optional<Pick> selection() const { return m_selected; }
  /// What the mouse was over in the last frame's timeline (its tooltip shows `describe`).
  std::optional<Pick> hovered() const { return m_hover; }
  /// The timeline drawn in slot `i` (0 primary, 1 compared): the whole run, a preview of it
  /// while it loads (RunTimeline::partial), or nullptr (no run, or nothing read yet).
  const RunTimeline* timeline(int i = 0) const;
  /// Whether slot `slot`'s run is still loading.
  bool loading(int slot = 0) const;
  /// Where slot `slot`'s load stands (nullopt when none is under way).
  std::optional<TimelineLoader::Progress> load_progress(int slot = 0) const;
  /// Why slot `slot`'s run could not be loaded ("" when it was, or still loads).
  const std::string& load_error(int slot = 0) const;
  /// Blocks until the loads under way have finished and takes their timelines (headless
  /// callers of a background View).
  void WaitForLoads();
  /// Selects a source row of run `run` (0/1) and centres the timeline on it, widening the
  /// view when the event is wider than it (what clicking a table row does).
  void Focus(int run, Source source, uint32_t row);
  /// The search's matches in the primary run (in time order) and the one shown (0-based).
  const std::vector<SearchMatch>& search_matches() const { return m_matches; }
  std::optional<size_t> search_current() const;
  bool legend_shown() const { return m_show_legend; }
  bool help_shown() const { return m_show_help; }
  /// Time range picked on the ruler (relative ns), if any.
  std::optional<std::pair<int64_t, int64_t>> range() const { return m_range; }
  const FrameLayout& layout() const { return m_layout; }

 private:
  // view.cpp
  void DrawRuns(float width, float height);
  void DrawDiagnostics(float height);
  void DrawDetails();
  void LoadRun(int slot, size_t capture, int64_t run_id);
  void OpenDefaultRuns();
  /// Takes what the loads have published (a preview, the whole run) and ends finished loads.
  void PollLoads();
  void AdoptTimeline(int slot, std::shared_ptr<const RunTimeline> tl);
  /// The status line of slot `slot`'s load (FrameLayout::Load), recorded in m_layout.loads.
  void RecordLoads();
  /// Draws slot `slot`'s load status (progress bar, or why it failed) when it has one; returns
  /// whether it did.
  bool DrawLoadStatus(int slot);
  /// A table of run slot 0 that needs kinds `kinds` (the reader's names): while they load,
  /// draws the load status instead and returns true.
  bool TableLoading(std::initializer_list<std::string_view> kinds);
  void DrawRunRows(size_t capture, const ImGuiTextFilter& filter, bool labels);
  // view_timeline.cpp
  void DrawTimelineTab();
  void DrawTimelineArea(float height);
  bool DrawRulerStrip(const ImVec2& origin, float full_w, float x0, float x1);
  void DrawRuler(ImDrawList* dl, float x0, float x1, float y, float h);
  bool DrawLanePane(int slot, int panes, float full_w, float lanes_h, float x0, float x1);
  void HandleTimelineInput(float x0, float x1, bool lanes_hovered, bool ruler_hovered);
  void DrawHoverTooltip();
  // view_search.cpp
  void DrawTimelineToolbar();
  void DrawSearchBox();
  void UpdateSearch();
  void StepSearch(int direction);
  void GoToMatch(size_t index);
  void DrawSearchHighlight(LanePass& p);
  // view_overlays.cpp
  void HandleGlobalKeys();
  void DrawLegend();
  void DrawHelp();
  // view_lanes.cpp
  float DrawRunLanes(ImDrawList* dl, int slot, float x0, float x1, float y, float clip_y0, float clip_y1);
  void DrawLaneGroup(LanePass& p, size_t group);
  void DrawResidency(LanePass& p, const LaneGroup& group, const std::string& key);
  /// A header row that folds what is under it (clicking its label toggles `key`); returns
  /// whether it is folded. Colours are ImGui's ImU32.
  bool DrawFoldHeader(LanePass& p, float height, uint32_t bg, const std::string& text, const std::string& key,
                      bool default_collapsed, uint32_t text_color);
  bool IsCollapsed(const std::string& key, bool by_default) const;
  void DrawTrack(LanePass& p, const Track& t, const std::string* label = nullptr);
  void DrawInstants(LanePass& p, const Track& t, float height);
  void DrawSliceLevels(LanePass& p, const Track& t, int levels);
  /// A swap lane's Track::aggregate in its first row; false (nothing drawn) when its swaps are
  /// far enough apart to be drawn themselves (no more merged blocks than single swaps in view).
  bool DrawSwapGroups(LanePass& p, const Track& t);
  void DrawSliceLabel(LanePass& p, const std::string& text, float bx0, float bx1, float y, uint32_t color, Keep keep = Keep::Tail);
  void ExpandMerged(std::pair<int64_t, int64_t> block, float cursor_px);
  void DrawMergedBox(LanePass& p, const std::vector<Slice>& level, const DrawBox& b, float ly0, float ly1,
                     bool mouse_row);
  void DrawSelectionTime(LanePass& p, float run_y0, float run_y1);
  // view_range.cpp
  void DrawRangeStats();
  // view_compare.cpp
  void DrawCompareTab();
  void DrawCompareCapture(const CompareMatrix& matrix);
  void DrawCompareScenario(const CompareMatrix& matrix, size_t scenario);
  void DrawCompareRow(const CompareMatrix& matrix, const MatrixKey& key, const MatrixRow& row);
  /// The profiled programs of capture `capture`: one table per program (its verdict block).
  void DrawComparePrograms(size_t capture);
  // view_tables.cpp
  void DrawBreaksTab();
  void DrawLogBreaks(const storage::RunRecord& run);
  void DrawTransfersTab();
  void DrawSwapsTab();

  /// One open capture file and what the views read from it once.
  struct Capture {
    std::shared_ptr<const storage::CaptureReader> reader;
    std::string label;  ///< shown beside its runs when more than one capture is open
    /// each run's results with its break facts merged in (facts/breaks.h: what every view names
    /// graph breaks, log records, disabled-scope entries)
    std::vector<storage::RunRecord> runs;
    std::vector<storage::DiagnosticRow> diagnostics;
    std::vector<storage::DeviceRow> devices;
    /// The verdict blocks of its profiled programs (facts::profile_verdicts over what the
    /// report's runs carry: stats totals, recorded onloads, iterations), computed when the
    /// Compare tab first draws them; `profile_error` says why they could not be.
    std::optional<nlohmann::json> profile_verdicts;
    std::string profile_error;
  };
  const Capture& capture_at(size_t capture) const;  ///< throws std::out_of_range naming the index
  /// The run of slot 0 as its capture lists it (results with the break facts), or nullptr.
  const storage::RunRecord* primary_run() const;
  /// "main: " when several captures are open, else "".
  std::string capture_prefix(size_t capture) const;

  std::vector<Capture> m_captures;
  ViewOptions m_options;
  std::optional<int64_t> m_slot_run[2];   ///< the run each slot shows (or loads); empty: none
  size_t m_timeline_capture[2] = {0, 0};  ///< the capture each slot's run comes from
  std::shared_ptr<const RunTimeline> m_timeline[2];  ///< drawn: a preview, then the whole run
  std::unique_ptr<TimelineLoader> m_load[2];          ///< the slot's load under way
  std::string m_load_error[2];                        ///< why the slot's run could not be loaded
  std::vector<std::unique_ptr<TimelineLoader>> m_retired;  ///< loads superseded, stopping
  std::optional<std::pair<double, double>> m_auto_fit;  ///< the view's last automatic fit (start, ns/px)
  Tab m_tab = Tab::Timeline;
  bool m_tab_request = true;  ///< select m_tab on the next frame's tab bar
  TimeView m_time;
  bool m_fit_pending = true;
  std::optional<Pick> m_hover, m_selected;
  std::optional<std::pair<int64_t, int64_t>> m_hover_merged;  ///< a merged "zoom in" block under the cursor
  int64_t m_hover_merged_count = 0;
  std::optional<RangeStats> m_range_cache[2];
  int64_t m_range_cache_run[2] = {-1, -1};
  std::optional<std::pair<int64_t, int64_t>> m_range;
  std::optional<double> m_range_anchor;  ///< ruler drag in progress (relative ns)
  std::map<std::string, bool> m_collapsed;  ///< lane group / residency section state by key
  char m_filter[128] = {};
  FrameLayout m_layout;
  // The timeline's search (view_search.cpp) and overlays (view_overlays.cpp).
  char m_search[256] = {};
  std::string m_search_query;       ///< the query m_matches were found for
  int64_t m_search_run = -1;        ///< ... in this run (−1: none yet)
  std::vector<SearchMatch> m_matches;
  std::optional<size_t> m_match;    ///< the match shown
  bool m_search_focus = false;      ///< give the search box the keyboard next frame
  bool m_scroll_to_match = false;   ///< scroll the lanes so the match is in view
  bool m_show_legend = false, m_show_help = false;
  std::vector<bool> m_categories;   ///< categories the primary run uses (the legend's entries)
  int64_t m_categories_run = -1;
  // Sorted row orders of the tables (of run slot 0), and the run each was sorted for.
  std::vector<uint32_t> m_break_order, m_transfer_order, m_swap_order;
  int64_t m_table_run[3] = {-1, -1, -1};
};

}  // namespace hs::ui

// The viewer's timeline model: time↔pixel mapping, nesting levels, level-of-detail merging
// and range statistics. No window, no ImGui: everything here is unit-tested headless
// (tests/ui_timeline_test.cpp) and shared by the interactive view and `--screenshot`.
//
// Times are ns relative to the run's origin (the earliest event of the run), so two runs can
// be drawn one above the other on the same scale. Pixels are floats in the timeline's own
// coordinates (0 = left edge of the drawing area).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hs::ui {

/// What the timeline shows: a window of `width_px` pixels starting at `start_ns`, at
/// `ns_per_px` ns per pixel (Tracy's zoom model). All functions keep `ns_per_px` within
/// [kMinNsPerPx, kMaxNsPerPx].
struct TimeView {
  static constexpr double kMinNsPerPx = 0.01;  ///< deepest zoom: 100 pixels per ns
  static constexpr double kMaxNsPerPx = 1e12;  ///< ~17 minutes per pixel
  double start_ns = 0;
  double ns_per_px = 1e3;
  float width_px = 1000;

  double end_ns() const { return start_ns + ns_per_px * width_px; }
  float x_of(double t_ns) const { return static_cast<float>((t_ns - start_ns) / ns_per_px); }
  double t_of(float x_px) const { return start_ns + x_px * ns_per_px; }

  /// Shows [t0, t1] across the width (with `margin` of the span added on each side).
  void fit(double t0_ns, double t1_ns, double margin = 0.02);
  /// Zooms by `factor` (> 1 zooms in) keeping the time under `x_px` where it is.
  void zoom_at(float x_px, double factor);
  /// Moves the view by `dx_px` pixels (positive drags the content right, i.e. earlier times).
  void pan_px(float dx_px);
  /// Puts `t_ns` at the centre without changing the zoom.
  void center_on(double t_ns);
};

/// One drawable interval of a track. `row` indexes the source record of the track (the
/// reader row it came from), `label` the run's string table.
struct Slice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t label = 0;
  uint32_t row = 0;
  uint8_t category = 0;
};

/// Splits slices into nesting levels: level 0 holds slices not contained in another, level
/// k+1 those directly inside a level-k slice. Each level comes out sorted by start and free
/// of overlaps, which is what `layout_level` needs. Partially overlapping (non-nested)
/// slices go to the next free level. Slices with the same start and end keep their input order.
/// O(n log n); O(n) for slices already by start (but for runs of equal starts).
std::vector<std::vector<Slice>> build_levels(std::vector<Slice> slices);

/// What to draw for one level at the current view: either one slice (`count == 1`, `first`
/// its index) or a merged block of `count` consecutive slices starting at `first`, each
/// narrower than the minimum width, drawn as one "zoom in" block.
struct DrawBox {
  float x0 = 0, x1 = 0;  ///< clipped to [0, width]; x1 − x0 ≥ min_px for merged blocks
  uint32_t first = 0;
  uint32_t count = 0;
  bool merged() const { return count > 1; }
};

/// Culls and merges one level (sorted, non-overlapping) for `view`. Slices wider than
/// `min_px` are returned as themselves; runs of narrower slices whose gaps are below
/// `min_px` become one merged box. Slices narrower than `min_px` that stand alone are
/// widened to `min_px`. Cost is O(boxes × log n), not O(n): the scan jumps over each merged
/// block with a binary search, so a level of 10M slices costs at most a few thousand steps
/// per frame.
std::vector<DrawBox> layout_level(const std::vector<Slice>& level, const TimeView& view, float min_px = 3.0f);

/// Index of the slice under time `t_ns` in a sorted non-overlapping level (−1 if none).
/// `slop_ns` widens every slice on both sides (so a 1-pixel slice can be hovered).
int64_t find_at(const std::vector<Slice>& level, double t_ns, double slop_ns = 0);

/// Sum of the parts of `level`'s slices that fall inside [t0, t1] (ns), and how many slices
/// intersect it. Levels are non-overlapping, so this is busy time.
struct Clipped {
  int64_t busy_ns = 0;
  int64_t count = 0;
};
Clipped clip_sum(const std::vector<Slice>& level, int64_t t0_ns, int64_t t1_ns);

/// "Nice" tick spacing for a ruler: the smallest 1·10^k, 2·10^k or 5·10^k ns that is at least
/// `min_px` pixels wide at `ns_per_px`.
double tick_step_ns(double ns_per_px, float min_px = 90.0f);
/// A duration as people read it: "850 ns", "12.5 us", "3.20 ms", "1.50 s" (ASCII: the UI font has no µ).
std::string format_duration(double ns);
/// A byte count: "512 B", "11.2 KiB", "108 MiB", "1.50 GiB".
std::string format_bytes(double bytes);

}  // namespace hs::ui

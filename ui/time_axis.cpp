#include "ui/time_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hs::ui {

namespace {
double clamp_scale(double ns_per_px) {
  if (!(ns_per_px > TimeView::kMinNsPerPx)) return TimeView::kMinNsPerPx;  // also NaN
  return std::min(ns_per_px, TimeView::kMaxNsPerPx);
}
}  // namespace

void TimeView::fit(double t0_ns, double t1_ns, double margin) {
  if (t1_ns < t0_ns) std::swap(t0_ns, t1_ns);
  double span = std::max(t1_ns - t0_ns, 1.0);
  const double pad = span * margin;
  ns_per_px = clamp_scale((span + 2 * pad) / std::max(width_px, 1.0f));
  start_ns = t0_ns - pad;
}

void TimeView::zoom_at(float x_px, double factor) {
  if (!(factor > 0)) return;
  const double t = t_of(x_px);
  ns_per_px = clamp_scale(ns_per_px / factor);
  start_ns = t - x_px * ns_per_px;
}

void TimeView::pan_px(float dx_px) { start_ns -= dx_px * ns_per_px; }

void TimeView::center_on(double t_ns) { start_ns = t_ns - 0.5 * width_px * ns_per_px; }

std::vector<std::vector<Slice>> build_levels(std::vector<Slice> slices) {
  // By start, parents first (the longer of two that start together), ties in input order. A
  // lane's slices come from rows read by start, so usually only runs of equal starts need it.
  auto parents_first = [](const Slice& a, const Slice& b) { return a.end_ns > b.end_ns; };
  if (std::is_sorted(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) { return a.start_ns < b.start_ns; })) {
    for (auto a = slices.begin(); a != slices.end();) {
      auto b = a + 1;
      while (b != slices.end() && b->start_ns == a->start_ns) ++b;
      if (b - a > 1) std::stable_sort(a, b, parents_first);
      a = b;
    }
  } else {
    std::stable_sort(slices.begin(), slices.end(), [&](const Slice& a, const Slice& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : parents_first(a, b);
    });
  }
  // Two passes: each slice's level, then every level filled at its size (no regrowth of
  // levels of millions of slices).
  std::vector<uint32_t> depth(slices.size());
  std::vector<size_t> sizes;
  std::vector<int64_t> level_end;  // where each level's last slice ends
  std::vector<int64_t> open_ends;  // ends of the slices that contain the current point, by depth
  for (size_t i = 0; i < slices.size(); ++i) {
    const Slice& s = slices[i];
    while (!open_ends.empty() && open_ends.back() <= s.start_ns) open_ends.pop_back();
    size_t d = open_ends.size();
    // A slice that only partly overlaps its would-be parent, or meets a leftover at this
    // depth, goes down to the first level where it fits.
    while (d < sizes.size() && sizes[d] > 0 && level_end[d] > s.start_ns) ++d;
    if (d == sizes.size()) {
      sizes.push_back(0);
      level_end.push_back(0);
    }
    ++sizes[d];
    level_end[d] = s.end_ns;
    depth[i] = static_cast<uint32_t>(d);
    if (d >= open_ends.size()) open_ends.resize(d + 1, s.start_ns);
    open_ends[d] = s.end_ns;
    open_ends.resize(d + 1);
  }
  std::vector<std::vector<Slice>> levels(sizes.size());
  if (sizes.size() == 1) {  // nothing nested (regions, most scopes): the slices are the level
    levels[0] = std::move(slices);
    return levels;
  }
  for (size_t d = 0; d < sizes.size(); ++d) levels[d].reserve(sizes[d]);
  for (size_t i = 0; i < slices.size(); ++i) levels[depth[i]].push_back(slices[i]);
  return levels;
}

std::vector<DrawBox> layout_level(const std::vector<Slice>& level, const TimeView& view, float min_px) {
  std::vector<DrawBox> out;
  const size_t n = level.size();
  if (n == 0 || view.width_px <= 0) return out;
  const double t0 = view.start_ns, t1 = view.end_ns();
  const double min_ns = min_px * view.ns_per_px;
  // Ends are sorted too (the level is non-overlapping): the first slice ending after t0.
  size_t i = std::partition_point(level.begin(), level.end(), [&](const Slice& s) { return s.end_ns <= t0; }) -
             level.begin();
  auto emit = [&](double a, double b, size_t first, size_t count) {
    float x0 = view.x_of(a), x1 = view.x_of(b);
    if (x1 - x0 < min_px) x1 = x0 + min_px;
    x0 = std::max(x0, 0.0f);
    x1 = std::min(x1, view.width_px);
    if (x1 <= x0) return;
    out.push_back({x0, x1, static_cast<uint32_t>(first), static_cast<uint32_t>(count)});
  };
  auto wide = [&](const Slice& s) { return static_cast<double>(s.end_ns - s.start_ns) >= min_ns; };
  while (i < n && level[i].start_ns < t1) {
    if (wide(level[i])) {
      emit(level[i].start_ns, level[i].end_ns, i, 1);
      ++i;
      continue;
    }
    // A run of narrow slices: grow the block while the next one starts within min_ns of its
    // end, jumping over everything that starts inside that window at once.
    const size_t first = i;
    double block_end = level[i].end_ns;
    size_t j = i + 1;
    while (j < n) {
      const double target = block_end + min_ns;
      const size_t k = std::partition_point(level.begin() + j, level.end(),
                                            [&](const Slice& s) { return s.start_ns < target; }) -
                       level.begin();
      if (k == j) break;
      if (wide(level[k - 1])) {  // only the last one of the window can be wide (no overlaps)
        if (k - 1 > j) block_end = level[k - 2].end_ns;
        j = k - 1;
        break;
      }
      block_end = level[k - 1].end_ns;
      j = k;
      if (block_end >= t1) break;
    }
    emit(level[first].start_ns, block_end, first, j - first);
    i = j;
  }
  return out;
}

int64_t find_at(const std::vector<Slice>& level, double t_ns, double slop_ns) {
  auto it = std::partition_point(level.begin(), level.end(),
                                 [&](const Slice& s) { return s.end_ns + slop_ns < t_ns; });
  // The nearest of this one and the previous (both may be within the slop).
  int64_t best = -1;
  double best_d = 0;
  for (auto c : {it - (it != level.begin() ? 1 : 0), it}) {
    if (c == level.end()) continue;
    if (c->start_ns - slop_ns > t_ns || c->end_ns + slop_ns < t_ns) continue;
    const double d = t_ns < c->start_ns ? c->start_ns - t_ns : t_ns > c->end_ns ? t_ns - c->end_ns : 0;
    if (best < 0 || d < best_d) {
      best = c - level.begin();
      best_d = d;
    }
  }
  return best;
}

Clipped clip_sum(const std::vector<Slice>& level, int64_t t0_ns, int64_t t1_ns) {
  Clipped c;
  if (t1_ns <= t0_ns) return c;
  auto it = std::partition_point(level.begin(), level.end(), [&](const Slice& s) { return s.end_ns <= t0_ns; });
  for (; it != level.end() && it->start_ns < t1_ns; ++it) {
    c.busy_ns += std::min(it->end_ns, t1_ns) - std::max(it->start_ns, t0_ns);
    ++c.count;
  }
  return c;
}

double tick_step_ns(double ns_per_px, float min_px) {
  const double want = std::max(ns_per_px * min_px, 1e-3);
  double p = std::pow(10.0, std::floor(std::log10(want)));
  for (;; p *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (m * p >= want) return m * p;
}

std::string format_duration(double ns) {
  char buf[48];
  const double a = std::fabs(ns);
  if (a < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (a < 1e6)
    std::snprintf(buf, sizeof buf, a < 1e4 ? "%.2f us" : "%.1f us", ns / 1e3);
  else if (a < 1e9)
    std::snprintf(buf, sizeof buf, a < 1e7 ? "%.2f ms" : "%.1f ms", ns / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  return buf;
}

std::string format_bytes(double bytes) {
  char buf[48];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

}  // namespace hs::ui

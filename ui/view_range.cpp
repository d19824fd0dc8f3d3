// View: statistics of the time range picked on the ruler, per lane group of each run shown —
// busy time of compute, hooks and compiler-disabled scopes, and the bytes (with their GB/s)
// of the transfers in and out and the weight onloads under the range; for a trace's rows, the
// busy time of GPU kernels and of a thread's CPU ops.
#include <cstdio>
#include <string>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

/// One row per lane group; range_row fills the cells in this order.
constexpr const char* kColumns[] = {"lane group", "compute",           "transfers in", "transfers out", "weight onload",
                                    "hooks",      "compiler-disabled", "kernels",      "CPU ops"};

/// "108 MiB, 12.50 GB/s", or "-" when nothing moved.
std::string bytes_and_rate(int64_t bytes, double gbps) {
  if (!bytes) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %.2f GB/s", format_bytes(static_cast<double>(bytes)).c_str(), gbps);
  return buf;
}

/// A busy time, or "-" when none.
std::string busy(int64_t ns) { return ns ? format_duration(static_cast<double>(ns)) : "-"; }

void range_row(const GroupRangeStats& g) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(g.device.c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(busy(g.busy_ns[kCompute]).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(bytes_and_rate(g.bytes_in, g.gbps_in()).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(bytes_and_rate(g.bytes_out, g.gbps_out()).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(bytes_and_rate(g.onload_bytes, g.gbps_onload()).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(busy(g.busy_ns[kPreForward] + g.busy_ns[kPostForward] + g.busy_ns[kOtherHook]).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(busy(g.busy_ns[kDisabled]).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(busy(g.busy_ns[kKernel]).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(busy(g.busy_ns[kCpuOp] + g.busy_ns[kUserAnnotation]).c_str());
}

}  // namespace

void View::DrawRangeStats() {
  if (!m_range || !m_timeline[0]) {
    ImGui::PushStyleColor(ImGuiCol_Text, style::kDim);
    ImGui::TextWrapped("Range statistics: drag on the time ruler to select a range (right-click it to clear).");
    ImGui::PopStyleColor();
    return;
  }
  for (int slot = 0; slot < 2; ++slot) {
    if (!m_timeline[slot]) continue;
    if (!m_range_cache[slot] || m_range_cache[slot]->t0_ns != m_range->first ||
        m_range_cache[slot]->t1_ns != m_range->second || m_range_cache_run[slot] != m_timeline[slot]->run.id) {
      m_range_cache[slot] = range_stats(*m_timeline[slot], m_range->first, m_range->second);
      m_range_cache_run[slot] = m_timeline[slot]->run.id;
    }
    const RangeStats& st = *m_range_cache[slot];
    ImGui::Text(
        "%srun %lld, range %s .. %s (%s), %lld graph breaks", capture_prefix(m_timeline_capture[slot]).c_str(),
        static_cast<long long>(m_timeline[slot]->run.id),
        format_duration(static_cast<double>(st.t0_ns)).c_str(), format_duration(static_cast<double>(st.t1_ns)).c_str(),
        format_duration(static_cast<double>(st.t1_ns - st.t0_ns)).c_str(), static_cast<long long>(st.graph_breaks));
    char id[32];
    std::snprintf(id, sizeof id, "range_stats_%d", slot);
    if (!ImGui::BeginTable(id, IM_ARRAYSIZE(kColumns),
                           ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV))
      continue;
    for (const char* h : kColumns) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const auto& g : st.groups) range_row(g);
    ImGui::EndTable();
  }
}

}  // namespace hs::ui

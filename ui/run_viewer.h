// `hookscope view`: opens a capture read-only and shows it in a window, or renders frames
// without a person and writes a PNG (`--screenshot`, for tests and reports).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace hs::ui {

struct ViewerOptions {
  std::filesystem::path file;
  /// A second capture (before/after a change): its runs are listed with the first's, each
  /// labelled by its file, and `compare` names one of its runs. Without `compare` the viewer
  /// aligns its run of the opened run's cell, if it has one.
  std::optional<std::filesystem::path> other;
  std::optional<std::filesystem::path> screenshot;  ///< render headless, write this PNG, exit
  std::optional<std::filesystem::path> layout;      ///< with --screenshot: what was drawn where (JSON)
  std::string view = "timeline";                    ///< timeline|compare|breaks|transfers|swaps
  std::optional<int64_t> run;  ///< run to open (default: the first compiled run without fullgraph)
  std::optional<int64_t> compare;  ///< second run (of `other` when given), aligned under the first
  int width = 1600, height = 900;                   ///< window / screenshot size in pixels
  int frames = 4;  ///< frames rendered before the screenshot (ImGui settles tables in 2–3)
  /// How the screenshot's and the layout's bytes reach their files (the CLI passes its
  /// write_output_file: a temporary file renamed into place, the reason named when it fails);
  /// unset: a plain stream, checked.
  std::function<void(const std::filesystem::path&, const std::string&)> write_file;
};

/// "1600x900" → {1600, 900}. Throws std::invalid_argument naming `--size` unless both are in
/// [200, 8192].
std::pair<int, int> parse_size(const std::string& s);

/// Runs the viewer. Returns the process exit code (0). Throws storage::CaptureError for files
/// that are not captures (or newer, corrupt, locked, missing), std::out_of_range for an
/// unknown run, std::invalid_argument for a bad view name, std::runtime_error when no window
/// can be opened or the PNG cannot be written. The captures are never modified; either one that
/// fails is named in the error.
int run_viewer(const ViewerOptions& options);

}  // namespace hs::ui

// The capture runner: walks the comparison matrix through an engine into one SQLite capture.
#pragma once

#include <filesystem>
#include <vector>

#include "output/capture_output.h"
#include "engines/engine.h"

namespace hs::engines {

/// The cells of one capture: scenarios × policies × modes, and for capturing modes × fullgraph.
struct Matrix {
  std::vector<Scenario> scenarios;
  std::vector<hooks::CompilePolicy> policies;
  std::vector<compile::Mode> modes;
  std::vector<bool> fullgraphs;  ///< {false}, {true} or {false, true}; eager runs only without
  /// `--accelerate` source trees by name: more policies, for engines that run them.
  std::vector<std::string> accelerate_trees;

  /// The cells of scenario `s` for an engine (`trees`: it runs accelerate trees), in capture
  /// order (policy, then mode, then fullgraph).
  std::vector<Cell> cells(Scenario s, bool trees) const;
  /// Every cell of every scenario for each engine.
  size_t size(const std::vector<Engine*>& engines) const;
};

/// Runs every cell through each engine, scenario by scenario (within one, engine by engine),
/// into `capture`'s temporary file (opened once the first scenario is prepared by every engine),
/// printing one progress line per run to stderr, and commits it onto --out at the end. Each run
/// is recorded `incomplete` until its results are stored, then `complete` (or `failed` when the
/// engine reports a failure). `settings` (storage/capture_settings.h) are stored in the file.
/// Returns the number of failed runs.
/// Throws what an engine's prepare throws (naming the scenario) and the store's errors; the
/// caller then abandons `capture` (output/capture_output.h).
int run_matrix(const std::vector<Engine*>& engines, const Matrix& matrix, output::CaptureOutput& capture,
               const nlohmann::json& settings = nlohmann::json::object());

}  // namespace hs::engines

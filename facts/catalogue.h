// The named facts of a capture: each figure hookscope shows has one key, one label and one
// one-line definition, declared here once. Report (Markdown, HTML, JSON), `stats`, `explain`, the
// viewer and `export` show a fact under its label and explain it with its definition; none of
// them defines a figure of its own.
//
// A name of Dynamo's (graph_count, graph_break_count, recompiles, frames skipped,
// recompile_limit hits) holds only what Dynamo itself reports for the same run; a figure of
// another source (the TORCH_TRACE log over a whole run, the LibTorch engine's regions) has a
// name of its own.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace hs::facts {

struct Fact {
  std::string_view key;         ///< its field in report.json: a run's ("graph_break_count"), its
                                ///< stats.totals' ("hook_busy_ns") or a verdict block's ("policy_speedup")
  std::string_view label;       ///< how every view names it ("graph breaks (Dynamo, one forward)")
  std::string_view unit;        ///< "count", "ms/token", "ns", "bytes", "ratio", "text"
  std::string_view source;      ///< where it comes from ("torch._dynamo.explain", "TORCH_TRACE log", ...)
  std::string_view definition;  ///< one line: what it counts and over what
};

/// Every fact, in the order a glossary lists them.
const std::vector<Fact>& catalogue();

/// The fact named `key`. Throws std::out_of_range naming the key when there is none (a view
/// asking for an undeclared figure is a programming error).
const Fact& fact(std::string_view key);

/// Whether a figure of `f`'s source can be shown for runs of `engines` (RUNS.engine: "torch",
/// "libtorch", "profile", "import"): Dynamo's explain and compile metrics for torch engine runs,
/// the LibTorch engine's for its own, both for imported exports; measured generates and
/// accelerate's hooked modules for the two engines; a profiled program's for profiled runs; the
/// TORCH_TRACE log's and the recorded events' for every run. A glossary lists these only.
bool applies_to(const Fact& f, const std::set<std::string>& engines);

}  // namespace hs::facts

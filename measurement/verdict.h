// What a latency comparison may conclude: faster, slower, or within the noise of the machine.
//
// A speed-up is only claimed when the two sides' spreads are apart. The measurements compared
// are decode ms/token of the measured generates (warm-ups excluded): a compiled run against the
// eager generates interleaved with it (A B A B in the same cell) when the engine made them, else
// against the eager run of the same engine, scenario and policy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measurement/spread.h"

namespace hs::measurement {

enum class Verdict {
  Faster,       ///< compiled below eager: interquartile ranges apart, every-pair speed-ups above 1
  Slower,       ///< the mirror image
  WithinNoise,  ///< the spreads overlap, or the machine drifted between the cells compared
  NotJudged,    ///< fewer than kMinRepeats measured generates on a side
};

/// Fewer measured generates than this on either side: no verdict (quartiles of 1 or 2
/// samples say nothing about the spread).
inline constexpr size_t kMinRepeats = 3;

/// "faster", "slower", "within noise", "not judged".
const char* verdict_name(Verdict v);

struct Judgement {
  Verdict verdict = Verdict::NotJudged;
  double speedup = 0;  ///< eager / compiled: the median per-pair ratio when interleaved, else of the medians
  std::string why;     ///< one sentence: the figures the verdict rests on
};

/// Judges `compiled` against `eager` (decode ms/token). `pair_ratios` are the per-repeat
/// eager/compiled ratios of interleaved generates (empty when the sides were not interleaved).
Judgement judge(const Spread& compiled, const Spread& eager, const std::vector<double>& pair_ratios);

/// Two measurements of the same eager model that disagree: how far apart, and why it matters.
struct Drift {
  double ratio = 1;  ///< the slower median over the faster one (> 1)
  std::string why;   ///< one sentence naming both figures and the difference in %
};

/// When two measurements of the same eager model (one scenario, two policies) differ by more
/// than their spread (interquartile ranges apart, both with >= kMinRepeats samples), how much;
/// std::nullopt when they agree or are too few to tell.
std::optional<Drift> drift(const Spread& a, const std::string& label_a, const Spread& b, const std::string& label_b);

/// How far the machine moved bounds what a measurement may claim: a faster/slower `j` stands
/// only when its effect (`j.speedup`, or its inverse for a slow-down) is larger than `d.ratio`
/// (its why then names the drift as `what`, e.g. "eager drift between policies"); else it is
/// within noise, the why naming the drift. Other verdicts are returned as they are.
Judgement against_drift(Judgement j, const Drift& d, const std::string& what);

/// Judges every compiled run of a capture. `runs` are run result documents (RUNS.results, as
/// `report` reads them: engine, scenario, policy, mode, fullgraph, status, decode_ms_per_token,
/// eager_decode_ms_per_token, samples). Returns, per run, its judgement (std::nullopt for eager
/// runs and runs without latency). Within one engine and scenario, when the eager
/// measurements of two policies drift apart, the largest such drift is how far the machine's
/// speed moved during the capture: a faster/slower verdict there stands only when its effect
/// (the speed-up, or its inverse for a slow-down) is larger than that ratio, and becomes
/// within noise, naming the drift, when it is not.
std::vector<std::optional<Judgement>> judge_runs(const std::vector<const nlohmann::json*>& runs);

}  // namespace hs::measurement

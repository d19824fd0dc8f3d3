// The results of a run (RUNS.results, a JSON object the engines write) checked against the
// JSON types hookscope writes there, before report, explain or the viewer read them.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::storage {

/// Checks the fields of run `run`'s results that report, explain and the viewer read against
/// the JSON types hookscope writes (null allowed: not measured), one level down for spreads,
/// peak memory, samples, the model and break reasons. Throws CaptureError "capture FILE: run
/// N: RUNS.results field 'K' is T, where hookscope writes ..." at the first field of another
/// type, instead of a renderer failing later with nlohmann's unnamed type error.
void check_run_results(const nlohmann::json& results, const CaptureReader& rd, int64_t run);

}  // namespace hs::storage

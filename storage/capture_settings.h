// What a capture was run with, stored in the file (META_DATA_EXPORT.HOOKSCOPE_CAPTURE_SETTINGS)
// and printed by every report: the command line, the date, the machine, and the measurement
// protocol. Versions of the real stack are per run (RUNS.versions); reports merge them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hs::storage {

class CaptureReader;

/// The META_DATA_EXPORT row the settings live in.
inline constexpr const char* kCaptureSettingsKey = "HOOKSCOPE_CAPTURE_SETTINGS";

/// The capture's settings as stored (an empty object for a file written before they were),
/// read within bounded_json's limits. Every reading command reads them, so that a damaged
/// capture is refused by all alike. Throws CaptureError naming the file and the row when they
/// are nested deeper than 512 levels or longer than 64 MiB, are not JSON, or not an object
/// ("...; the file is damaged ...").
nlohmann::json capture_settings(const CaptureReader& reader);

/// `word` as a POSIX shell would need it typed: as it is where it holds only
/// [A-Za-z0-9_./=,:+-] and is not empty, else single-quoted (a ' written '\'').
std::string shell_word(const std::string& word);

/// `words` as a shell would need them typed: each shell_word, joined by spaces.
std::string shell_command(const std::vector<std::string>& words);

/// This process's command line as a shell would need it typed (shell_command), read from
/// /proc/self/cmdline; "" where that cannot be read.
std::string command_line();

/// The current UTC time as ISO 8601 ("2026-12-01T08:15:00Z").
std::string utc_now_iso8601();

/// The host: {"cpu": model name (/proc/cpuinfo), "logical_cpus", "memory_bytes" (MemTotal),
/// "os": "Linux 6.1.0 x86_64"}; a field that cannot be read is null.
nlohmann::json machine_info();

}  // namespace hs::storage

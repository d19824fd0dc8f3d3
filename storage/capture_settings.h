// What a capture was run with, stored in the file (META_DATA_EXPORT.HOOKSCOPE_CAPTURE_SETTINGS)
// and printed by every report: the command line, the date, the machine, and the measurement
// protocol. Versions of the real stack are per run (RUNS.versions); reports merge them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hs::storage {

/// The META_DATA_EXPORT row the settings live in.
inline constexpr const char* kCaptureSettingsKey = "HOOKSCOPE_CAPTURE_SETTINGS";

/// This process's command line as a shell would need it typed (arguments single-quoted where
/// they hold anything but [A-Za-z0-9_./=,:+-]), read from /proc/self/cmdline; "" where that
/// cannot be read.
std::string command_line();

/// The current UTC time as ISO 8601 ("2026-12-01T08:15:00Z").
std::string utc_now_iso8601();

/// The host: {"cpu": model name (/proc/cpuinfo), "logical_cpus", "memory_bytes" (MemTotal),
/// "os": "Linux 6.1.0 x86_64"}; a field that cannot be read is null.
nlohmann::json machine_info();

}  // namespace hs::storage

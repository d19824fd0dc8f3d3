// Helpers shared by the libFuzzer targets of fuzz/ (see fuzz/CMakeLists.txt and `./run fuzz`).
//
// Each target feeds its input to one of the project's real parsing entry points and catches
// only the exceptions that entry point's header documents. Anything else — a crash, an ASan or
// UBSan report, an exception of another type (it reaches std::terminate), a hang past
// -timeout — is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace hs::fuzz {

/// A private scratch folder for this process: $HOOKSCOPE_FUZZ_TMP (default /dev/shm when it
/// exists, else the system temp dir) / hookscope-fuzz-<target>-<pid>. Created on first use,
/// removed at exit.
inline const std::filesystem::path& scratch_dir(const char* target) {
  static const std::filesystem::path dir = [target] {
    namespace fs = std::filesystem;
    fs::path base;
    if (const char* t = std::getenv("HOOKSCOPE_FUZZ_TMP"); t && *t) base = t;
    else if (fs::is_directory("/dev/shm")) base = "/dev/shm";
    else base = fs::temp_directory_path();
    fs::path d = base / ("hookscope-fuzz-" + std::string(target) + "-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    static const fs::path to_remove = d;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(to_remove, ec);
    });
    return d;
  }();
  return dir;
}

/// Writes `data` to `path` (replacing it).
inline void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}
inline void write_file(const std::filesystem::path& path, std::string_view text) {
  write_file(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

/// A required environment variable (a path the target's corpus generator wrote); aborts with
/// a message when unset, since the target cannot run without it.
inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    std::fprintf(stderr, "fuzz target: set %s (./run fuzz does)\n", name);
    std::abort();
  }
  return v;
}

}  // namespace hs::fuzz

namespace hs::fuzz {
/// An expected (documented) error: ignored, or printed when $HOOKSCOPE_FUZZ_VERBOSE is set
/// (to see why a seed is refused: `HOOKSCOPE_FUZZ_VERBOSE=1 build-fuzz/fuzz/X_fuzz SEED`).
inline void expected(const std::exception& e) {
  static const bool verbose = std::getenv("HOOKSCOPE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "expected error: %s\n", e.what());
}
}  // namespace hs::fuzz

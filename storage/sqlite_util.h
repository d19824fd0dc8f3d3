// Internal: thin RAII over the SQLite C API for the Store and the CaptureReader. Every error
// becomes a `CaptureError` naming the capture file.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "storage/schema.h"

namespace hs::storage::detail {

/// "<what> FILE: <sqlite message>" (with a hint for the common cases).
[[noreturn]] void fail(const std::filesystem::path& path, sqlite3* db, int rc, std::string_view what);

class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, const std::filesystem::path& path, std::string_view sql);
  /// Adopts `prepared`, a statement prepared on `db` earlier (a statement cache's).
  Stmt(sqlite3* db, const std::filesystem::path& path, sqlite3_stmt* prepared) : s_(prepared), db_(db), path_(&path) {}
  ~Stmt();
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, uint32_t v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, bool v) { return bind(i, static_cast<int64_t>(v ? 1 : 0)); }
  Stmt& bind(int i, std::string_view v) {  // copied by SQLite; a default (null) view binds '', not NULL
    sqlite3_bind_text(s_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind_null(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  template <class T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  /// Runs an INSERT/UPDATE to completion and resets. Throws CaptureError.
  void exec();
  /// Steps a query: true while a row is available. Throws CaptureError.
  bool step();
  void reset();

  int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  std::optional<int64_t> opt_int64(int col) const {
    return is_null(col) ? std::nullopt : std::optional<int64_t>(int64(col));
  }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }
  sqlite3_stmt* raw() const { return s_; }
  /// Gives up the statement without finalizing it: the caller owns it from now on.
  sqlite3_stmt* release() {
    sqlite3_stmt* s = s_;
    s_ = nullptr;
    return s;
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  sqlite3* db_ = nullptr;
  const std::filesystem::path* path_ = nullptr;
};

/// Runs one or more statements without results. Throws CaptureError("<what> FILE: ...").
void exec(sqlite3* db, const std::filesystem::path& path, std::string_view sql, std::string_view what);

/// Checks that `db` is a hookscope capture this build can read: META_DATA_EXPORT exists and
/// holds HOOKSCOPE_SCHEMA_VERSION <= kSchemaVersion. Reads only. Returns the version.
/// Throws CaptureError:
///   "not a hookscope capture: FILE (not an SQLite database)"
///   "not a hookscope capture: FILE (no META_DATA_EXPORT / schema version)"
///   "capture FILE has schema version N, newer than this hookscope reads (1): ..."
///   "capture FILE is locked by another process ..." / "capture FILE is corrupt ..."
int check_capture(sqlite3* db, const std::filesystem::path& path);

}  // namespace hs::storage::detail

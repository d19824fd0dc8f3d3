#include "storage/sqlite_util.h"

#include <cctype>
#include <charconv>

#include <strings.h>

namespace hs::storage::detail {

void fail(const std::filesystem::path& path, sqlite3* db, int rc, std::string_view what) {
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string f = path.string();
  const std::string w(what);
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      throw CaptureError(path, "not a hookscope capture: " + f + " (not an SQLite database: " + msg + ")");
    case SQLITE_CORRUPT:
      throw CaptureError(path, "capture " + f + " is corrupt (" + msg + ") while " + w);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw CaptureError(path, "capture " + f + " is locked by another process or connection (" + msg + ") while " + w);
    case SQLITE_CANTOPEN:
      throw CaptureError(path, "cannot open capture " + f + ": " + msg);
    case SQLITE_FULL:
      throw CaptureError(path, "capture " + f + ": disk full while " + w + " (" + msg + ")");
    case SQLITE_READONLY:
      // A rollback journal left by a writer that stopped inside a transaction: SQLite must roll
      // it back before anyone reads the file, which a read-only connection cannot do.
      if (rc == SQLITE_READONLY_ROLLBACK || (db && sqlite3_extended_errcode(db) == SQLITE_READONLY_ROLLBACK))
        throw CaptureError(path, "capture " + f + " has a leftover rollback journal, " + f +
                                     "-journal: a writer stopped in the middle of a transaction, and the file reads "
                                     "correctly only once it is rolled back, which hookscope (opening captures "
                                     "read-only) does not do; open it once for writing, e.g. `sqlite3 " + f +
                                     " 'PRAGMA quick_check'`, which rolls it back, or restore the file");
      throw CaptureError(path, "capture " + f + " is read-only (" + msg + ") while " + w);
    default:
      throw CaptureError(path, "capture " + f + ": " + w + " failed: " + msg);
  }
}

Stmt::Stmt(sqlite3* db, const std::filesystem::path& path, std::string_view sql) : db_(db), path_(&path) {
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s_, nullptr);
  if (rc != SQLITE_OK) fail(path, db, rc, "preparing a query");
}

Stmt::~Stmt() {
  if (s_) sqlite3_finalize(s_);
}

Stmt::Stmt(Stmt&& o) noexcept : s_(o.s_), db_(o.db_), path_(o.path_) { o.s_ = nullptr; }

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (s_) sqlite3_finalize(s_);
    s_ = o.s_;
    db_ = o.db_;
    path_ = o.path_;
    o.s_ = nullptr;
  }
  return *this;
}

void Stmt::exec() {
  const int rc = sqlite3_step(s_);
  sqlite3_reset(s_);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) fail(*path_, db_, rc, "writing");
}

namespace {
// The tables a query reads ("TRANSFERS, RUNS"): each name after FROM or JOIN in its SQL.
std::string tables_read(std::string_view sql) {
  const auto word_at = [&](size_t i) {
    size_t e = i;
    while (e < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[e])) || sql[e] == '_')) ++e;
    return sql.substr(i, e - i);
  };
  std::string out;
  for (size_t i = 0; i < sql.size(); ++i) {
    const std::string_view w = word_at(i);
    if (w.empty()) continue;
    i += w.size() - 1;
    if (w.size() != 4 || (strncasecmp(w.data(), "FROM", 4) != 0 && strncasecmp(w.data(), "JOIN", 4) != 0)) continue;
    size_t j = i + 1;
    while (j < sql.size() && std::isspace(static_cast<unsigned char>(sql[j]))) ++j;
    const std::string t(word_at(j));
    if (!t.empty() && !std::isdigit(static_cast<unsigned char>(t[0])) && (", " + out + ",").find(", " + t + ",") == std::string::npos)
      out += (out.empty() ? "" : ", ") + t;
  }
  return out;
}
}  // namespace

bool Stmt::step() {
  const int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(s_);
  const char* sql = sqlite3_sql(s_);
  const std::string tables = sql ? tables_read(sql) : "";
  if (rc == SQLITE_ERROR && std::string_view(sqlite3_errmsg(db_)) == "integer overflow")
    throw CaptureError(*path_, "capture " + path_->string() + ": a sum over " + (tables.empty() ? "its rows" : tables) +
                                   " passes 2^63 (SQLite: integer overflow); no capture writes such values: the file "
                                   "was edited or is damaged");
  fail(*path_, db_, rc, tables.empty() ? "reading" : "reading " + tables);
}

void Stmt::reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

void exec(sqlite3* db, const std::filesystem::path& path, std::string_view sql, std::string_view what) {
  const std::string s(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, s.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) fail(path, db, rc, what);
}

int check_capture(sqlite3* db, const std::filesystem::path& path) {
  const std::string f = path.string();
  {
    Stmt q(db, path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'META_DATA_EXPORT'");
    if (!q.step() || q.int64(0) == 0)
      throw CaptureError(path, "not a hookscope capture: " + f + " (no META_DATA_EXPORT / schema version)");
  }
  Stmt v(db, path, "SELECT value FROM META_DATA_EXPORT WHERE name = ?");
  v.bind(1, kSchemaVersionKey);
  if (!v.step() || v.is_null(0))
    throw CaptureError(path, "not a hookscope capture: " + f + " (no META_DATA_EXPORT / schema version)");
  const std::string text = v.text(0);
  int version = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version < 1)
    throw CaptureError(path, "not a hookscope capture: " + f + " (" + std::string(kSchemaVersionKey) + " is '" + text +
                                 "', not a schema version)");
  if (version > kSchemaVersion)
    throw CaptureError(path, "capture " + f + " has schema version " + std::to_string(version) +
                                 ", newer than this hookscope reads (" + std::to_string(kSchemaVersion) +
                                 "): open it with a newer hookscope");
  // Every run is found by RUNS.id, the table's INTEGER PRIMARY KEY (the rowid). A RUNS rebuilt
  // without it (CREATE TABLE ... AS SELECT drops every constraint) can hold two runs of one id,
  // or a run with none: readers showed such runs twice, and a run appended to it got no id (the
  // Store then failed with "end_run: no run N").
  Stmt id(db, path, "SELECT type, pk FROM pragma_table_info('RUNS') WHERE name = 'id'");
  const bool has_id = id.step();
  std::string type = has_id ? id.text(0) : std::string();
  for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!has_id || type != "INTEGER" || id.int64(1) != 1)
    throw CaptureError(path, "capture " + f + ": " +
                                 (has_id ? std::string("RUNS.id is not the table's INTEGER PRIMARY KEY (the table was "
                                                       "rebuilt without it, so runs may share an id or have none)")
                                         : std::string("it has no RUNS table with an id column")) +
                                 "; the file was edited or is damaged");
  return version;
}

}  // namespace hs::storage::detail

// The viewer's page reader (storage/btree_pages.h) on arbitrary bytes as a database file, and
// SQLite on the same file as its oracle (seeds: closed captures written by the real Store, and a
// small database of every integer width, NULLs, REAL, TEXT, BLOB, added columns and overflowed
// records, fuzz/make_seeds.py).
//
// For a file the reader opens (detail::PageFile: rollback-journal mode, a sane page size):
//  - pages scanned as a table's root whatever the schema says (the first two, two picked by
//    header fields SQLite ignores, ones past the file), whole and over rowid ranges, every column
//    of every record read: no crash, no read outside the file (ASan), no UB (UBSan);
//  - every rowid table SQLite's schema names (and sqlite_master itself) scanned whole and
//    compared with SQLite's own scan of it (`SELECT rowid, * FROM t NOT INDEXED`): where both
//    read the table, same rowids in the same order and, column by column, the value SQLite
//    returns (an integer the reader reads is SQLite's integer, or its REAL where the column's
//    affinity makes one; NULL is NULL; a value the reader refuses is no integer for SQLite);
//  - the same tables over rowid ranges (the capture reader's bounded scans): the rows read are
//    the whole scan's rows in the range, in order, where SQLite's quick_check finds the file
//    whole; otherwise at least a subsequence of them (a damaged interior key may hide a subtree).
// Expected: detail::PageFormatError, the reader's "read it through SQLite instead". A mismatch
// aborts with both sides printed.
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "storage/btree_pages.h"

namespace fs = std::filesystem;
using hs::storage::detail::PageFile;
using hs::storage::detail::PageFormatError;
using hs::storage::detail::Record;

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr size_t kMaxTables = 24;    // tables of the schema compared with SQLite
constexpr size_t kMaxRows = 200000;  // rows kept per scan (a file of 1 MiB holds fewer)
constexpr int kColumns = 64;         // Record::kMaxColumns: the widest table the reader reads

/// One value as the reader reads it.
struct Value {
  enum Kind : uint8_t { Null, Int, Refused } kind = Null;
  int64_t v = 0;
};
struct Row {
  int64_t rowid = 0;
  std::vector<Value> values;
};

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "btree_pages_fuzz: %s\n", what.c_str());
  std::abort();
}

/// Reads column `c` of `r` as a caller does (type(), then int64() when it is an integer),
/// checking the Record's own promises on the way.
Value read_value(const Record& r, int c) {
  Value out;
  int type = 0;
  try {
    type = r.type(c);
  } catch (const PageFormatError&) {
    out.kind = Value::Refused;
    return out;
  }
  if (type != SQLITE_INTEGER && type != SQLITE_NULL) finding("Record::type gave " + std::to_string(type));
  if (r.is_null(c) != (type == SQLITE_NULL)) finding("Record::is_null disagrees with type()");
  int64_t v = 0;
  try {
    v = r.int64(c);
  } catch (const PageFormatError& e) {
    finding(std::string("Record::int64 threw on a column type() read: ") + e.what());
  }
  if (type == SQLITE_NULL) {
    if (v != 0) finding("Record::int64 of a NULL is not 0");
    return out;
  }
  out.kind = Value::Int;
  out.v = v;
  return out;
}

/// In [first, end), or at or past `first` where `end` is INT64_MAX (PageFile::scan: to the end).
bool in_range(int64_t rowid, int64_t first, int64_t end) { return rowid >= first && (rowid < end || end == kMax); }

/// What a scan does with a record's values: read and kept, read (checked) only, not read.
enum class Values { Kept, Read, None };

/// The reader's scan of `root` over [first, end): its rows (their values as `values` says), or
/// nullopt where it refused.
std::optional<std::vector<Row>> reader_scan(PageFile& file, uint32_t root, int columns, int64_t first, int64_t end,
                                            Values values = Values::Kept) {
  std::vector<Row> rows;
  try {
    file.scan(root, columns, first, end, [&](int64_t rowid, const Record& r) {
      if (!in_range(rowid, first, end)) finding("a rowid outside the range asked for");
      if (rows.size() >= kMaxRows) return;
      Row row;
      row.rowid = rowid;
      if (values == Values::Kept) row.values.reserve(static_cast<size_t>(columns));
      for (int c = 0; c < columns && values != Values::None; ++c) {
        const Value v = read_value(r, c);
        if (values == Values::Kept) row.values.push_back(v);
      }
      // A column past the table's: absent, NULL.
      if (values != Values::None && columns < kColumns && read_value(r, columns).kind != Value::Null)
        finding("a column past the table's is not NULL");
      rows.push_back(std::move(row));
    });
  } catch (const PageFormatError& e) {
    hs::fuzz::expected(e);
    return std::nullopt;
  }
  return rows;
}

/// Ranges over a table's rowids (`r`, in scan order): bounds at and beside them, the ends of
/// int64, empty and reversed ones.
std::vector<std::pair<int64_t, int64_t>> ranges_of(const std::vector<int64_t>& r) {
  std::vector<std::pair<int64_t, int64_t>> out = {{kMin, kMin}, {kMax, kMin}, {kMax, kMax}, {0, 0},
                                                  {kMin, 0},    {0, kMax},    {kMin, kMin + 1}, {kMax - 1, kMax}};
  if (r.empty()) return out;
  const size_t n = r.size();
  auto after = [](int64_t x) { return x == kMax ? kMax : x + 1; };
  const int64_t a = r[n / 4], b = r[(3 * n) / 4], m = r[n / 2];
  out.insert(out.end(), {{a, b},
                         {after(a), after(b)},
                         {kMin, m},
                         {after(m), kMax},
                         {m, after(m)},
                         {r.front(), after(r.back())},
                         {r.back(), kMin},
                         {b, a}});
  return out;
}

/// `text` between `quote`s, SQL's way (an identifier in double quotes, a string in single).
std::string sql_quoted(const std::string& text, char quote) {
  std::string q(1, quote);
  for (char ch : text) {
    q += ch;
    if (ch == quote) q += quote;
  }
  return q + quote;
}

struct Sqlite {
  sqlite3* db = nullptr;
  int64_t steps = 0;
  ~Sqlite() { sqlite3_close(db); }
};

/// A statement's rows through `f(stmt)`; false where SQLite failed (a corrupt file, a schema it
/// cannot parse, the step budget spent).
template <class F>
bool query(sqlite3* db, const std::string& sql, F&& f, int64_t bind = kMin) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    sqlite3_finalize(st);
    return false;
  }
  if (bind != kMin) sqlite3_bind_int64(st, 1, bind);
  int rc = 0;
  bool more = true;
  while (more && (rc = sqlite3_step(st)) == SQLITE_ROW) more = f(st);
  sqlite3_finalize(st);
  return !more || rc == SQLITE_DONE;
}

struct Table {
  std::string name;
  uint32_t root = 0;
  int columns = 0;
  std::vector<bool> compare;  ///< per column: a stored value SQLite returns as stored
  std::vector<bool> real;     ///< per column: REAL affinity (SQLite returns an integer as REAL)
  std::string rowid_name;
  bool comparable = false;
  bool schema = false;  ///< sqlite_master itself (whatever a damaged schema names its tables)
};

/// The declared type's affinity is REAL (SQLite's rules, section 3.1 of datatype3.html).
bool real_affinity(std::string t) {
  for (char& ch : t) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (t.find("INT") != std::string::npos) return false;
  if (t.find("CHAR") != std::string::npos || t.find("CLOB") != std::string::npos || t.find("TEXT") != std::string::npos)
    return false;
  if (t.find("BLOB") != std::string::npos || t.empty()) return false;
  return t.find("REAL") != std::string::npos || t.find("FLOA") != std::string::npos || t.find("DOUB") != std::string::npos;
}

/// SQLite's view of `t`: its columns, and whether the reader's records map onto them.
void describe(sqlite3* db, Table& t) {
  std::vector<std::string> names;
  bool hidden = false;  // a generated column (a virtual one is not in the record) or a virtual table's
  const bool ok = query(
      db, "SELECT name, type, pk, dflt_value IS NOT NULL, hidden FROM pragma_table_xinfo(" + sql_quoted(t.name, '\'') + ")",
      [&](sqlite3_stmt* st) {
        const auto* name = sqlite3_column_text(st, 0);
        const auto* type = sqlite3_column_text(st, 1);
        names.emplace_back(name ? reinterpret_cast<const char*>(name) : "");
        // A rowid alias (stored as NULL, read as the rowid) or a default (what a record written
        // before the column was added reads as): values SQLite does not take from the record.
        t.compare.push_back(sqlite3_column_int64(st, 2) == 0 && sqlite3_column_int64(st, 3) == 0);
        t.real.push_back(real_affinity(type ? reinterpret_cast<const char*>(type) : ""));
        hidden |= sqlite3_column_int64(st, 4) != 0;
        return names.size() <= kColumns;
      });
  // The reader is asked for the table's column count as SQLite declares it (1 where unknown).
  t.columns = std::max<int>(1, std::min<int>(kColumns, static_cast<int>(names.size())));
  if (!ok || hidden || names.empty() || names.size() > kColumns) return;
  for (const char* candidate : {"rowid", "_rowid_", "oid"}) {
    if (std::none_of(names.begin(), names.end(),
                     [&](const std::string& n) { return sqlite3_stricmp(n.c_str(), candidate) == 0; })) {
      t.rowid_name = candidate;
      break;
    }
  }
  t.comparable = !t.rowid_name.empty();
}

/// SQLite's whole scan of `t`, its values in the reader's terms; nullopt where SQLite failed.
struct SqlValue {
  int type = SQLITE_NULL;
  int64_t i = 0;
  double d = 0;
};
std::optional<std::vector<std::pair<int64_t, std::vector<SqlValue>>>> sqlite_scan(sqlite3* db, const Table& t) {
  std::vector<std::pair<int64_t, std::vector<SqlValue>>> rows;
  const std::string from = t.schema ? std::string("sqlite_master") : sql_quoted(t.name, '"') + " NOT INDEXED";
  const bool ok = query(db, "SELECT " + t.rowid_name + ", * FROM " + from, [&](sqlite3_stmt* st) {
    if (sqlite3_column_count(st) != t.columns + 1) return false;
    auto& row = rows.emplace_back();
    row.first = sqlite3_column_int64(st, 0);
    for (int c = 0; c < t.columns; ++c) {
      SqlValue v;
      v.type = sqlite3_column_type(st, c + 1);
      if (v.type == SQLITE_INTEGER) v.i = sqlite3_column_int64(st, c + 1);
      if (v.type == SQLITE_FLOAT) v.d = sqlite3_column_double(st, c + 1);
      row.second.push_back(v);
    }
    return rows.size() < kMaxRows;
  });
  if (!ok || rows.size() >= kMaxRows) return std::nullopt;
  return rows;
}

std::string describe_row(const Row& r) {
  std::string s = "rowid " + std::to_string(r.rowid) + ":";
  for (const Value& v : r.values)
    s += v.kind == Value::Null ? " NULL" : v.kind == Value::Refused ? " (refused)" : " " + std::to_string(v.v);
  return s;
}

void compare_whole(const Table& t, const std::vector<Row>& mine,
                   const std::vector<std::pair<int64_t, std::vector<SqlValue>>>& theirs) {
  auto where = [&](size_t i) { return "table " + t.name + " (root " + std::to_string(t.root) + "), row " + std::to_string(i); };
  if (mine.size() != theirs.size())
    finding("table " + t.name + " (root " + std::to_string(t.root) + "): the reader read " + std::to_string(mine.size()) +
            " rows, SQLite " + std::to_string(theirs.size()));
  for (size_t i = 0; i < mine.size(); ++i) {
    const Row& r = mine[i];
    if (r.rowid != theirs[i].first)
      finding(where(i) + ": rowid " + std::to_string(r.rowid) + ", SQLite's " + std::to_string(theirs[i].first));
    for (int c = 0; c < t.columns; ++c) {
      if (!t.compare[static_cast<size_t>(c)]) continue;
      const Value& v = r.values[static_cast<size_t>(c)];
      const SqlValue& s = theirs[i].second[static_cast<size_t>(c)];
      const bool same =
          v.kind == Value::Null      ? s.type == SQLITE_NULL
          : v.kind == Value::Refused ? s.type != SQLITE_INTEGER  // REAL, TEXT, BLOB (a NaN REAL reads as NULL)
          : s.type == SQLITE_INTEGER ? s.i == v.v
                                     : s.type == SQLITE_FLOAT && t.real[static_cast<size_t>(c)] &&
                                           s.d == static_cast<double>(v.v);
      if (!same)
        finding(where(i) + ", column " + std::to_string(c) + ": the reader's " + describe_row(r) + "; SQLite's type " +
                std::to_string(s.type) + " value " + std::to_string(s.i) + " / " + std::to_string(s.d));
    }
  }
}

/// A bounded scan (rowids only: its records are the whole scan's) against the whole one: exactly
/// its rowids in [first, end) where the file is whole, at least a subsequence of them otherwise.
void compare_range(const Table& t, const std::vector<Row>& whole, const std::vector<Row>& part, int64_t first,
                   int64_t end, bool exact) {
  std::vector<const Row*> expect;
  for (const Row& r : whole)
    if (in_range(r.rowid, first, end)) expect.push_back(&r);
  auto what = [&] {
    return "table " + t.name + " (root " + std::to_string(t.root) + "), rowids [" + std::to_string(first) + ", " +
           std::to_string(end) + "): " + std::to_string(part.size()) + " rows read, " + std::to_string(expect.size()) +
           " in the whole scan's range";
  };
  if (exact) {
    if (part.size() != expect.size()) finding(what() + " (quick_check: ok)");
    for (size_t i = 0; i < part.size(); ++i)
      if (part[i].rowid != expect[i]->rowid)
        finding(what() + ", row " + std::to_string(i) + ": rowid " + std::to_string(part[i].rowid) + ", expected " +
                std::to_string(expect[i]->rowid));
    return;
  }
  size_t j = 0;
  for (const Row& r : part) {
    while (j < expect.size() && r.rowid != expect[j]->rowid) ++j;
    if (j == expect.size()) finding(what() + ": rowid " + std::to_string(r.rowid) + " is none of the whole scan's in order");
    ++j;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = hs::fuzz::scratch_dir("btree_pages");
  const fs::path file = dir / "db.sqlite";
  std::error_code ec;
  fs::remove(dir / "db.sqlite-journal", ec);
  fs::remove(dir / "db.sqlite-wal", ec);
  hs::fuzz::write_file(file, data, size);

  std::optional<PageFile> pages;
  try {
    pages.emplace(file);
  } catch (const PageFormatError& e) {  // no database in rollback-journal mode: SQLite reads it
    hs::fuzz::expected(e);
    return 0;
  }
  // The header's page size, as the reader takes it: the pages of the file.
  uint32_t page_size = static_cast<uint32_t>(data[16]) << 8 | data[17];
  if (page_size == 1) page_size = 65536;
  const auto file_pages = static_cast<uint32_t>(size / page_size);

  // Pages as a table's root whatever the schema says (a damaged schema SQLite cannot read
  // included): the first two, two chosen by header fields SQLite ignores (the user version, at
  // offset 60, and the application id, at 68: the fuzzer picks them), and ones past the file.
  // Never a crash; bounded scans read a subsequence of the whole scan's rows.
  for (uint32_t root : {uint32_t{0}, file_pages + 1, UINT32_MAX}) (void)reader_scan(*pages, root, kColumns, kMin, kMax, Values::Read);
  auto be32 = [&](size_t at) {
    return static_cast<uint32_t>(data[at]) << 24 | static_cast<uint32_t>(data[at + 1]) << 16 |
           static_cast<uint32_t>(data[at + 2]) << 8 | data[at + 3];
  };
  std::vector<uint32_t> roots = {1, 2, 1 + be32(60) % std::max(file_pages, 1u), 1 + be32(68) % std::max(file_pages, 1u)};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  for (uint32_t root : roots) {
    const auto whole = reader_scan(*pages, root, kColumns, kMin, kMax, Values::Read);
    std::vector<int64_t> rowids;
    if (whole)
      for (const Row& r : *whole) rowids.push_back(r.rowid);
    for (auto [first, end] : ranges_of(rowids)) {
      const auto part = reader_scan(*pages, root, kColumns, first, end, Values::None);
      if (whole && !part) finding("page " + std::to_string(root) + ": a bounded scan refused what the whole scan read");
      if (whole) {
        Table t;
        t.name = "(page " + std::to_string(root) + ")";
        t.root = root;
        compare_range(t, *whole, *part, first, end, false);
      }
    }
  }
  (void)reader_scan(*pages, 1, 0, kMin, kMax);            // no columns: refused
  (void)reader_scan(*pages, 1, kColumns + 1, kMin, kMax);  // more than a Record holds: refused

  // SQLite on the same file: the tables its schema names.
  Sqlite sql;
  const std::string uri = "file:" + file.string() + "?immutable=1";
  if (sqlite3_open_v2(uri.c_str(), &sql.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK) return 0;
  // A bound on SQLite's own work on a damaged file (its loops are not the reader's).
  sqlite3_progress_handler(
      sql.db, 1000, [](void* p) -> int { return ++*static_cast<int64_t*>(p) > 20000; }, &sql.steps);
  std::vector<Table> tables;
  {
    Table master;
    master.name = "sqlite_master";
    master.root = 1;
    master.schema = true;
    tables.push_back(master);
  }
  (void)query(sql.db, "SELECT name, rootpage FROM sqlite_master WHERE type = 'table'", [&](sqlite3_stmt* st) {
    const auto* name = sqlite3_column_text(st, 0);
    const int64_t root = sqlite3_column_int64(st, 1);
    if (!name || sqlite3_column_type(st, 1) != SQLITE_INTEGER || root < 1 || root > UINT32_MAX) return true;
    Table t;
    t.name = reinterpret_cast<const char*>(name);
    t.root = static_cast<uint32_t>(root);
    tables.push_back(std::move(t));
    return tables.size() < kMaxTables;
  });
  std::optional<bool> whole_file;  // PRAGMA quick_check's verdict, asked once when needed
  for (Table& t : tables) {
    describe(sql.db, t);
    const auto mine = reader_scan(*pages, t.root, t.columns, kMin, kMax);
    if (!mine || !t.comparable) continue;
    const auto theirs = sqlite_scan(sql.db, t);
    if (!theirs) continue;  // SQLite found the file damaged: nothing to compare with
    compare_whole(t, *mine, *theirs);
    if (!whole_file) {
      std::string verdict;
      const bool ran = query(sql.db, "PRAGMA quick_check(1)", [&](sqlite3_stmt* st) {
        const auto* v = sqlite3_column_text(st, 0);
        verdict = v ? reinterpret_cast<const char*>(v) : "";
        return true;
      });
      whole_file = ran && verdict == "ok";
    }
    std::vector<int64_t> rowids;
    for (const Row& r : *mine) rowids.push_back(r.rowid);
    for (auto [first, end] : ranges_of(rowids)) {
      const auto part = reader_scan(*pages, t.root, t.columns, first, end, Values::None);
      // The pages and records of a bounded scan are some of the whole scan's: it read them.
      if (!part) finding("table " + t.name + ": a bounded scan refused what the whole scan read");
      compare_range(t, *mine, *part, first, end, *whole_file);
    }
  }
  return 0;
}

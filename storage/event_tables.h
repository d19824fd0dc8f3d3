// Internal: the SQL that follows from an event kind's declaration (tracer/event_kinds.h) — its
// CREATE TABLE, INSERT, indexes — and which lines the Store binds and the reader reads. `K` is
// any form of a kind (they share `table` and `columns`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tracer/event_kinds.h"
#include "tracer/events.h"
#include "tracer/gpu_activity.h"

namespace hs::storage::detail {

template <class Tag>
struct is_optional_tag : std::false_type {};
template <class T>
struct is_optional_tag<kinds::Optional<T>> : std::true_type {};
template <class Tag>
struct is_nullable_tag : std::false_type {};
template <class T>
struct is_nullable_tag<kinds::Nullable<T>> : std::true_type {};

/// True for the lines the Store binds as parameters of a row: every column but runId (bound
/// once per statement, as ?1) and the nsys-only ones (left NULL).
template <class Tag>
inline constexpr bool is_bound = kinds::has_column<Tag> && !std::is_same_v<Tag, kinds::RunId> &&
                                 !std::is_same_v<Tag, kinds::NsysOnly>;

/// The column's declared type: INTEGER, NOT NULL unless nsys (or "absent") allows NULL.
template <class Tag>
constexpr std::string_view column_type() {
  constexpr bool nullable = std::is_same_v<Tag, kinds::TextOrNull> || std::is_same_v<Tag, kinds::GlobalTid> ||
                            std::is_same_v<Tag, kinds::GlobalPid> || std::is_same_v<Tag, kinds::NsysOnly> ||
                            is_optional_tag<Tag>::value || is_nullable_tag<Tag>::value;
  return nullable ? "INTEGER" : "INTEGER  NOT NULL";
}

/// Whether the kind has a line tagged `Tag`.
template <class K, class Tag>
constexpr bool has_tag() {
  bool found = false;
  K::columns([&](auto tag, std::string_view, std::string_view, auto) {
    found = found || std::is_same_v<typename decltype(tag)::type, Tag>;
  });
  return found;
}

/// Whether the kind has a column named `name`.
template <class K>
constexpr bool has_column_named(std::string_view name) {
  bool found = false;
  K::columns([&](auto tag, std::string_view column, std::string_view, auto) {
    found = found || (kinds::has_column<typename decltype(tag)::type> && column == name);
  });
  return found;
}

/// `CREATE TABLE IF NOT EXISTS <table> (...)`, one commented line per column.
template <class K>
std::string create_table_sql() {
  static_assert(has_tag<K, kinds::RunId>(), "every event table has a runId column");
  struct Line {
    std::string decl, comment;
  };
  std::vector<Line> lines;
  K::columns([&](auto tag, std::string_view column, std::string_view doc, auto) {
    using Tag = typename decltype(tag)::type;
    if constexpr (kinds::has_column<Tag>) {
      std::string decl(column);
      decl.resize(std::max<size_t>(decl.size() + 1, 22), ' ');
      std::string comment(doc);
      if constexpr (kinds::is_text<Tag>) comment = comment.empty() ? "StringIds" : "StringIds: " + comment;
      lines.push_back({decl + std::string(column_type<Tag>()), comment});
    }
  });
  std::string sql = "CREATE TABLE IF NOT EXISTS " + std::string(K::table) + " (\n    -- " + std::string(K::doc) + "\n";
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = "    " + lines[i].decl + (i + 1 < lines.size() ? "," : "");
    if (!lines[i].comment.empty()) {
      line.resize(std::max<size_t>(line.size(), 44), ' ');
      line += "   -- " + lines[i].comment;
    }
    sql += line + "\n";
  }
  return sql + ");\n";
}

/// `INSERT INTO <table> (runId, <bound columns>) VALUES (?1, ?, ...)` with `rows` value rows;
/// runId is ?1 in every row, so it is bound once per statement.
template <class K>
std::string insert_sql(size_t rows) {
  std::string columns = "runId", row = "(?1";
  K::columns([&](auto tag, std::string_view column, std::string_view, auto) {
    if constexpr (is_bound<typename decltype(tag)::type>) {
      columns += ", " + std::string(column);
      row += ", ?";
    }
  });
  row += ")";
  std::string sql = "INSERT INTO " + std::string(K::table) + " (" + columns + ") VALUES " + row;
  for (size_t r = 1; r < rows; ++r) sql += ", " + row;
  return sql;
}

/// The indexes `Store::finalize()` gives the kind's table: (runId, start) when it has times,
/// (runId, correlationId) when it has a CUPTI correlation id.
template <class K>
std::string index_sql() {
  const std::string t(K::table);
  std::string sql;
  if constexpr (has_tag<K, kinds::Start>())
    sql += "CREATE INDEX IF NOT EXISTS " + t + "_runId_start ON " + t + " (runId, start);\n";
  if constexpr (has_column_named<K>("correlationId"))
    sql += "CREATE INDEX IF NOT EXISTS " + t + "_correlationId ON " + t + " (runId, correlationId);\n";
  return sql;
}

/// Calls `f(std::type_identity<K>{})` for every event kind (host events, then activity
/// records), `K` its emitted form.
template <class F>
void for_each_kind(F&& f) {
#define HS_FOR_EACH_KIND_(Type, ...) f(std::type_identity<kinds::Type<kinds::Emitted>>{});
  HS_HOST_EVENT_KINDS(HS_FOR_EACH_KIND_)
  HS_ACTIVITY_KINDS(HS_FOR_EACH_KIND_)
#undef HS_FOR_EACH_KIND_
}

}  // namespace hs::storage::detail

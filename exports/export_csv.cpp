#include "exports/export_csv.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "output/text.h"
#include "output/output_file.h"

namespace hs::exports {

namespace fs = std::filesystem;
using storage::CaptureReader;

namespace {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_absent : std::false_type {};
template <class Tag>
struct is_absent<kinds::Absent<Tag>> : std::true_type {};

void quoted(std::string& out, std::string_view s) {
  const bool quote = s.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) {
    out += s;
    return;
  }
  out += '"';
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

// The most bytes of one text cell; a longer one (a module's name of megabytes in an edited
// capture, which every row of the module would repeat) is cut between UTF-8 characters and ends
// in "...". Real cells (names, an op's args text) are far shorter.
constexpr size_t kMaxCsvText = size_t{64} << 10;

template <class T>
void cell(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, storage::SharedText>) {
    cell(out, value.str());
  } else if constexpr (std::is_same_v<T, std::string>) {
    const std::string& v = value;
    if (v.size() <= kMaxCsvText) return quoted(out, v);
    quoted(out, output::cut_text(v, kMaxCsvText));
  }
  else if constexpr (is_optional<T>::value) {
    if (value) cell(out, *value);
  } else if constexpr (std::is_same_v<T, bool>) out += value ? '1' : '0';
  else if constexpr (std::is_enum_v<T>) out += std::to_string(static_cast<int64_t>(value));
  else out += std::to_string(value);
}

// Calls fn(column name, member accessor) for each column the reader's row carries.
template <class Row, class Fn>
void for_each_column(Fn&& fn) {
  Row::columns([&](auto, std::string_view column, std::string_view, auto field) {
    using Member = std::remove_cvref_t<decltype(field(std::declval<Row&>()))>;
    if constexpr (!is_absent<Member>::value) fn(column, field);
  });
}

// Writes one table's rows of `runs` to `path`; nothing (and -1) when it has none and `skip_empty`.
// `Row` is the Shared form: a name repeated over rows is held once while they wait to be written.
template <class Row>
int64_t write_table(const CaptureReader& reader, const std::vector<int64_t>& runs, bool skip_empty, const fs::path& path,
                    bool gzip) {
  storage::StringTables strings;
  std::vector<std::pair<int64_t, std::vector<Row>>> per_run;
  int64_t rows = 0;
  for (const int64_t run : runs) {
    per_run.emplace_back(run, reader.shared_rows<Row>(run, strings));
    rows += static_cast<int64_t>(per_run.back().second.size());
  }
  if (rows == 0 && skip_empty) return -1;
  output::OutputFile file(path, gzip);
  std::string line = "runId";
  for_each_column<Row>([&](std::string_view column, auto) { (line += ',') += column; });
  file.write(line + "\r\n");
  for (const auto& [run, table] : per_run)
    for (const Row& row : table) {
      line = std::to_string(run);
      for_each_column<Row>([&](std::string_view, auto field) {
        line += ',';
        cell(line, field(row));
      });
      line += "\r\n";
      file.write(line);
    }
  file.commit();
  return rows;
}

struct Table {
  std::string_view name, reader_name;
  int64_t (*write)(const CaptureReader&, const std::vector<int64_t>&, bool, const fs::path&, bool);
};

#define HS_CSV_TABLE_(Type, Row, rows, TABLE, ...) \
  Table{TABLE, #rows, &write_table<storage::Shared##Row>},
constexpr Table kTables[] = {HS_HOST_EVENT_KINDS(HS_CSV_TABLE_) HS_ACTIVITY_KINDS(HS_CSV_TABLE_)};
#undef HS_CSV_TABLE_

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::vector<std::string> csv_tables() {
  std::vector<std::string> out;
  for (const Table& t : kTables) out.emplace_back(t.name);
  return out;
}

std::string csv_table(const std::string& name) {
  for (const Table& t : kTables)
    if (lower(name) == lower(t.name) || lower(name) == t.reader_name) return std::string(t.name);
  throw std::invalid_argument("--tables: no event table '" + name + "'; the tables are " + output::join(csv_tables(), ", "));
}

CsvExportSummary export_csv(const CaptureReader& reader, const std::vector<int64_t>& runs,
                            const std::vector<std::string>& tables, const fs::path& dir, bool gzip) {
  for (const int64_t run : runs) reader.run(run);  // throws for an unknown run
  fs::create_directories(dir);
  CsvExportSummary summary;
  for (const Table& t : kTables) {
    const bool named = std::find(tables.begin(), tables.end(), t.name) != tables.end();
    if (!tables.empty() && !named) continue;
    const fs::path path = dir / (std::string(t.name) + (gzip ? ".csv.gz" : ".csv"));
    const int64_t rows = t.write(reader, runs, tables.empty(), path, gzip);
    if (rows < 0) continue;
    summary.rows[std::string(t.name)] = rows;
    summary.files.push_back(path);
  }
  return summary;
}

}  // namespace hs::exports

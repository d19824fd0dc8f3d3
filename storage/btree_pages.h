// Internal to the CaptureReader: a rowid table's records read straight from the database file's
// pages (SQLite's file format, https://www.sqlite.org/fileformat2.html, sections 1.6 and 2),
// for the tables of millions of rows the viewer, check_rows, report, stats and export read
// whole or by a run's rowid range. SQLite's virtual machine spends
// ~150 ns on each row of such a scan; decoding the record from the page in place takes a
// tenth of that.
//
// Only for a file SQLite itself reads from its pages alone: a rollback-journal database (not
// WAL: a -wal may hold newer pages), read while the caller's connection holds SQLite's shared
// lock (an open read transaction), so that no writer commits meanwhile. Anything unexpected —
// a page of another type, a cell outside its page, a record spilling onto overflow pages, a
// value that is not an integer or NULL, a tree deeper or larger than the file — throws
// PageFormatError, and the caller reads the table through SQLite instead (which says what is
// wrong with a damaged file, if anything is).
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace hs::storage::detail {

class PageFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One record of a table leaf page, decoded as far as its header: the columns' values on demand.
class Record {
 public:
  /// SQLITE_INTEGER (1) or SQLITE_NULL (5): the only storage classes read this way.
  int type(int col) const;
  int64_t int64(int col) const;  ///< 0 for NULL
  bool is_null(int col) const { return type(col) == 5; }

 private:
  friend class PageFile;
  static constexpr int kMaxColumns = 64;
  const uint8_t* body_ = nullptr;
  int columns_ = 0;  ///< columns present in the record (a table's later columns may be absent: NULL)
  uint8_t serial_[kMaxColumns] = {};
  uint32_t offset_[kMaxColumns] = {};
};

/// A database file mapped read-only for one scan.
class PageFile {
 public:
  /// Maps `path`. Throws PageFormatError when it is no SQLite database in rollback-journal mode
  /// or cannot be mapped.
  explicit PageFile(const std::filesystem::path& path);
  ~PageFile();
  PageFile(const PageFile&) = delete;
  PageFile& operator=(const PageFile&) = delete;

  /// The mapped file's device and inode (fstat of the descriptor it was mapped from).
  uint64_t device() const { return dev_; }
  uint64_t inode() const { return ino_; }
  /// Calls `on_record(rowid, record)` for every record of the table whose b-tree starts at page
  /// `root`, in rowid order, for rowids in [first_rowid, end_rowid) (end_rowid INT64_MAX: to the
  /// table's end, rowid INT64_MAX included; an empty range reads no page). `columns`: the table's
  /// column count (a record holds at most that many). Throws PageFormatError (see above), or
  /// whatever `on_record` throws.
  template <class F>
  void scan(uint32_t root, int columns, int64_t first_rowid, int64_t end_rowid, F&& on_record);

 private:
  const uint8_t* page(uint32_t n) const;
  void walk(uint32_t n, int depth);
  bool leaf(const uint8_t* p, const uint8_t* hdr);
  struct Visitor {
    virtual ~Visitor() = default;
    virtual void record(int64_t rowid, const Record& r) = 0;
  };
  void scan_tree(uint32_t root, int columns, int64_t first_rowid, int64_t end_rowid, Visitor& v);

  int fd_ = -1;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  uint32_t page_size_ = 0, usable_ = 0, pages_ = 0;
  uint64_t dev_ = 0, ino_ = 0;
  // The scan under way.
  Visitor* visitor_ = nullptr;
  int columns_ = 0;
  int64_t first_ = 0, end_ = 0;
  uint64_t visits_ = 0;  ///< pages visited: more than the file holds is a loop in a damaged tree
  bool done_ = false;
  Record record_;
};

template <class F>
void PageFile::scan(uint32_t root, int columns, int64_t first_rowid, int64_t end_rowid, F&& on_record) {
  struct V final : Visitor {
    F& f;
    explicit V(F& fn) : f(fn) {}
    void record(int64_t rowid, const Record& r) override { f(rowid, r); }
  } v(on_record);
  scan_tree(root, columns, first_rowid, end_rowid, v);
}

}  // namespace hs::storage::detail

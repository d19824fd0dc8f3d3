#include "storage/btree_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace hs::storage::detail {

namespace {

constexpr int kInteger = 1, kNull = 5;  // SQLITE_INTEGER, SQLITE_NULL
constexpr int kMaxDepth = 40;            // a b-tree of 2^40 pages is no capture
constexpr int64_t kNoEnd = INT64_MAX;    // an end_rowid reading to the table's end, rowid INT64_MAX included

uint32_t be16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 8 | p[1]; }
uint32_t be32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 | p[3];
}

/// SQLite's varint at `p` (1 to 9 bytes), none of it at or past `end`: its length.
int varint(const uint8_t* p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (int i = 0; i < 8; ++i) {
    if (p + i >= end) throw PageFormatError("a varint runs past its page");
    v = (v << 7) | (p[i] & 0x7f);
    if (!(p[i] & 0x80)) return i + 1;
  }
  if (p + 8 >= end) throw PageFormatError("a varint runs past its page");
  v = (v << 8) | p[8];
  return 9;
}

/// Bytes a value of serial type `t` takes in a record's body.
uint64_t serial_size(uint64_t t) {
  static constexpr uint8_t kSize[] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};
  if (t < 10) return kSize[t];
  if (t < 12) throw PageFormatError("a reserved serial type");
  return (t - 12) / 2;
}

/// A big-endian two's complement integer of `n` bytes.
int64_t be_int(const uint8_t* p, int n) {
  uint64_t v = (p[0] & 0x80) ? ~uint64_t{0} : 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return static_cast<int64_t>(v);
}

}  // namespace

int Record::type(int col) const {
  if (col >= columns_) return kNull;  // a column added to the table after the record was written
  const uint8_t t = serial_[col];
  if (t == 0) return kNull;
  if (t <= 6 || t == 8 || t == 9) return kInteger;
  throw PageFormatError("a value that is no integer");  // REAL, TEXT, BLOB: SQLite converts them
}

int64_t Record::int64(int col) const {
  if (col >= columns_) return 0;
  const uint8_t* p = body_ + offset_[col];
  switch (serial_[col]) {
    case 0: return 0;
    case 1: return be_int(p, 1);
    case 2: return be_int(p, 2);
    case 3: return be_int(p, 3);
    case 4: return be_int(p, 4);
    case 5: return be_int(p, 6);
    case 6: return be_int(p, 8);
    case 8: return 0;
    case 9: return 1;
    default: throw PageFormatError("a value that is no integer");
  }
}

PageFile::PageFile(const std::filesystem::path& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw PageFormatError("cannot open the file");
  struct stat st {};
  if (fstat(fd_, &st) != 0 || st.st_size < 512) {
    ::close(fd_);
    throw PageFormatError("not a database file");
  }
  size_ = static_cast<size_t>(st.st_size);
  dev_ = static_cast<uint64_t>(st.st_dev);
  ino_ = static_cast<uint64_t>(st.st_ino);
  void* m = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) {
    ::close(fd_);
    throw PageFormatError("cannot map the file");
  }
  map_ = static_cast<const uint8_t*>(m);
  try {
    if (std::memcmp(map_, "SQLite format 3", 16) != 0) throw PageFormatError("not a database file");
    if (map_[18] != 1 || map_[19] != 1) throw PageFormatError("not in rollback-journal mode");
    page_size_ = be16(map_ + 16);
    if (page_size_ == 1) page_size_ = 65536;
    if (page_size_ < 512 || (page_size_ & (page_size_ - 1)) != 0) throw PageFormatError("a bad page size");
    usable_ = page_size_ - map_[20];
    if (usable_ < 480) throw PageFormatError("a bad usable page size");
    pages_ = static_cast<uint32_t>(std::min<size_t>(size_ / page_size_, UINT32_MAX));
  } catch (...) {
    munmap(const_cast<uint8_t*>(map_), size_);
    ::close(fd_);
    throw;
  }
}

PageFile::~PageFile() {
  munmap(const_cast<uint8_t*>(map_), size_);
  ::close(fd_);
}

const uint8_t* PageFile::page(uint32_t n) const {
  if (n < 1 || n > pages_) throw PageFormatError("a page number past the file");
  return map_ + static_cast<size_t>(n - 1) * page_size_;
}

void PageFile::scan_tree(uint32_t root, int columns, int64_t first_rowid, int64_t end_rowid, Visitor& v) {
  if (columns < 1 || columns > Record::kMaxColumns) throw PageFormatError("too many columns");
  visitor_ = &v;
  columns_ = columns;
  first_ = first_rowid;
  end_ = end_rowid;
  visits_ = 0;
  done_ = false;
  if (end_rowid <= first_rowid && end_rowid != kNoEnd) return;  // no rowid (and end_ − 1 is then always defined)
  walk(root, 0);
}

/// Page `n` of the table's b-tree: an interior page's children whose rowids may lie in
/// [first_, end_), in order; a leaf page's records.
void PageFile::walk(uint32_t n, int depth) {
  if (depth > kMaxDepth || ++visits_ > pages_) throw PageFormatError("a b-tree that loops");
  const uint8_t* p = page(n);
  const uint8_t* hdr = p + (n == 1 ? 100 : 0);
  if (hdr[0] == 13) {
    done_ = leaf(p, hdr);
    return;
  }
  if (hdr[0] != 5) throw PageFormatError("a page that is no table b-tree page");
  const uint32_t cells = be16(hdr + 3);
  const uint8_t* end = p + usable_;
  if (hdr + 12 + 2 * cells > end) throw PageFormatError("a cell array past its page");
  for (uint32_t i = 0; i < cells; ++i) {
    const uint32_t off = be16(hdr + 12 + 2 * i);
    if (off < 8 || p + off + 4 >= end) throw PageFormatError("a cell outside its page");
    uint64_t key = 0;
    varint(p + off + 4, end, key);
    if (static_cast<int64_t>(key) < first_) continue;  // its child holds rowids <= key
    walk(be32(p + off), depth + 1);
    if (done_ || (end_ != kNoEnd && static_cast<int64_t>(key) >= end_ - 1)) {  // what follows is past end_
      done_ = true;
      return;
    }
  }
  walk(be32(hdr + 8), depth + 1);
}

/// The records of a leaf page in [first_, end_); true once a rowid at or past end_ was seen.
bool PageFile::leaf(const uint8_t* p, const uint8_t* hdr) {
  const uint32_t cells = be16(hdr + 3);
  const uint8_t* end = p + usable_;
  if (hdr + 8 + 2 * cells > end) throw PageFormatError("a cell array past its page");
  const uint64_t max_local = usable_ - 35;
  for (uint32_t i = 0; i < cells; ++i) {
    const uint32_t off = be16(hdr + 8 + 2 * i);
    const uint8_t* c = p + off;
    if (off < 8 || c >= end) throw PageFormatError("a cell outside its page");
    uint64_t payload = 0, key = 0;
    c += varint(c, end, payload);
    c += varint(c, end, key);
    const auto rowid = static_cast<int64_t>(key);
    if (rowid < first_) continue;
    if (rowid >= end_ && end_ != kNoEnd) return true;
    if (payload > max_local) throw PageFormatError("a record on overflow pages");
    if (payload > static_cast<uint64_t>(end - c)) throw PageFormatError("a record past its page");
    const uint8_t* rec_end = c + payload;
    uint64_t header = 0;
    const uint8_t* h = c + varint(c, rec_end, header);
    if (header > payload) throw PageFormatError("a record header past its record");
    const uint8_t* body = c + header;
    const uint64_t body_size = payload - header;
    uint64_t at = 0;  // at most body_size: each value's size is checked before it is added
    int col = 0;
    while (h < body) {
      if (col >= columns_) throw PageFormatError("a record with more columns than its table");
      uint64_t t = 0;
      h += varint(h, body, t);
      record_.serial_[col] = static_cast<uint8_t>(t < 12 ? t : 12 + (t & 1));  // text and blobs: not read
      record_.offset_[col] = static_cast<uint32_t>(at);
      // Not `at + size > body_size`: sizes of up to 2^63 each could wrap the sum past zero.
      if (serial_size(t) > body_size - at) throw PageFormatError("a record's values past its record");
      at += serial_size(t);
      ++col;
    }
    record_.body_ = body;
    record_.columns_ = col;
    visitor_->record(rowid, record_);
  }
  return false;
}

}  // namespace hs::storage::detail

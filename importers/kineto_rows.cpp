#include "importers/kineto_rows.h"

#include <algorithm>
#include <cstring>

namespace hs::importers::kineto {

RowSink::RowSink(storage::Store& store, int64_t run, size_t batch_rows, KinetoSummary& summary)
    : store_(store), run_(run), batch_rows_(batch_rows), summary_(summary) {}

RowSink::~RowSink() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

std::string_view RowSink::keep(std::string_view s) {
  if (s.empty()) return {};
  auto& arena = cur_.arena;
  if (s.size() > kArenaBlock / 4) {  // its own block, before the last one (still being filled)
    auto own = std::make_unique<char[]>(s.size());
    std::memcpy(own.get(), s.data(), s.size());
    const std::string_view kept(own.get(), s.size());
    arena.insert(arena.empty() ? arena.end() : arena.end() - 1, std::move(own));
    return kept;
  }
  if (arena.empty() || kArenaBlock - cur_.arena_used < s.size()) {
    arena.push_back(std::make_unique_for_overwrite<char[]>(kArenaBlock));
    cur_.arena_used = 0;
  }
  char* at = arena.back().get() + cur_.arena_used;
  std::memcpy(at, s.data(), s.size());
  cur_.arena_used += s.size();
  return {at, s.size()};
}

ActivityRows& RowSink::activity(std::optional<int64_t> pid) { return cur_.activity[pid]; }

void RowSink::note_host_pid(int64_t pid) {
  if (last_host_pid_ == pid) return;
  last_host_pid_ = pid;
  auto& pids = summary_.pids;
  if (auto it = std::lower_bound(pids.begin(), pids.end(), pid); it == pids.end() || *it != pid) pids.insert(it, pid);
}

tracer::StrId RowSink::str(std::string_view s) {
  if (auto it = strings_.find(s); it != strings_.end()) return it->second;
  // The map's nodes never move: the batch's StringDef views its key until the run ends.
  auto [it, added] = strings_.try_emplace(std::string(s), static_cast<tracer::StrId>(strings_.size()));
  cur_.new_strings.push_back({it->second, it->first});
  return it->second;
}

uint32_t RowSink::thread(int64_t pid, int64_t tid) {
  auto [it, added] = threads_.try_emplace({pid, tid}, static_cast<uint32_t>(threads_.size()));
  if (added) cur_.new_threads.push_back({it->second, tid});
  return it->second;
}

void RowSink::Buffers::clear() {
  for (auto& [pid, rows] : activity) {
#define HS_KINETO_CLEAR_(Type, Row, rows_, ...) rows.rows_.clear();
    HS_ACTIVITY_KINDS(HS_KINETO_CLEAR_)
#undef HS_KINETO_CLEAR_
  }
  arena.clear();
  arena_used = kArenaBlock;
  new_strings.clear();
  new_threads.clear();
  records.clear();
}

void RowSink::count(const Buffers& b) {
  for (const auto& [pid, rows] : b.activity) {
#define HS_KINETO_COUNT_(Type, Row, rows_, ...) \
  if (!rows.rows_.empty())                      \
    summary_.rows_by_table[std::string(tracer::Type::table)] += static_cast<int64_t>(rows.rows_.size());
    HS_ACTIVITY_KINDS(HS_KINETO_COUNT_)
#undef HS_KINETO_COUNT_
  }
  for (const tracer::Record& r : b.records)
    tracer::with_kind(r.kind, [&](auto type) { ++summary_.rows_by_table[std::string(decltype(type)::type::table)]; });
}

void RowSink::write(Buffers& b) {
  for (auto& [pid, rows] : b.activity) {
    tracer::ActivityBatch a;
    a.run_id = run_;
    a.pid = pid ? *pid : b.default_pid;
    bool any = false;
#define HS_KINETO_SPAN_(Type, Row, rows_, ...) \
  a.rows_ = rows.rows_;                        \
  any = any || !rows.rows_.empty();
    HS_ACTIVITY_KINDS(HS_KINETO_SPAN_)
#undef HS_KINETO_SPAN_
    if (any) store_.write_activity(a);  // a pid of an earlier batch may have none in this one
  }
  if (!b.records.empty() || !b.new_strings.empty() || !b.new_threads.empty()) {
    tracer::RecordBatch r;
    r.run_id = run_;
    r.strings = b.new_strings;
    r.threads = b.new_threads;
    r.records = b.records;
    store_.write_batch(r);
  }
  b.clear();
}

void RowSink::writer_main() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return busy_ || stop_; });
    if (!busy_) return;  // stop_, nothing in flight
    lk.unlock();
    std::exception_ptr err;
    try {
      write(out_);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    if (err && !error_) error_ = err;
    busy_ = false;
    cv_.notify_all();
  }
}

void RowSink::drain() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_; });
  if (error_) std::rethrow_exception(error_);
}

void RowSink::flush() {
  count(cur_);
  cur_.default_pid = last_host_pid_.value_or(0);
  drain();  // out_ is written and cleared
  std::swap(cur_, out_);
  if (!writer_.joinable()) writer_ = std::thread([this] { writer_main(); });
  {
    std::lock_guard lk(mu_);
    busy_ = true;
  }
  cv_.notify_all();
  pending_ = 0;
}

void RowSink::finish() {
  count(cur_);
  cur_.default_pid = last_host_pid_.value_or(0);
  drain();
  write(cur_);
  pending_ = 0;
}

}  // namespace hs::importers::kineto

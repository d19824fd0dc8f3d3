#include "importers/kineto_rows.h"

#include <algorithm>
#include <cstring>

namespace hs::importers::kineto {

RowSink::RowSink(storage::Store& store, int64_t run, size_t batch_rows, KinetoSummary& summary)
    : store_(store), run_(run), batch_rows_(batch_rows), summary_(summary) {}

std::string_view RowSink::keep(std::string_view s) {
  if (s.empty()) return {};
  if (s.size() > kArenaBlock / 4) {  // its own block, before the last one (still being filled)
    auto own = std::make_unique<char[]>(s.size());
    std::memcpy(own.get(), s.data(), s.size());
    const std::string_view kept(own.get(), s.size());
    arena_.insert(arena_.empty() ? arena_.end() : arena_.end() - 1, std::move(own));
    return kept;
  }
  if (arena_.empty() || kArenaBlock - arena_used_ < s.size()) {
    arena_.push_back(std::make_unique_for_overwrite<char[]>(kArenaBlock));
    arena_used_ = 0;
  }
  char* at = arena_.back().get() + arena_used_;
  std::memcpy(at, s.data(), s.size());
  arena_used_ += s.size();
  return {at, s.size()};
}

ActivityRows& RowSink::activity(std::optional<int64_t> pid) { return activity_[pid]; }

void RowSink::note_host_pid(int64_t pid) {
  if (last_host_pid_ == pid) return;
  last_host_pid_ = pid;
  auto& pids = summary_.pids;
  if (auto it = std::lower_bound(pids.begin(), pids.end(), pid); it == pids.end() || *it != pid) pids.insert(it, pid);
}

tracer::StrId RowSink::str(std::string_view s) {
  auto [it, added] = strings_.try_emplace(std::string(s), static_cast<tracer::StrId>(strings_.size()));
  if (added) new_strings_.push_back({it->second, it->first});
  return it->second;
}

uint32_t RowSink::thread(int64_t pid, int64_t tid) {
  auto [it, added] = threads_.try_emplace({pid, tid}, static_cast<uint32_t>(threads_.size()));
  if (added) new_threads_.push_back({it->second, tid});
  return it->second;
}

void RowSink::flush() {
  for (auto& [pid, rows] : activity_) {
    tracer::ActivityBatch b;
    b.run_id = run_;
    b.pid = pid ? *pid : last_host_pid_.value_or(0);
#define HS_KINETO_SPAN_(Type, Row, rows_, ...) b.rows_ = rows.rows_;
    HS_ACTIVITY_KINDS(HS_KINETO_SPAN_)
#undef HS_KINETO_SPAN_
    store_.write_activity(b);
#define HS_KINETO_COUNT_(Type, Row, rows_, ...) \
  if (!rows.rows_.empty())                      \
    summary_.rows_by_table[std::string(tracer::Type::table)] += static_cast<int64_t>(rows.rows_.size());
    HS_ACTIVITY_KINDS(HS_KINETO_COUNT_)
#undef HS_KINETO_COUNT_
  }
  activity_.clear();
  arena_.clear();
  arena_used_ = kArenaBlock;
  if (!records_.empty() || !new_strings_.empty() || !new_threads_.empty()) {
    tracer::RecordBatch b;
    b.run_id = run_;
    b.strings = new_strings_;
    b.threads = new_threads_;
    b.records = records_;
    store_.write_batch(b);
    for (const tracer::Record& r : records_)
      tracer::with_kind(r.kind, [&](auto type) {
        ++summary_.rows_by_table[std::string(decltype(type)::type::table)];
      });
    new_strings_.clear();
    new_threads_.clear();
    records_.clear();
  }
  pending_ = 0;
}

}  // namespace hs::importers::kineto

#include "tracer/host_tracer.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "tracer/kind_names.h"

namespace hs::tracer {

std::string_view to_string(RunStatus s) { return name_of(kRunStatusNames, s, "unknown"); }

static_assert(sizeof(Record) <= 64, "TracerOptions documents 64-byte records");

namespace {

constexpr uint32_t kNoId = UINT32_MAX;
// A recorded text id with this bit is a pinned text's index (HostTracer::pin), else an id of the
// recording thread's string table.
constexpr uint32_t kPinnedBit = uint32_t{1} << 31;

// Process-wide run generation: every begin_run of every tracer gets a fresh value, so a
// thread-local cache from an earlier run (or a destroyed tracer at the same address) never
// matches.
std::atomic<uint64_t> g_generation{0};

// Per-thread cache of "my buffer in that tracer's current run". Trivially constructible, so
// it lives in static TLS: touching it never allocates.
struct TlsCache {
  const void* tracer;
  uint64_t gen;
  HostTracer::ThreadBuffer* tb;
};
thread_local TlsCache t_cache{nullptr, 0, nullptr};
thread_local char t_token;  // its address identifies the thread

// The recording path's handshake with end_run is a Dekker pair: the recording thread raises
// `busy` then reads `active_`; end_run clears `active_` then reads every `busy`. Each side needs
// a full fence between its store and its load. Where the kernel offers membarrier's private
// expedited command, the fence is asymmetric: the hot side pays only a compiler barrier and
// end_run (once per run) a membarrier, which runs a full fence on every thread of the process
// that is on a CPU. Otherwise both sides use seq_cst accesses.
bool register_membarrier() noexcept {
#if defined(SYS_membarrier)
  constexpr int kQuery = 0, kPrivateExpedited = 1 << 3, kRegisterPrivateExpedited = 1 << 4;
  const long cmds = ::syscall(SYS_membarrier, kQuery, 0, 0);
  if (cmds < 0 || !(cmds & kPrivateExpedited) || !(cmds & kRegisterPrivateExpedited)) return false;
  return ::syscall(SYS_membarrier, kRegisterPrivateExpedited, 0, 0) == 0;
#else
  return false;
#endif
}
const bool g_asymmetric_fence = register_membarrier();

// The recording thread's half of the fence.
inline void light_fence() noexcept {
  if (g_asymmetric_fence)
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// end_run's half.
void heavy_fence() noexcept {
#if defined(SYS_membarrier)
  constexpr int kPrivateExpedited = 1 << 3;
  if (g_asymmetric_fence) {
    // Registered, so it does not fail; if it ever did, the recording threads' stores still
    // leave their store buffers within microseconds on every real CPU: wait that out.
    if (::syscall(SYS_membarrier, kPrivateExpedited, 0, 0) == 0) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Starts fetching the line at `p` for a store. x86's PREFETCHW asks for the line in the state a
// store needs (exclusive), where a read prefetch would leave the store another miss if the line is
// shared with the thread that read it last (the writer thread drains the chunks). PREFETCHW is a
// NOP on the few x86-64 CPUs without it; the compiler only emits it with -mprfchw, so it is written
// here.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

// How many slots ahead of the one being filled the recording path prefetches for writing: at about
// 10 ns an event, 32 events give the line ~300 ns to arrive from the writer thread's core (measured on
// a 2-core AMD EPYC with bench_ingest --only record_only: 8 ahead 10.0 ns an event, 16 9.4, 32 9.1,
// 64 9.2, 128 9.3). A chunk's first slots are prefetched when the thread takes the chunk.
inline constexpr uint32_t kPrefetchSlots = 32;

// Single-writer counter bump (no read-modify-write bus lock; readers see a recent value).
inline void bump(std::atomic<uint64_t>& c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

// memcmp(a, b, n) == 0 without a call for the short strings events carry (names, devices):
// 8-byte words, the last one overlapping.
inline bool same_bytes(const char* a, const char* b, size_t n) noexcept {
  if (n < 8) {
    for (size_t i = 0; i < n; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  auto word = [](const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  for (size_t i = 0; i + 8 < n; i += 8)
    if (word(a + i) != word(b + i)) return false;
  return word(a + n - 8) == word(b + n - 8);
}

uint64_t hash_bytes(std::string_view s) {
  // 8 bytes at a time, multiply-xorshift mixing (wyhash-style constants).
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  h = (h ^ v) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

size_t next_pow2(size_t v) {
  size_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

/// A chunk: fixed-capacity records, filled by one recording thread, drained by the writer. A
/// line of its own: the writer's `consumed` does not share a line with a recording thread's
/// `size`.
struct alignas(64) HostTracer::Chunk {
  Record* records = nullptr;
  uint32_t capacity = 0;
  std::atomic<uint32_t> size{0};  // written by the owning recording thread (release)
  uint32_t consumed = 0;          // writer thread only: records already batched
  ThreadBuffer* owner = nullptr;  // set when a thread takes the chunk
};

/// One recording thread's state within a run, with its string table.
///
/// Between two events of a real model the weights streamed through the caches evict the
/// tracer's lines, so an event's cost is the lines it touches. What every event reads comes
/// first, in one line: the handshake flag, the current chunk, the counters. An event's strings
/// then cost their `memo` lines, entries and arena text, and the caller's own bytes; the memo
/// lines and the caller's bytes are prefetched together (fill_record), so that their misses
/// overlap.
struct alignas(64) HostTracer::ThreadBuffer {
  // Recording thread (and end_run for `busy`); the counters are written by the owning thread only.
  std::atomic<uint32_t> busy{0};
  uint32_t index = 0;
  std::atomic<Chunk*> current{nullptr};
  // `current`'s records and capacity, and its size as this thread last stored it: the path
  // reads them here and only stores the new size into the chunk's line (set_current).
  Record* records = nullptr;
  uint32_t capacity = 0, size = 0;
  std::atomic<uint32_t> entry_count{0};
  std::atomic<uint64_t> recorded{0}, dropped_no_chunk{0}, dropped_strings{0}, handed_off{0};
  const void* token = nullptr;
  int64_t os_tid = 0;

  // String table: open addressing over `slots` (id + 1; 0 = empty), text in `arena`.
  struct Entry {
    uint64_t hash;
    uint32_t offset, len;
  };
  std::unique_ptr<char[]> arena;
  size_t arena_cap = 0, arena_used = 0;
  std::unique_ptr<Entry[]> entries;
  uint32_t entry_cap = 0;
  std::unique_ptr<uint32_t[]> slots;
  size_t slot_mask = 0;
  // Front cache keyed by the view's address: most views point at the same bytes every call
  // (literals, module FQN members). A hit is still verified byte by byte — the bytes at an
  // address can change (a reused std::string) — but skips hashing and probing.
  struct Memo {
    const char* ptr;
    uint32_t len, id;
  };
  static constexpr unsigned kMemoBits = 10;
  static constexpr size_t kMemo = size_t{1} << kMemoBits;  // a 30-layer decoder's module names fit
  Memo memo[kMemo] = {};

  // Writer thread only.
  std::unique_ptr<StrId[]> run_ids;  // local id → run-scoped StrId (kNoId = not yet mapped)
  bool announced = false;

  ThreadBuffer(size_t strings, size_t bytes)
      : arena(new char[std::max<size_t>(bytes, 1)]),
        arena_cap(bytes),
        entries(new Entry[strings]),
        entry_cap(static_cast<uint32_t>(strings)),
        slots(new uint32_t[next_pow2(2 * strings)]()),
        slot_mask(next_pow2(2 * strings) - 1),
        run_ids(new StrId[strings]) {
    std::fill_n(run_ids.get(), strings, kNoId);
  }

  std::string_view text(uint32_t id) const {
    const Entry& e = entries[id];
    return {arena.get() + e.offset, e.len};
  }

  // The two memo entries `s` may sit in.
  Memo* ways(std::string_view s) noexcept {
    // Fibonacci hashing of the address (heap strings are 16-byte aligned: the low bits say nothing).
    const uint64_t key = (reinterpret_cast<uintptr_t>(s.data()) ^ s.size()) * 0x9E3779B97F4A7C15ull;
    // Two ways: the entry at the key's slot, then its neighbour (where a newer entry pushed it).
    return &memo[(key >> (64 - kMemoBits)) & ~size_t{1}];
  }
  // Starts loading what intern(s) reads first (its memo line and the text), so that the misses
  // of an event's several strings overlap instead of following each other.
  void prefetch(std::string_view s) noexcept {
    __builtin_prefetch(ways(s));
    __builtin_prefetch(s.data());
  }

  // Returns the local id of `s`, interning it; kNoId when the table or arena is full.
  uint32_t intern(std::string_view s) noexcept {
    if (s.empty()) s = std::string_view("", 0);  // never a null data() below
    Memo* way = ways(s);
    for (int w = 0; w < 2; ++w)
      if (way[w].ptr == s.data() && way[w].len == s.size() && way[w].id < entry_count.load(std::memory_order_relaxed) &&
          same_bytes(arena.get() + entries[way[w].id].offset, s.data(), s.size()))
        return way[w].id;
    const uint32_t id = intern_slow(s);
    if (id != kNoId) {
      way[1] = way[0];
      way[0] = {s.data(), static_cast<uint32_t>(s.size()), id};
    }
    return id;
  }

  uint32_t intern_slow(std::string_view s) noexcept {
    const uint64_t h = hash_bytes(s);
    size_t i = h & slot_mask;
    for (;;) {
      const uint32_t v = slots[i];
      if (v == 0) break;
      const Entry& e = entries[v - 1];
      if (e.hash == h && e.len == s.size() && std::memcmp(arena.get() + e.offset, s.data(), s.size()) == 0) return v - 1;
      i = (i + 1) & slot_mask;
    }
    const uint32_t n = entry_count.load(std::memory_order_relaxed);
    if (n >= entry_cap || s.size() > arena_cap - arena_used) return kNoId;
    if (!s.empty()) std::memcpy(arena.get() + arena_used, s.data(), s.size());
    entries[n] = {h, static_cast<uint32_t>(arena_used), static_cast<uint32_t>(s.size())};
    arena_used += s.size();
    slots[i] = n + 1;
    entry_count.store(n + 1, std::memory_order_release);
    return n;
  }

  // Makes `c` (nullptr: none) the chunk this thread records into; owning thread only.
  // Its first kPrefetchSlots slots are prefetched for writing, as record() does further on.
  void set_current(Chunk* c) noexcept {
    records = c ? c->records : nullptr;
    capacity = c ? c->capacity : 0;
    size = c ? c->size.load(std::memory_order_relaxed) : 0;
    for (uint32_t i = size; i < std::min(capacity, size + kPrefetchSlots); ++i) prefetch_for_write(&records[i]);
    current.store(c, std::memory_order_release);
  }

  void reset_run() {
    set_current(nullptr);
    token = nullptr;
    os_tid = 0;
    arena_used = 0;
    const uint32_t n = entry_count.load(std::memory_order_relaxed);
    std::fill_n(slots.get(), slot_mask + 1, 0u);
    std::fill_n(run_ids.get(), n, kNoId);
    std::fill_n(memo, kMemo, Memo{});
    entry_count.store(0, std::memory_order_relaxed);
    recorded.store(0, std::memory_order_relaxed);
    dropped_no_chunk.store(0, std::memory_order_relaxed);
    dropped_strings.store(0, std::memory_order_relaxed);
    handed_off.store(0, std::memory_order_relaxed);
    announced = false;
  }
};

/// The texts pin() keeps: an arena of entries [uint32 index][bytes], each header 4-aligned, and
/// a table of where each entry's bytes lie. Appended under `mu`; `count` publishes an entry
/// once it is written. Never freed or moved while the tracer lives.
struct HostTracer::PinnedTexts {
  struct Entry {
    uint32_t offset, len;  // of the bytes, from the arena's start
  };
  std::unique_ptr<char[]> arena;
  size_t arena_cap = 0, arena_used = 0;
  std::unique_ptr<Entry[]> entries;
  size_t entry_cap = 0;
  std::atomic<uint32_t> count{0};
  std::mutex mu;
  std::unordered_map<std::string_view, uint32_t> index;  // views into `arena`

  PinnedTexts(size_t strings, size_t bytes)
      : arena(new char[std::max<size_t>(bytes, 1)]()), arena_cap(bytes), entries(new Entry[strings]),
        entry_cap(strings) {}

  std::string_view text(uint32_t i) const { return {arena.get() + entries[i].offset, entries[i].len}; }

  // What the recording path reads to tell pinned views, loaded once per event.
  struct Lookup {
    const char* arena;
    size_t arena_cap;
    uint32_t count;
    const Entry* entries;
    // The index of `s` when it is a view pin() returned (its address, the index stored before
    // it and the entry's offset and length all agree), else false. Reads the header and the
    // entry, never the text.
    bool find(std::string_view s, uint32_t& i) const noexcept {
      const uintptr_t off = reinterpret_cast<uintptr_t>(s.data()) - reinterpret_cast<uintptr_t>(arena);
      if (off < 4 || off > arena_cap) return false;  // an empty text may sit at the very end
      uint32_t k;
      std::memcpy(&k, arena + off - 4, 4);
      if (k >= count || entries[k].offset != off || entries[k].len != s.size()) return false;
      i = k;
      return true;
    }
  };
  Lookup lookup() const noexcept {
    return {arena.get(), arena_cap, count.load(std::memory_order_acquire), entries.get()};
  }

  std::string_view pin(std::string_view s) {
    std::lock_guard lk(mu);
    if (auto it = index.find(s); it != index.end()) return text(it->second);
    const uint32_t n = count.load(std::memory_order_relaxed);
    const size_t header = (arena_used + 3) & ~size_t{3};
    if (n >= entry_cap || header + 4 > arena_cap || s.size() > arena_cap - header - 4) return s;
    std::memcpy(arena.get() + header, &n, 4);
    if (!s.empty()) std::memcpy(arena.get() + header + 4, s.data(), s.size());
    entries[n] = {static_cast<uint32_t>(header + 4), static_cast<uint32_t>(s.size())};
    arena_used = header + 4 + s.size();
    index.emplace(text(n), n);
    count.store(n + 1, std::memory_order_release);
    return text(n);
  }
};

/// Writer-thread state: the batch being built and the run's string dedupe.
struct HostTracer::WriterState {
  std::vector<Record> batch;
  std::vector<StringDef> strings;
  std::vector<ThreadDef> threads;
  std::vector<Chunk*> drained;
  std::vector<Chunk*> snapshot;
  std::unordered_map<std::string_view, StrId> run_strings;  // views into thread arenas and pins_
  std::vector<StrId> pinned_run_ids;  // pinned index → run-scoped StrId (kNoId = not yet mapped)
  StrId next_string = 0;
  std::exception_ptr error;  // first failure of the writer in this run
  std::string error_text;
};

HostTracer::HostTracer(EventWriter& writer, TracerOptions options) : writer_(writer), opts_(options) {
  if (opts_.chunk_records == 0 || opts_.chunks == 0 || opts_.max_threads == 0 || opts_.strings_per_thread == 0 ||
      opts_.batch_records == 0)
    throw std::invalid_argument("HostTracer: chunk_records, chunks, max_threads, strings_per_thread and "
                                "batch_records must be > 0");
  if (opts_.chunk_records > UINT32_MAX || opts_.strings_per_thread >= kPinnedBit ||
      opts_.string_bytes_per_thread > UINT32_MAX || opts_.pinned_strings >= kPinnedBit - 1 ||
      opts_.pinned_bytes > UINT32_MAX)
    throw std::invalid_argument("HostTracer: chunk_records, string_bytes_per_thread and pinned_bytes must fit in "
                                "32 bits, strings_per_thread and pinned_strings in 31");
  if (opts_.writer_wake_chunks > opts_.chunks)
    throw std::invalid_argument("HostTracer: writer_wake_chunks must be <= chunks");
  wake_chunks_ = opts_.writer_wake_chunks ? opts_.writer_wake_chunks : std::max<size_t>(1, opts_.chunks / 2);
  pins_ = std::make_unique<PinnedTexts>(opts_.pinned_strings, opts_.pinned_bytes);
  ws_ = std::make_unique<WriterState>();
  ws_->pinned_run_ids.assign(opts_.pinned_strings, kNoId);
  writer_thread_ = std::thread([this] { writer_main(); });
}

HostTracer::~HostTracer() {
  if (active_.load()) {
    try {
      end_run(RunStatus::Incomplete, "tracer destroyed before end_run");
    } catch (...) {
    }
  }
  {
    std::lock_guard lk(pool_mu_);
    stop_ = true;
  }
  pool_cv_.notify_all();
  writer_thread_.join();
}

// ---------------------------------------------------------------------------------------
// Buffers

void HostTracer::allocate_buffers() {
  if (record_storage_) return;  // sized once from the (immutable) options, reused by every run
  const size_t n = opts_.chunks;
  record_storage_.reset(new Record[n * opts_.chunk_records]);
  chunks_.reset(new Chunk[n]);
  chunk_count_ = n;
  spares_.reserve(n);
  full_.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    chunks_[i].records = record_storage_.get() + i * opts_.chunk_records;
    chunks_[i].capacity = static_cast<uint32_t>(opts_.chunk_records);
    spares_.push_back(&chunks_[i]);
  }
  spare_count_.store(n);
  buffers_.reserve(opts_.max_threads);
  for (size_t i = 0; i < opts_.max_threads; ++i)
    buffers_.push_back(std::make_unique<ThreadBuffer>(opts_.strings_per_thread, opts_.string_bytes_per_thread));
  ws_->batch.reserve(opts_.batch_records);
  ws_->drained.reserve(n);
  ws_->snapshot.reserve(opts_.max_threads);
  ws_->threads.reserve(opts_.max_threads);
}

// After end_run's final drain: every chunk back to the pool, every thread slot free.
void HostTracer::reset_buffers() {
  std::lock_guard lk(pool_mu_);
  spares_.clear();
  for (size_t i = 0; i < chunk_count_; ++i) {
    Chunk& c = chunks_[i];
    c.size.store(0, std::memory_order_relaxed);
    c.consumed = 0;
    c.owner = nullptr;
    spares_.push_back(&c);
  }
  spare_count_.store(chunk_count_);
  full_head_ = full_count_ = 0;
  const uint32_t n = claimed_.load();
  for (uint32_t i = 0; i < n; ++i) buffers_[i]->reset_run();
  claimed_.store(0);
  ws_->run_strings.clear();
  std::fill_n(ws_->pinned_run_ids.begin(), pins_->count.load(), kNoId);
  ws_->next_string = 0;
  ws_->error = nullptr;
  ws_->error_text.clear();
}

void HostTracer::take_spare(ThreadBuffer& tb) noexcept {
  if (spare_count_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lk(pool_mu_);
  if (spares_.empty()) return;
  Chunk* c = spares_.back();
  spares_.pop_back();
  spare_count_.store(spares_.size(), std::memory_order_relaxed);
  c->owner = &tb;
  tb.set_current(c);
}

void HostTracer::hand_off(ThreadBuffer& tb) noexcept {
  bool wake = false;
  {
    std::lock_guard lk(pool_mu_);
    Chunk* c = tb.current.load(std::memory_order_relaxed);
    full_[(full_head_ + full_count_) % chunk_count_] = c;  // never overflows: capacity = all chunks
    ++full_count_;
    wake = full_count_ == wake_chunks_;  // the writer sleeps until then (or a flush)
    Chunk* next = nullptr;
    if (!spares_.empty()) {
      next = spares_.back();
      spares_.pop_back();
      next->owner = &tb;
    }
    spare_count_.store(spares_.size(), std::memory_order_relaxed);
    tb.set_current(next);
  }
  bump(tb.handed_off);
  if (wake) pool_cv_.notify_one();
}

// ---------------------------------------------------------------------------------------
// Recording path

HostTracer::ThreadBuffer* HostTracer::claim_buffer_slow(uint64_t gen) noexcept {
  std::lock_guard lk(claim_mu_);
  if (!active_.load() || gen_.load() != gen) return nullptr;
  ThreadBuffer* tb = nullptr;
  const uint32_t n = claimed_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i)  // this thread may have claimed one before (it alternated tracers)
    if (buffers_[i]->token == &t_token) tb = buffers_[i].get();
  if (!tb && n < buffers_.size()) {
    tb = buffers_[n].get();
    tb->token = &t_token;
    tb->index = n;
    tb->os_tid = static_cast<int64_t>(::syscall(SYS_gettid));
    claimed_.store(n + 1, std::memory_order_release);
    take_spare(*tb);
  }
  t_cache = {this, gen, tb};  // tb == nullptr: no slot left; later events drop fast
  return tb;
}

__attribute__((always_inline)) inline HostTracer::ThreadBuffer* HostTracer::acquire_buffer() noexcept {
  const uint64_t gen = gen_.load(std::memory_order_acquire);
  ThreadBuffer* tb;
  if (t_cache.tracer == this && t_cache.gen == gen) {
    tb = t_cache.tb;
  } else {
    tb = claim_buffer_slow(gen);
    if (!tb && (t_cache.tracer != this || t_cache.gen != gen)) return nullptr;  // run not active
  }
  if (!tb) {
    dropped_no_thread_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  // Dekker-style handshake with end_run: publish "busy", then re-check that the run we cached
  // is still the active one. end_run clears active_ and then waits for busy == 0.
  tb->busy.store(1, std::memory_order_relaxed);
  light_fence();
  // acquire: a new run's active_ is not seen with the old gen_ (weakly ordered CPUs).
  if (!active_.load(std::memory_order_acquire) || gen_.load(std::memory_order_relaxed) != gen) {
    tb->busy.store(0, std::memory_order_release);
    return nullptr;
  }
  return tb;
}

namespace {
// Fills `out` with `e` in its recorded form, interning its strings into the thread's table.
// False when a string does not fit (the event is then dropped).
// A pinned text (HostTracer::pin) is recorded as kPinnedBit | its index without reading its bytes;
// the others are interned into the thread's table (their memo lines and bytes prefetched first,
// so that their misses overlap).
template <class E>
bool fill_record(HostTracer::ThreadBuffer& tb, const HostTracer::PinnedTexts& pins, const E& e,
                 Record& out) noexcept {
  using R = kinds::rebind_t<E, Recorded>;
  static_assert(alignof(R) <= alignof(Record));
  R& r = *::new (static_cast<void*>(out.payload)) R;  // built in place: the chunk slot is the record
  const HostTracer::PinnedTexts::Lookup pinned = pins.lookup();
  bool all_pinned = true;
  E::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    using Tag = typename decltype(tag)::type;
    if constexpr (kinds::is_text<Tag>) {
      uint32_t i;
      const bool hit = pinned.find(field(e), i);
      field(r) = hit ? kPinnedBit | i : kNoId;
      all_pinned &= hit;
    } else if constexpr (!kinds::is_column_only<Tag>) {
      field(r) = field(e);
    }
  });
  out.kind = kind_of<R>;
  if (all_pinned) return true;
  E::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    if constexpr (kinds::is_text<typename decltype(tag)::type>)
      if (field(r) == kNoId) tb.prefetch(field(e));
  });
  bool ok = true;
  E::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    if constexpr (kinds::is_text<typename decltype(tag)::type>) {
      if (!ok || field(r) != kNoId) return;
      field(r) = tb.intern(field(e));
      ok = field(r) != kNoId;
    }
  });
  return ok;
}
}  // namespace

template <class E>
void HostTracer::record(const E& event) noexcept {
  if (!active_.load(std::memory_order_relaxed)) return;
  ThreadBuffer* tb = acquire_buffer();
  if (!tb) return;
  Chunk* c = tb->current.load(std::memory_order_relaxed);
  if (!c) {
    take_spare(*tb);
    c = tb->current.load(std::memory_order_relaxed);
  }
  if (!c) {
    bump(tb->dropped_no_chunk);
  } else {
    const uint32_t n = tb->size;
    Record& r = tb->records[n];
    // The slot kPrefetchSlots events ahead, for writing: a chunk's lines last sat in the writer
    // thread's cache (it drained them), and fetching them there is the path's largest cost.
    if (n + kPrefetchSlots < tb->capacity) prefetch_for_write(&tb->records[n + kPrefetchSlots]);
    if (!fill_record(*tb, *pins_, event, r)) {
      bump(tb->dropped_strings);
    } else {
      r.thread = tb->index;
      tb->size = n + 1;
      c->size.store(n + 1, std::memory_order_release);
      bump(tb->recorded);
      if (n + 1 == tb->capacity) hand_off(*tb);
    }
  }
  tb->busy.store(0, std::memory_order_release);
}

std::string_view HostTracer::pin(std::string_view text) noexcept {
  try {
    return pins_->pin(text);
  } catch (...) {  // the dedupe map could not grow: the text is interned as any other
    return text;
  }
}

#define HS_TRACER_SINK_METHOD_(Type, Row, rows, table, doc, fields, method) \
  void HostTracer::method(const events::Type& e) { record(e); }
HS_HOST_EVENT_KINDS(HS_TRACER_SINK_METHOD_)
#undef HS_TRACER_SINK_METHOD_

// ---------------------------------------------------------------------------------------
// Writer thread

void HostTracer::writer_main() {
  std::unique_lock lk(pool_mu_);
  for (;;) {
    pool_cv_.wait(lk, [&] { return stop_ || full_count_ >= wake_chunks_ || request_seq_ != done_seq_; });
    if (stop_ && full_count_ == 0 && request_seq_ == done_seq_) return;
    const bool request = request_seq_ != done_seq_;
    const uint64_t seq = request_seq_;
    const RunEnd* end = request_end_;
    lk.unlock();
    writer_round(request, end);
    lk.lock();
    if (request) {
      done_seq_ = seq;
      done_cv_.notify_all();
    }
  }
}

// One pass: snapshot the threads' current chunks (partial only), batch every full chunk, then
// the snapshotted partial chunks, then give the full chunks back to the pool.
void HostTracer::writer_round(bool partial, const RunEnd* end) {
  WriterState& w = *ws_;
  w.snapshot.clear();
  if (partial) {
    const uint32_t n = claimed_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; ++i) w.snapshot.push_back(buffers_[i]->current.load(std::memory_order_acquire));
  }
  w.drained.clear();
  {
    std::lock_guard lk(pool_mu_);
    while (full_count_ > 0) {
      w.drained.push_back(full_[full_head_]);
      full_head_ = (full_head_ + 1) % chunk_count_;
      --full_count_;
    }
  }
  for (Chunk* c : w.drained) process_chunk(*c->owner, *c);
  for (Chunk* c : w.snapshot)
    if (c) process_chunk(*c->owner, *c);
  emit_batch(end);
  if (!w.drained.empty()) {
    std::lock_guard lk(pool_mu_);
    for (Chunk* c : w.drained) {
      c->size.store(0, std::memory_order_relaxed);
      c->consumed = 0;
      c->owner = nullptr;
      spares_.push_back(c);
    }
    spare_count_.store(spares_.size(), std::memory_order_relaxed);
  }
}

void HostTracer::process_chunk(ThreadBuffer& tb, Chunk& c) {
  WriterState& w = *ws_;
  const uint32_t to = c.size.load(std::memory_order_acquire);
  if (c.consumed >= to) return;
  if (!tb.announced) {
    w.threads.push_back({tb.index, tb.os_tid});
    tb.announced = true;
  }
  for (uint32_t i = c.consumed; i < to; ++i) {
    if (w.batch.size() >= opts_.batch_records) emit_batch(nullptr);
    Record r = c.records[i];
    for_each_string(r, [&](StrId& id) {
      const bool pinned = id & kPinnedBit;
      StrId& mapped = pinned ? w.pinned_run_ids[id & ~kPinnedBit] : tb.run_ids[id];
      if (mapped == kNoId) {
        const std::string_view text = pinned ? pins_->text(id & ~kPinnedBit) : tb.text(id);
        auto [it, inserted] = w.run_strings.try_emplace(text, w.next_string);
        if (inserted) {
          w.strings.push_back({w.next_string, text});
          ++w.next_string;
        }
        mapped = it->second;
      }
      id = mapped;
    });
    w.batch.push_back(r);
  }
  c.consumed = to;
}

void HostTracer::emit_batch(const RunEnd* end) {
  WriterState& w = *ws_;
  if (w.batch.empty() && w.strings.empty() && w.threads.empty() && !end) return;
  if (!w.error) {
    RecordBatch b;
    b.run_id = run_id_.load(std::memory_order_acquire);
    b.strings = w.strings;
    b.threads = w.threads;
    b.records = w.batch;
    b.end = end;
    try {
      writer_.write_batch(b);
      batches_written_.fetch_add(1, std::memory_order_relaxed);
      records_written_.fetch_add(w.batch.size(), std::memory_order_relaxed);
    } catch (const std::exception& ex) {
      w.error = std::current_exception();
      w.error_text = ex.what();
    } catch (...) {
      w.error = std::current_exception();
      w.error_text = "unknown exception from EventWriter::write_batch";
    }
  }
  w.batch.clear();
  w.strings.clear();
  w.threads.clear();
}

void HostTracer::request_and_wait(const RunEnd* end) {
  std::unique_lock lk(pool_mu_);
  const uint64_t seq = ++request_seq_;
  request_end_ = end;
  pool_cv_.notify_all();
  done_cv_.wait(lk, [&] { return done_seq_ >= seq; });
  request_end_ = nullptr;
}

// ---------------------------------------------------------------------------------------
// Lifecycle

int64_t HostTracer::begin_run(const RunInfo& info) {
  std::lock_guard life(lifecycle_mu_);
  if (active_.load()) throw std::logic_error("HostTracer::begin_run: a run is already active (call end_run first)");
  allocate_buffers();
  RunInfo copy = info;
  if (copy.start_ns == 0) copy.start_ns = events::now_ns();
  const int64_t id = writer_.begin_run(copy);
  dropped_no_thread_.store(0);
  batches_written_.store(0);
  records_written_.store(0);
  {
    std::lock_guard lk(claim_mu_);
    run_id_.store(id);
    gen_.store(g_generation.fetch_add(1) + 1);
    active_.store(true);  // seq_cst, after gen_: a thread that sees active sees the new gen
  }
  return id;
}

void HostTracer::wait_quiescent() {
  heavy_fence();  // pairs with acquire_buffer's light_fence
  const uint32_t n = claimed_.load();
  for (uint32_t i = 0; i < n; ++i)
    while (buffers_[i]->busy.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

TracerStats HostTracer::collect_stats() const {
  TracerStats s;
  const uint32_t n = claimed_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    const ThreadBuffer& tb = *buffers_[i];
    s.recorded += tb.recorded.load(std::memory_order_relaxed);
    s.dropped_no_chunk += tb.dropped_no_chunk.load(std::memory_order_relaxed);
    s.dropped_strings += tb.dropped_strings.load(std::memory_order_relaxed);
    s.chunks_handed_off += tb.handed_off.load(std::memory_order_relaxed);
  }
  s.dropped_no_thread = dropped_no_thread_.load(std::memory_order_relaxed);
  s.batches_written = batches_written_.load(std::memory_order_relaxed);
  s.records_written = records_written_.load(std::memory_order_relaxed);
  return s;
}

TracerStats HostTracer::stats() const {
  if (active_.load()) return collect_stats();
  return last_stats_;
}

void HostTracer::flush() {
  std::lock_guard life(lifecycle_mu_);
  if (!active_.load()) throw std::logic_error("HostTracer::flush: no active run");
  request_and_wait(nullptr);
  std::lock_guard lk(pool_mu_);  // the writer's error state is published under pool_mu_
  if (ws_->error) throw std::runtime_error(ws_->error_text);
}

TracerStats HostTracer::end_run(RunStatus status, std::string_view error) {
  std::lock_guard life(lifecycle_mu_);
  if (!active_.load()) throw std::logic_error("HostTracer::end_run: no active run");
  {
    std::lock_guard lk(claim_mu_);
    active_.store(false);  // seq_cst; recording threads re-check after raising `busy`
  }
  wait_quiescent();
  TracerStats before = collect_stats();
  RunEnd end;
  end.status = status;
  end.error = error;
  end.end_ns = events::now_ns();
  end.dropped_records = before.dropped();
  request_and_wait(&end);
  last_stats_ = collect_stats();
  bool failed = false;
  std::string failure;
  {
    std::lock_guard lk(pool_mu_);
    failed = static_cast<bool>(ws_->error);
    failure = ws_->error_text;
  }
  reset_buffers();
  run_id_.store(0);
  if (failed) throw std::runtime_error(failure);
  return last_stats_;
}

}  // namespace hs::tracer

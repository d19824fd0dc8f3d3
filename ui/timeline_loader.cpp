// load_timeline and TimelineLoader: a run's rows read kind by kind on a few threads, a preview
// of its small kinds, the layout.
#include "ui/timeline_loader.h"

#include <algorithm>
#include <limits>

namespace hs::ui {

namespace {

using storage::CaptureReader;
using storage::ReadPlan;
using storage::ReadProgress;
using storage::SharedRunRows;
using storage::StringTables;

/// One kind of the run: how it is read, and how its rows land in a SharedRunRows.
struct Kind {
  std::string_view name;  ///< the reader's method name ("hook_events", ...)
  ReadPlan plan;
  void (*read)(const CaptureReader&, int64_t run, const ReadPlan&, SharedRunRows&, StringTables&, ReadProgress*);
  void (*copy)(const SharedRunRows& from, SharedRunRows& to);
  int64_t rows() const { return std::max<int64_t>(plan.rows, 0); }
};

template <class Row, std::vector<Row> SharedRunRows::*rows>
void read_kind(const CaptureReader& rd, int64_t run, const ReadPlan& plan, SharedRunRows& out, StringTables& tables,
               ReadProgress* progress) {
  out.*rows = rd.read_shared<Row>(run, plan, tables, progress);
}

template <class Row, std::vector<Row> SharedRunRows::*rows>
void copy_kind(const SharedRunRows& from, SharedRunRows& to) {
  to.*rows = from.*rows;
}

std::vector<Kind> plan_kinds(const CaptureReader& rd, int64_t run) {
  std::vector<Kind> kinds;
#define HS_PLAN_KIND_(Type, Row, rows, ...)                                                        \
  kinds.push_back({#rows, rd.plan_shared<storage::Shared##Row>(run),                               \
                   &read_kind<storage::Shared##Row, &SharedRunRows::rows>,                         \
                   &copy_kind<storage::Shared##Row, &SharedRunRows::rows>});
  HS_HOST_EVENT_KINDS(HS_PLAN_KIND_)
  HS_ACTIVITY_KINDS(HS_PLAN_KIND_)
#undef HS_PLAN_KIND_
  return kinds;
}

/// The run's row count, −1 when a kind's is not known before reading it.
int64_t total_rows(const std::vector<Kind>& kinds) {
  int64_t total = 0;
  for (const Kind& k : kinds) {
    if (k.plan.rows < 0) return -1;
    total += k.plan.rows;
  }
  return total;
}

/// The run's (earliest start, latest start) over every kind, when the plans know them all.
std::optional<std::pair<int64_t, int64_t>> run_extent(const std::vector<Kind>& kinds) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const Kind& k : kinds) {
    if (k.plan.way != ReadPlan::Way::Scan) continue;  // a kind without times, or without rows
    if (!k.plan.min_start || !k.plan.max_start) return std::nullopt;
    lo = std::min(lo, *k.plan.min_start);
    hi = std::max(hi, *k.plan.max_start);
  }
  if (lo > hi) return std::nullopt;
  return std::make_pair(lo, hi);
}

constexpr int64_t kPreviewMinRows = 100'000;  ///< a smaller run loads whole about as fast

/// The kinds a preview shows, smallest first: those that together hold at most a tenth of the
/// run's rows. None when the run is small, its rows or extent are not known, or they are all.
std::vector<size_t> preview_kinds(const std::vector<Kind>& kinds, int64_t total) {
  std::vector<size_t> out;
  if (total < kPreviewMinRows || !run_extent(kinds)) return out;
  std::vector<size_t> order(kinds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return kinds[a].rows() < kinds[b].rows(); });
  int64_t sum = 0;
  for (size_t i : order) {
    if (kinds[i].rows() == 0) continue;
    if (sum + kinds[i].rows() > total / 10) break;
    sum += kinds[i].rows();
    out.push_back(i);
  }
  return out;
}

/// The order kinds are read in: the preview's first (smallest first), then the largest first,
/// so that the reading threads finish together.
std::vector<size_t> read_order(const std::vector<Kind>& kinds, const std::vector<size_t>& preview) {
  std::vector<size_t> rest;
  for (size_t i = 0; i < kinds.size(); ++i)
    if (kinds[i].plan.way != ReadPlan::Way::None && std::find(preview.begin(), preview.end(), i) == preview.end())
      rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return kinds[a].rows() > kinds[b].rows(); });
  std::vector<size_t> order = preview;
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

int default_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 2u));
}

/// One load's reading: kinds handed to the reading threads in order, their rows into `rows`
/// (each kind's vector written by one thread), the string tables they use gathered, the first
/// error kept (and the others stopped).
class Reading {
 public:
  Reading(int64_t run, std::vector<Kind> kinds, SharedRunRows& rows, ReadProgress& progress, const LoadControl& c,
          const RunContext& context)
      : run_(run), kinds_(std::move(kinds)), rows_(rows), progress_(progress), c_(c), context_(context) {
    preview_ = c.on_preview ? preview_kinds(kinds_, total_rows(kinds_)) : std::vector<size_t>{};
    preview_left_ = preview_.size();
    order_ = read_order(kinds_, preview_);
  }
  /// Reads with `threads` threads (this one and threads − 1 more, each on a sibling of `rd`);
  /// rethrows the first error.
  void run(const CaptureReader& rd, int threads) {
    // The helpers' connections first: a sibling is made under `rd`'s lock, which a read holds.
    std::vector<std::unique_ptr<CaptureReader>> readers;
    std::vector<std::thread> helpers;
    try {
      for (int i = 1; i < threads; ++i) readers.push_back(rd.sibling());
      for (auto& r : readers)
        helpers.emplace_back([this, own = r.get()] { work(*own); });
    } catch (...) {
      fail(std::current_exception());
    }
    work(rd);
    for (auto& t : helpers) t.join();
    if (error_) std::rethrow_exception(error_);
    rows_.string_tables = std::move(tables_);
  }

 private:
  void step(std::string_view name) {
    if (c_.hook) c_.hook(name, progress_.cancel);
    if (progress_.cancel.load(std::memory_order_relaxed)) throw storage::ReadCancelled("load cancelled");
  }
  void work(const CaptureReader& rd) {
    try {
      for (size_t i; (i = next_.fetch_add(1)) < order_.size();) {
        const Kind& k = kinds_[order_[i]];
        step(k.name);
        StringTables mine;
        k.read(rd, run_, k.plan, rows_, mine, &progress_);
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (auto& t : mine)
            if (std::find(tables_.begin(), tables_.end(), t) == tables_.end()) tables_.push_back(std::move(t));
        }
        if (i < preview_.size() && preview_left_.fetch_sub(1) == 1) publish_preview();
      }
    } catch (...) {
      fail(std::current_exception());
    }
  }
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    bool cancelled = false;
    try {
      std::rethrow_exception(e);
    } catch (const storage::ReadCancelled&) {
      cancelled = true;
    } catch (...) {
    }
    if (!error_ || (error_cancelled_ && !cancelled)) {  // the cause, not the stops it caused
      error_ = e;
      error_cancelled_ = cancelled;
    }
    progress_.cancel.store(true, std::memory_order_relaxed);
  }
  /// The preview's kinds are read: lays them out at the run's times and hands them over.
  void publish_preview() {
    step("preview");
    SharedRunRows some;
    some.run = rows_.run;
    for (size_t i : preview_) kinds_[i].copy(rows_, some);
    {
      std::lock_guard<std::mutex> lock(mu_);
      some.string_tables = tables_;
    }
    auto tl = std::make_shared<RunTimeline>(lay_out_run(std::move(some), context_, &progress_.cancel, run_extent(kinds_)));
    tl->partial = true;
    for (size_t i : order_)
      if (std::find(preview_.begin(), preview_.end(), i) == preview_.end()) tl->pending.emplace_back(kinds_[i].name);
    c_.on_preview(std::move(tl));
  }

  int64_t run_;
  std::vector<Kind> kinds_;
  SharedRunRows& rows_;
  ReadProgress& progress_;
  const LoadControl& c_;
  const RunContext& context_;
  std::vector<size_t> preview_, order_;
  std::atomic<size_t> next_{0}, preview_left_{0};
  std::mutex mu_;
  StringTables tables_;        ///< guarded by mu_
  std::exception_ptr error_;   ///< guarded by mu_
  bool error_cancelled_ = false;
};

}  // namespace

RunTimeline load_timeline(const CaptureReader& rd, int64_t run, const LoadControl& c) {
  ReadProgress local;
  ReadProgress& progress = c.progress ? *c.progress : local;
  if (c.hook) c.hook("plan", progress.cancel);
  // This thread's own connection: the owner's reader stays free for the owner's queries.
  const auto own = rd.sibling();
  SharedRunRows rows;
  rows.run = own->run(run);  // std::out_of_range naming the file and run
  const RunContext context{own->devices(run), own->gpus(), own->threads(run)};
  std::vector<Kind> kinds = plan_kinds(*own, run);
  if (c.on_total) c.on_total(total_rows(kinds));
  const int threads = c.threads > 0 ? c.threads : default_threads();
  Reading(run, std::move(kinds), rows, progress, c, context).run(*own, threads);
  if (c.on_layout) c.on_layout();
  if (c.hook) c.hook("layout", progress.cancel);
  return lay_out_run(std::move(rows), context, &progress.cancel, std::nullopt, threads);
}

// ------------------------------------------------------------------ TimelineLoader

TimelineLoader::TimelineLoader(std::shared_ptr<const storage::CaptureReader> reader, int64_t run, Options options,
                               std::shared_ptr<const RunTimeline> discard)
    : reader_(std::move(reader)), run_(run), options_(std::move(options)), discard_(std::move(discard)) {
  thread_ = std::thread([this] { run_load(); });
}

TimelineLoader::~TimelineLoader() {
  cancel();
  if (thread_.joinable()) thread_.join();
}

void TimelineLoader::run_load() {
  discard_.reset();
  LoadControl c;
  c.threads = options_.threads;
  c.progress = &progress_;
  c.hook = options_.hook;
  c.on_total = [this](int64_t total) { total_.store(total, std::memory_order_relaxed); };
  if (options_.preview) c.on_preview = [this](std::shared_ptr<const RunTimeline> tl) { publish(std::move(tl)); };
  c.on_layout = [this] { laying_out_.store(true, std::memory_order_relaxed); };
  try {
    publish(std::make_shared<const RunTimeline>(load_timeline(*reader_, run_, c)));
  } catch (const storage::ReadCancelled&) {
    // cancelled by the owner: nothing to say
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void TimelineLoader::publish(std::shared_ptr<const RunTimeline> tl) {
  std::lock_guard<std::mutex> lock(mu_);
  published_ = std::move(tl);
}

std::shared_ptr<const RunTimeline> TimelineLoader::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(published_);
}

TimelineLoader::Progress TimelineLoader::progress() const {
  Progress p;
  p.rows_read = progress_.rows.load(std::memory_order_relaxed);
  p.rows_total = total_.load(std::memory_order_relaxed);
  p.laying_out = laying_out_.load(std::memory_order_relaxed);
  p.done = done();
  return p;
}

void TimelineLoader::wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
}

std::exception_ptr TimelineLoader::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

}  // namespace hs::ui

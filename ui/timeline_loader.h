// Loading one run's RunTimeline: its rows read kind by kind on a few threads (each on its own
// connection to the capture, `CaptureReader::sibling`), strings shared rather than copied
// (storage::SharedRunRows), then laid out into lanes. `load_timeline` does it on the calling
// thread (with helper threads); a `TimelineLoader` does it on a thread of its own, so that the
// viewer draws every frame while a run of millions of events loads: it counts the rows first
// (the progress bar's total), publishes a preview as soon as the run's small kinds are read
// (its generation steps, transfers, ...: the first lanes drawn, at their final times) and the
// whole timeline at the end. Loads are cancelled by their owner (a run switched to another, the
// window closed) and stop within a few thousand rows. No ImGui here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "storage/capture_reader.h"
#include "ui/run_timeline.h"

namespace hs::ui {

/// What laying out a run reads besides its event rows.
struct RunContext {
  std::vector<storage::DeviceRow> devices;
  std::vector<storage::GpuInfo> gpus;
  std::vector<storage::ThreadRow> threads;
};

/// Lays out rows already read: every kind of the run (load_run_timeline's result), or some of
/// them (a preview; `extent_hint`: the run's (earliest start, latest start) over every kind, so
/// that its times are the whole run's). With `threads` > 1 the host threads' lanes after the
/// hooks' are laid out on a second thread, beside the devices' and the hooks' (the same
/// timeline). Throws storage::ReadCancelled between its stages once `cancel` is set.
RunTimeline lay_out_run(storage::SharedRunRows rows, const RunContext& context,
                        const std::atomic<bool>* cancel = nullptr,
                        const std::optional<std::pair<int64_t, int64_t>>& extent_hint = std::nullopt,
                        int threads = 1);

/// Called by a load's threads before each step it takes ("plan", each kind's reader name such as
/// "hook_events", "preview", "layout"), with the load's cancel flag: tests hold a load midway
/// with it (a hook that blocks must return once `cancel` is set).
using LoadHook = std::function<void(std::string_view step, const std::atomic<bool>& cancel)>;

/// How load_timeline runs and whom it tells.
struct LoadControl {
  int threads = 0;                           ///< reading threads (0: two, or one on a one-core machine)
  storage::ReadProgress* progress = nullptr;  ///< rows read, and the cancel flag
  std::function<void(int64_t)> on_total;     ///< the run's row count once planned (−1: not known)
  /// Set: a preview is laid out and handed over once the run's small kinds are read (when they
  /// are at most a tenth of its rows and the file's indexes give the run's extent).
  std::function<void(std::shared_ptr<const RunTimeline>)> on_preview;
  std::function<void()> on_layout;  ///< every row read; the layout begins
  LoadHook hook;
};

/// Reads run `run` of `rd` and lays it out (the same timeline for any `control`). Throws as
/// load_run_timeline, and storage::ReadCancelled once control.progress->cancel is set.
RunTimeline load_timeline(const storage::CaptureReader& rd, int64_t run, const LoadControl& control);

/// One run's timeline loading on a thread of its own. Destroying it cancels the load and waits
/// for its threads (a few thousand rows at most).
class TimelineLoader {
 public:
  struct Options {
    int threads = 0;       ///< as LoadControl::threads
    bool preview = true;   ///< publish a preview before the whole run
    LoadHook hook;
  };
  struct Progress {
    int64_t rows_read = 0;
    int64_t rows_total = -1;  ///< −1 until counted (or when the file cannot count it cheaply)
    bool laying_out = false;  ///< every row is read
    bool done = false;        ///< finished, failed or cancelled
  };
  /// `discard`: a timeline its owner let go (the run shown before): freed on the load's thread,
  /// not the owner's (millions of rows take a while to free).
  TimelineLoader(std::shared_ptr<const storage::CaptureReader> reader, int64_t run, Options options,
                 std::shared_ptr<const RunTimeline> discard = nullptr);
  ~TimelineLoader();
  TimelineLoader(const TimelineLoader&) = delete;
  TimelineLoader& operator=(const TimelineLoader&) = delete;

  int64_t run() const { return run_; }
  Progress progress() const;
  /// The newest timeline published and not yet taken: a preview (RunTimeline::partial) while the
  /// run loads, then the whole run; nullptr when there is nothing new.
  std::shared_ptr<const RunTimeline> take();
  bool done() const { return done_.load(std::memory_order_acquire); }
  /// Blocks until done().
  void wait() const;
  /// Once done: why the load failed (nullptr when it did not, or was cancelled).
  std::exception_ptr error() const;
  /// Asks the load to stop (returns at once; done() follows within a few thousand rows).
  void cancel() { progress_.cancel.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return progress_.cancel.load(std::memory_order_relaxed); }

 private:
  void run_load();
  void publish(std::shared_ptr<const RunTimeline> tl);
  std::shared_ptr<const storage::CaptureReader> reader_;
  int64_t run_;
  Options options_;
  storage::ReadProgress progress_;
  std::atomic<int64_t> total_{-1};
  std::atomic<bool> laying_out_{false}, done_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::shared_ptr<const RunTimeline> discard_;    ///< freed first thing on the load's thread
  std::shared_ptr<const RunTimeline> published_;  ///< guarded by mu_
  std::exception_ptr error_;                      ///< guarded by mu_
  std::thread thread_;                            ///< last: started once the rest exists
};

}  // namespace hs::ui

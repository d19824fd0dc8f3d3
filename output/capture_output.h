// Where `hookscope capture` writes, so that no capture is ever lost (nsys -o's rules):
//   - the runs go into a temporary file beside --out, `OUT.PID.partial` (a capture like any
//     other: report and view read it), renamed onto OUT when the capture finishes — an earlier
//     capture at OUT stays whole until then, and a capture killed outright leaves its partial
//     file beside it;
//   - an existing OUT is refused unless --force-overwrite; OUT may not name (or link to) one of
//     the model's files, and the offload folder may not be (or hold) the model's folder;
//   - an exclusive lock (flock on `OUT.lock`, which holds the writer's pid) makes a second
//     capture on the same OUT fail at once, naming the pid that holds it;
//   - SIGINT / SIGTERM (InterruptWatch): the capture ends there — the run in progress stays
//     `incomplete`, what is complete is finalized into OUT — and the process exits 130 / 143.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "storage/store.h"

namespace hs::output {

struct CaptureOutputOptions {
  /// Replace an existing OUT (at the rename, once the capture finished).
  bool force_overwrite = false;
  /// The model's folder: OUT may not be one of its files, nor the offload folder this folder.
  std::filesystem::path model_dir;
  /// The folder the capture's disk-offload folders go in (removed and rewritten by the scenarios).
  std::filesystem::path offload_dir;
};

/// The writer's lock on a capture file OUT, as CaptureOutput takes it (flock on `OUT.lock`,
/// which holds this pid; removed on release): `import` takes it too, so that a capture and an
/// import never write one file at once. Throws std::runtime_error naming the holder's pid when
/// it is held, or the lock file when it cannot be created.
class OutputLock {
 public:
  explicit OutputLock(const std::filesystem::path& out);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  /// `OUT.lock` (an interrupt handler that ends the process removes it itself).
  const std::filesystem::path& path() const { return path_; }
  /// Gives the lock back now (removes `OUT.lock`), as the destructor would: once the output is
  /// written, before the command's interrupt watch goes. Idempotent.
  void release();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

/// When `file` is the temporary file of a capture in progress (`OUT.PID.partial` while
/// `OUT.lock` is held): OUT. Else nothing.
std::optional<std::filesystem::path> running_capture_of(const std::filesystem::path& file);

/// The output of one capture. Thread-safe: the interrupt handler (another thread) finishes it
/// with `finish_interrupted` while the capture thread may be anywhere; once it has, the capture
/// thread's own `commit` / `abandon` never return (the handler ends the process).
class CaptureOutput {
 public:
  /// Checks `out` (see the file comment; also: not empty, not a folder, in an existing folder)
  /// and takes the lock. Creates only the lock file. Throws std::invalid_argument naming
  /// --out and the file at fault, std::runtime_error when the lock is held (naming the pid) or
  /// cannot be taken.
  CaptureOutput(std::filesystem::path out, CaptureOutputOptions options);
  /// Releases the lock (and removes the lock file). A temporary file that was neither committed
  /// nor abandoned is closed and kept.
  ~CaptureOutput();
  CaptureOutput(const CaptureOutput&) = delete;
  CaptureOutput& operator=(const CaptureOutput&) = delete;

  const std::filesystem::path& out() const { return out_; }
  /// `OUT.PID.partial`, where the runs are written until the capture finishes.
  const std::filesystem::path& partial() const { return partial_; }

  /// Creates the temporary file and opens its Store (once). Throws the Store's CaptureError.
  storage::Store& open();

  /// The capture finished: finalizes and closes the Store, then renames the temporary file onto
  /// OUT (replacing an older capture only with force_overwrite; stale `-journal` / `-wal` /
  /// `-shm` files of OUT go first, so SQLite never applies them to the new file). Throws
  /// CaptureError when the file cannot be finalized or renamed (the temporary file is kept and
  /// the message names it).
  void commit();

  /// The capture stopped with `error`: records it as a DIAGNOSTICS error, finalizes and closes
  /// the temporary file, and keeps it when it holds a run (OUT is left as it was). Returns the
  /// kept file, or an empty path when there was nothing to keep (it is removed). Never throws.
  std::filesystem::path abandon(const std::string& error) noexcept;

  /// From the interrupt handler: `signal_name` ended the capture. Records it, finalizes and
  /// closes the Store and renames the file onto OUT as commit() does (a capture that had not
  /// opened its file yet leaves OUT alone; one in which no run had ended leaves an existing OUT
  /// alone, even with force_overwrite, and keeps its run in the temporary file). Returns OUT
  /// when it now holds the capture, else an empty path; `why` says what happened and where
  /// things are. Never throws.
  std::filesystem::path finish_interrupted(const std::string& signal_name, std::string& why) noexcept;

 private:
  enum class State { Idle, Open, Done, Interrupted };
  /// Takes the state lock for the capture thread; when the interrupt handler has taken over,
  /// waits for the process to end instead of returning.
  std::unique_lock<std::mutex> claim();
  void rename_into_place();

  std::filesystem::path out_, partial_, lock_path_;
  CaptureOutputOptions opt_;
  int lock_fd_ = -1;
  std::mutex mu_;
  State state_ = State::Idle;
  std::unique_ptr<storage::Store> store_;
};

/// SIGINT and SIGTERM while a capture runs. The handler only writes the signal number to a pipe
/// (async-signal-safe); a watch thread reads it and calls `on_signal(signo)` once, which is
/// expected to end the process (`_exit`). Later signals are ignored while it runs; a signal
/// that was ignored when the watch was made (nohup) stays ignored; SIGPIPE is
/// ignored while the watch exists (a write to a dead child's pipe fails instead). At most one
/// watch exists at a time (the handler needs a process-wide pipe; a second one throws
/// std::logic_error). The destructor restores the previous handlers and stops the thread.
class InterruptWatch {
 public:
  explicit InterruptWatch(std::function<void(int)> on_signal);
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  /// Whether `signo` (SIGINT or SIGTERM) was ignored when the watch was made, and so is not
  /// watched (hookscope started in the background, nohup).
  bool ignored(int signo) const;

 private:
  bool ignored_[2] = {false, false};  // SIGINT, SIGTERM
  int pipe_[2] = {-1, -1};
  std::function<void(int)> on_signal_;
  std::thread thread_;
};

/// Ends this process's own child processes (found by their parent pid in /proc): SIGTERM, up
/// to `grace_ms` for them to exit (reaped), then SIGKILL for the rest.
void terminate_child_processes(int grace_ms);

/// "SIGINT", "SIGTERM", else "signal N".
std::string signal_name(int signo);

/// The lines a command prints after writing `capture` (holding `runs` runs): how to open it
/// with `report`, `view` and `export` (paths shell-quoted where they need it). The export's
/// suggested output is never the capture nor one of `inputs` (the files the capture was made
/// from: following the hint must not replace an import's trace).
std::string open_hint(const std::filesystem::path& capture, size_t runs, const std::vector<std::string>& inputs = {});

}  // namespace hs::output

#include "output/capture_output.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "output/paths.h"
#include "output/text.h"
#include "storage/capture_reader.h"
#include "storage/capture_settings.h"

namespace hs::output {

namespace fs = std::filesystem;

namespace {

fs::path with_suffix(const fs::path& p, const std::string& suffix) {
  fs::path q = p;
  q += suffix;
  return q;
}

void remove_sqlite_files(const fs::path& db, bool main_file) {
  std::error_code ec;
  if (main_file) fs::remove(db, ec);
  for (const char* s : {"-journal", "-wal", "-shm"}) fs::remove(with_suffix(db, s), ec);
}

void check_existing_out(const fs::path& out, const CaptureOutputOptions& opt) {
  struct stat st {};
  const bool exists = ::stat(out.c_str(), &st) == 0;
  struct stat lst {};
  const bool link_exists = ::lstat(out.c_str(), &lst) == 0;
  if (!exists && !link_exists) return;
  const std::string o = out.string();
  if (exists && S_ISDIR(st.st_mode)) throw std::invalid_argument("--out: " + o + " is a folder; name a file such as " + (out / "capture.sqlite").string());
  if (exists && !opt.model_dir.empty()) refuse_output_in_model_folder("--out", out, {opt.model_dir}, "--model");
  if (!opt.force_overwrite)
    throw std::invalid_argument("--out: " + o + " already exists; pass --force-overwrite to replace it once the new capture has finished, or name another file");
  if (exists && !S_ISREG(st.st_mode)) throw std::invalid_argument("--out: " + o + " is not a regular file");
  if (exists && st.st_size > 0) {
    try {
      storage::CaptureReader probe(out);
    } catch (const storage::CaptureError& e) {
      if (std::string(e.what()).rfind("not a hookscope capture", 0) == 0)
        throw std::invalid_argument("--out: " + o + " is not a hookscope capture; refusing to replace it (" + e.what() + ")");
    }
  }
}

// The pid written in a lock file, or "" when it cannot be read.
std::string lock_holder(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// flock on `path` (created when missing), retried when the file was replaced between the open
// and the lock (a finishing holder removes it while still holding the lock).
int take_lock(const fs::path& path, const fs::path& out) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw std::runtime_error("--out: cannot create the lock file " + path.string() + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string pid = lock_holder(fd);
      ::close(fd);
      if (err == EWOULDBLOCK)
        throw std::runtime_error("--out: another capture or import" + (pid.empty() ? std::string() : " (pid " + pid + ")") +
                                 " is writing " + out.string() + " (lock " + path.string() +
                                 "); wait for it to finish or name another file");
      throw std::runtime_error("--out: cannot lock " + path.string() + ": " + std::strerror(err));
    }
    struct stat held {}, now {};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
        std::fprintf(stderr, "[hookscope] warning: cannot write this pid into %s\n", path.c_str());
      return fd;
    }
    ::close(fd);
  }
  throw std::runtime_error("--out: cannot take the lock " + path.string() + " (it keeps being replaced)");
}

// Earlier captures into the same OUT that stopped before they finished (killed outright).
void note_stale_partials(const fs::path& out) {
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const std::string prefix = out.filename().string() + ".";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.size() > prefix.size() + 8 && n.rfind(prefix, 0) == 0 && n.compare(n.size() - 8, 8, ".partial") == 0)
      std::fprintf(stderr, "[hookscope] note: %s holds an earlier capture into %s that stopped before it finished (report and view read it)\n",
                   it->path().c_str(), out.c_str());
  }
}

}  // namespace

OutputLock::OutputLock(const fs::path& out) : path_(with_suffix(out, ".lock")), fd_(take_lock(path_, out)) {}

OutputLock::~OutputLock() { release(); }

void OutputLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding it: a waiting opener sees the replacement
  ::close(fd_);
  fd_ = -1;
}

std::optional<fs::path> running_capture_of(const fs::path& file) {
  const std::string n = file.string();
  if (n.size() < 10 || n.compare(n.size() - 8, 8, ".partial") != 0) return std::nullopt;
  const size_t dot = n.rfind('.', n.size() - 9);
  if (dot == std::string::npos) return std::nullopt;
  const std::string pid = n.substr(dot + 1, n.size() - 8 - dot - 1);
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const fs::path out = n.substr(0, dot);
  const int fd = ::open(with_suffix(out, ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held ? std::optional(out) : std::nullopt;
}

CaptureOutput::CaptureOutput(fs::path out, CaptureOutputOptions options) : out_(std::move(out)), opt_(std::move(options)) {
  if (out_.empty()) throw std::invalid_argument("--out: empty; name the capture file to write, e.g. --out out/capture.sqlite");
  const std::string o = out_.string();
  if (!out_.has_filename() || out_.filename() == "." || out_.filename() == "..")
    throw std::invalid_argument("--out: " + o + " names a folder; name a file such as " + (out_ / "capture.sqlite").string());
  const fs::path dir = out_.parent_path().empty() ? fs::path(".") : out_.parent_path();
  if (!fs::is_directory(dir)) throw std::invalid_argument("--out: folder " + dir.string() + " does not exist");
  refuse_name_too_long("--out", out_);
  check_existing_out(out_, opt_);
  if (!opt_.model_dir.empty()) {
    refuse_output_in_model_folder("--out", out_, {opt_.model_dir}, "--model");
    refuse_output_in_model_folder("--keep-offload-dir", opt_.offload_dir, {opt_.model_dir},
                                  "--model; a capture writes and replaces offload folders there", /*holds_too=*/true);
  }
  if (!opt_.offload_dir.empty() && path_inside(out_, opt_.offload_dir))
    throw std::invalid_argument("--out: " + o + " lies inside --keep-offload-dir " + opt_.offload_dir.string() +
                                " (a later capture with that folder replaces the offload folders there); write the "
                                "capture elsewhere");
  lock_path_ = with_suffix(out_, ".lock");
  lock_fd_ = take_lock(lock_path_, out_);
  note_stale_partials(out_);
  const std::string base = o + "." + std::to_string(::getpid());
  partial_ = base + ".partial";
  for (int i = 1; fs::exists(partial_) || fs::exists(with_suffix(partial_, "-wal")); ++i)
    partial_ = base + "-" + std::to_string(i) + ".partial";
}

CaptureOutput::~CaptureOutput() {
  {
    std::lock_guard lk(mu_);
    if (state_ == State::Open) {
      try {
        store_->close();
      } catch (...) {
      }
    }
    store_.reset();
  }
  if (lock_fd_ >= 0) {
    ::unlink(lock_path_.c_str());  // while still holding it: a waiting opener sees the replacement
    ::close(lock_fd_);
  }
}

std::unique_lock<std::mutex> CaptureOutput::claim() {
  std::unique_lock lk(mu_);
  if (state_ == State::Interrupted) {
    lk.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // the interrupt handler ends the process
  }
  return lk;
}

storage::Store& CaptureOutput::open() {
  auto lk = claim();
  if (state_ == State::Idle) {
    std::fprintf(stderr, "[hookscope] writing %s (renamed to %s when the capture finishes)\n", partial_.c_str(), out_.c_str());
    storage::StoreOptions so;
    so.overwrite = false;
    store_ = std::make_unique<storage::Store>(partial_, so);
    state_ = State::Open;
  }
  if (state_ != State::Open) throw std::logic_error("CaptureOutput::open after the capture ended");
  return *store_;
}

void CaptureOutput::rename_into_place() {
  const fs::path wal = with_suffix(partial_, "-wal");
  std::error_code ec;
  if (fs::exists(wal, ec) && fs::file_size(wal, ec) > 0)
    throw storage::CaptureError(partial_, "cannot move " + partial_.string() + " onto " + out_.string() +
                                              ": its write-ahead log " + wal.string() +
                                              " is still in use (another process has it open); the capture is in " +
                                              partial_.string());
  struct stat st {};
  const bool taken = !opt_.force_overwrite && ::lstat(out_.c_str(), &st) == 0;
  // Journals of the file being replaced (or of none) must not be applied to the new one.
  if (!taken) remove_sqlite_files(out_, false);
  if (taken || (opt_.force_overwrite
                    ? ::rename(partial_.c_str(), out_.c_str()) != 0
                    : ::renameat2(AT_FDCWD, partial_.c_str(), AT_FDCWD, out_.c_str(), RENAME_NOREPLACE) != 0)) {
    const int err = taken ? EEXIST : errno;
    throw storage::CaptureError(partial_, "cannot move " + partial_.string() + " onto " + out_.string() + ": " +
                                              (err == EEXIST ? std::string("a file of that name appeared meanwhile (pass --force-overwrite to replace it)")
                                                             : std::string(std::strerror(err))) +
                                              "; the capture is in " + partial_.string());
  }
  remove_sqlite_files(partial_, false);  // an empty -wal / -shm of the temporary name
  const fs::path dir = out_.parent_path().empty() ? fs::path(".") : out_.parent_path();
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
}

void CaptureOutput::commit() {
  auto lk = claim();
  if (state_ != State::Open) throw std::logic_error("CaptureOutput::commit without an open capture");
  state_ = State::Done;
  // The Store object stays (closed) until this output goes: the capture's tracer still holds it,
  // and a closed Store refuses further writes instead of being freed under them.
  store_->finalize();
  store_->close();
  rename_into_place();
}

fs::path CaptureOutput::abandon(const std::string& error) noexcept {
  auto lk = claim();
  if (state_ != State::Open) return {};
  state_ = State::Done;
  try {
    store_->add_diagnostic(std::nullopt, storage::Severity::Error, "capture", "the capture stopped: " + error);
    store_->finalize();
  } catch (...) {
  }
  try {
    store_->close();
  } catch (...) {
  }
  bool any_run = true;
  try {
    any_run = !storage::CaptureReader(partial_).runs().empty();
  } catch (...) {
  }
  if (any_run) return partial_;
  remove_sqlite_files(partial_, true);
  return {};
}

fs::path CaptureOutput::finish_interrupted(const std::string& signal_name, std::string& why) noexcept {
  std::lock_guard lk(mu_);
  const State was = state_;
  state_ = State::Interrupted;
  // The process ends after this: no destructor will remove the lock file (the lock itself goes
  // with the process).
  struct Unlock {
    const fs::path& p;
    ~Unlock() { ::unlink(p.c_str()); }
  } unlock{lock_path_};
  if (was == State::Done) {
    why = "the capture had already ended";
    std::error_code ec;
    return fs::exists(out_, ec) ? out_ : fs::path();
  }
  if (was == State::Idle) {
    why = "no run had started; " + out_.string() + " is as it was";
    return {};
  }
  try {
    store_->add_diagnostic(std::nullopt, storage::Severity::Warning, "capture",
                           "interrupted by " + signal_name + ": the run in progress stays incomplete");
    store_->finalize();
    store_->close();  // the capture thread's tracer may still write: it now gets errors, not freed memory
    size_t ended = 0, runs = 0;
    for (const auto& r : storage::CaptureReader(partial_).runs()) {
      ++runs;
      ended += r.status != tracer::RunStatus::Incomplete;
    }
    struct stat st {};
    if (ended == 0 && ::lstat(out_.c_str(), &st) == 0) {  // even with --force-overwrite: nothing to replace it with
      why = "no run had ended; " + out_.string() + " is as it was, and the run in progress (incomplete) is in " +
            partial_.string();
      return {};
    }
    rename_into_place();
    why = "interrupted by " + signal_name + "; " +
          (ended == runs ? std::string("every run had ended") : std::string("the run in progress is incomplete")) +
          "; `hookscope report " + out_.string() + "` lists the runs";
    return out_;
  } catch (const std::exception& e) {
    why = e.what();
    return {};
  }
}

// ---------------------------------------------------------------------------------------------

namespace {

// The write end of the watch's pipe, for the signal handler (a handler can reach nothing else).
std::atomic<int> g_signal_fd{-1};

extern "C" void on_capture_signal(int signo) {
  const int saved = errno;
  const int fd = g_signal_fd.load();
  const unsigned char b = static_cast<unsigned char>(signo);
  if (fd >= 0) (void)!::write(fd, &b, 1);
  errno = saved;
}

struct sigaction g_previous[2], g_previous_pipe;
constexpr int kSignals[2] = {SIGINT, SIGTERM};

}  // namespace

InterruptWatch::InterruptWatch(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  int expected = -1;
  if (!g_signal_fd.compare_exchange_strong(expected, pipe_[1])) {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
    throw std::logic_error("InterruptWatch: one is already installed");
  }
  thread_ = std::thread([this] {
    for (bool handled = false;;) {
      unsigned char b = 0;
      const ssize_t n = ::read(pipe_[0], &b, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || b == 0) return;  // the destructor's stop byte
      if (!handled) {
        handled = true;
        on_signal_(b);
      }
    }
  });
  struct sigaction sa {};
  sa.sa_handler = on_capture_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 2; ++i) {
    ::sigaction(kSignals[i], nullptr, &g_previous[i]);
    // A signal ignored by whoever started us (nohup, a background job of a script) stays so.
    ignored_[i] = g_previous[i].sa_handler == SIG_IGN;
    if (!ignored_[i]) ::sigaction(kSignals[i], &sa, nullptr);
  }
  // A child that dies of the same Ctrl+C must not end this process through a write to its pipe
  // (SIGPIPE's default) before the capture is finalized: the write fails with EPIPE instead.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_previous_pipe);
}

bool InterruptWatch::ignored(int signo) const {
  for (int i = 0; i < 2; ++i)
    if (kSignals[i] == signo) return ignored_[i];
  return false;
}

InterruptWatch::~InterruptWatch() {
  for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  ::sigaction(SIGPIPE, &g_previous_pipe, nullptr);
  g_signal_fd.store(-1);
  const unsigned char stop = 0;
  (void)!::write(pipe_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void terminate_child_processes(int grace_ms) {
  const pid_t self = ::getpid();
  std::vector<pid_t> children;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0) continue;
      std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
      std::string line;
      std::getline(stat, line);
      const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
      if (close == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == self) children.push_back(pid);
    }
    ::closedir(d);
  }
  for (pid_t c : children) ::kill(c, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  std::vector<pid_t> left = children;
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::vector<pid_t> still;
    for (pid_t c : left) {
      const pid_t r = ::waitpid(c, nullptr, WNOHANG);
      if (r == 0) still.push_back(c);
    }
    left.swap(still);
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t c : left) {
    ::kill(c, SIGKILL);
    ::waitpid(c, nullptr, 0);
  }
}

std::string signal_name(int signo) {
  if (signo == SIGINT) return "SIGINT";
  if (signo == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signo);
}

std::string open_hint(const std::filesystem::path& capture, size_t runs, const std::vector<std::string>& inputs) {
  const std::string f = storage::shell_word(capture.string());
  std::filesystem::path chrome = capture;
  chrome.replace_extension(runs == 1 ? ".json" : "");
  if (runs != 1) chrome += "-chrome";
  const auto taken = [&](const std::filesystem::path& p) {
    return p == capture || std::any_of(inputs.begin(), inputs.end(), [&](const std::string& in) {
             return !in.empty() && (same_file(p, in) || normal_path(p) == normal_path(in));
           });
  };
  if (taken(chrome)) chrome = capture.parent_path() / (capture.stem().string() + ".trace.json");
  if (taken(chrome)) chrome = capture.parent_path() / (capture.stem().string() + ".export.json");
  const std::string export_line =
      runs == 1 ? "hookscope export " + f + " --format chrome -o " + storage::shell_word(chrome.string()) +
                      "   (Perfetto, chrome://tracing, HTA)"
                : "hookscope export " + f + " --run all --format chrome -o " + storage::shell_word(chrome.string()) +
                      "   (a trace per run for Perfetto, chrome://tracing, HTA; --run ID for one)";
  // A name's ESC or U+202E shown, inert: the hint goes to a terminal.
  return terminal_text("[hookscope] open it with:\n  hookscope report " + f + "     (Markdown / JSON comparison)\n  hookscope view " +
                       f + "       (timeline viewer)\n  " + export_line + "\n");
}

}  // namespace hs::output

// A child process spoken to over pipes: requests on its stdin, replies on a dedicated pipe that
// the child finds as file descriptor `kReplyFd` (its stdout and stderr stay free for libraries
// that print). Used by the torch engine to drive `python -m hookscope_torch serve`.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hs::engines {

class ChildProcess {
 public:
  /// The child's end of the reply pipe.
  static constexpr int kReplyFd = 3;

  /// Starts `argv` (argv[0] a path) with `env` added to this process's environment; its stdout
  /// and stderr go to `log` (appended). It leads a process group of its own, so a terminal's
  /// Ctrl+C reaches only this process (which ends it through its stdin or a signal). Throws std::runtime_error naming argv[0] when it cannot
  /// start.
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::filesystem::path& log);
  /// Closes its stdin (the child's signal to finish), waits up to 10 s, then kills it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// Writes `line` and a newline to the child's stdin. Throws std::runtime_error when the
  /// child has gone.
  void send_line(const std::string& line);
  /// The longest reply line read_line takes (the bound of one untrusted JSON value, 64 MiB).
  static constexpr size_t kMaxLineBytes = size_t{64} << 20;
  /// The next line from the reply pipe (without the newline); nullopt when the child closed it
  /// (exited). Blocks. Throws std::length_error when more than kMaxLineBytes arrive without a
  /// newline (a child printing without end must not take the memory).
  std::optional<std::string> read_line();
  /// How long read_line waits for the reply pipe's end after the child exited: a process it
  /// started may hold the pipe open (then killed with the child's process group, and nullopt).
  static constexpr std::chrono::seconds kHeldPipeGrace{5};
  /// Whether read_line ended because the child had exited and something else held its pipe.
  bool reply_held_after_exit() const { return held_after_exit_; }
  /// Waits for the child to exit; returns its exit status (128 + signal when killed).
  int wait();
  /// Closes the child's stdin (its signal to finish) and waits up to `grace` for it to exit:
  /// true when it did (wait() and exit_description() then say how); false when it was still
  /// running, and was then killed (SIGKILL to its process group: the programs it started go
  /// too) and reaped. For a child that closed its reply pipe but may not be exiting.
  bool end_within(std::chrono::milliseconds grace);
  /// "exit status N" / "killed by signal N" once exited, "" while running.
  std::string exit_description();
  pid_t pid() const { return pid_; }
  /// The file its stdout and stderr go to.
  const std::filesystem::path& log_path() const { return log_; }
  /// The last `n` lines of the log file (for an error message), bounded whatever the child
  /// wrote: read from the log's last kLogTailBytes, each line cut to its last kLogLineBytes
  /// (its start is then "[...] "; a cut falls between UTF-8 characters). "" when there is no log.
  std::string log_tail(size_t n = 20) const;
  static constexpr size_t kLogTailBytes = 64 << 10;
  static constexpr size_t kLogLineBytes = 1000;

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int reply_fd_ = -1;
  std::string buffer_;
  std::filesystem::path log_;
  std::optional<int> status_;
  bool held_after_exit_ = false;
  /// Waits until the reply pipe has bytes or its end (true), or the child has exited and the
  /// pipe stayed open kHeldPipeGrace longer (false; what held it killed with the group).
  bool reply_ready();
};

}  // namespace hs::engines

// A user's program as `hookscope profile` runs it: argv with variables added to this process's
// environment, stdin inherited, stdout and stderr passed through to this process's own as they
// arrive while their last bytes are kept (for the run's record), in a process group of its own
// so that a signal hookscope forwards reaches the program and its children once.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace hs::engines {

class ProgramRun {
 public:
  /// The bytes of stdout and of stderr each tail keeps.
  static constexpr size_t kTailBytes = 16384;

  /// Starts `argv` (argv[0] looked up on PATH, as a shell does). Throws std::runtime_error naming
  /// argv[0] when it cannot be started (not found, not executable).
  ProgramRun(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  /// A program still running is killed (SIGKILL to its group) and reaped.
  ~ProgramRun();
  ProgramRun(const ProgramRun&) = delete;
  ProgramRun& operator=(const ProgramRun&) = delete;

  /// Passes the program's output through until it exits; returns its exit status (128 + N when
  /// a signal N ended it). Output its children still write after it exited is not waited for.
  int wait();
  /// Sends `signo` to the program's process group (callable from another thread).
  void signal(int signo) const;
  /// The last kTailBytes of what it wrote to stdout / stderr.
  const std::string& stdout_tail() const { return tail_[0]; }
  const std::string& stderr_tail() const { return tail_[1]; }
  pid_t pid() const { return pid_; }
  /// The signal that ended the program (after wait()), 0 where it exited: an `exit(130)` and a
  /// death by SIGINT share the status 130, not this.
  int term_signal() const { return term_signal_; }

 private:
  bool pump(int timeout_ms);  // passes on what is there; false when both pipes are closed

  pid_t pid_ = -1;
  int out_[2] = {-1, -1};  // read ends: stdout, stderr
  std::string tail_[2];
  bool exited_ = false;
  int term_signal_ = 0;
};

}  // namespace hs::engines

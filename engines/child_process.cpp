#include "engines/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "engines/spawn_env.h"

namespace hs::engines {

namespace {

using detail::c_strings;
using detail::merged_environment;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv_in, const std::map<std::string, std::string>& env,
                           const std::filesystem::path& log)
    : log_(log) {
  if (argv_in.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  int in[2], reply[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(reply, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot create pipes: ") + std::strerror(errno));
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error(log.string() + ": cannot open for writing: " + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  posix_spawn_file_actions_adddup2(&fa, reply[1], kReplyFd);
  std::vector<std::string> args = argv_in, envs = merged_environment(env);
  std::vector<char*> argv = c_strings(args), envp = c_strings(envs);
  // Its own process group: a terminal's Ctrl+C (sent to the foreground group) reaches this
  // process alone, whose interrupt handler ends the capture and then the child; a child dying of
  // the same SIGINT first would turn the run in progress into a failed one. It still ends with
  // this process: its stdin closes.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = ::posix_spawn(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(reply[1]);
  ::close(log_fd);
  if (rc != 0) {
    ::close(in[1]);
    ::close(reply[0]);
    throw std::runtime_error(argv_in[0] + ": cannot start: " + std::strerror(rc));
  }
  stdin_fd_ = in[1];
  reply_fd_ = reply[0];
}

ChildProcess::~ChildProcess() {
  close_fd(stdin_fd_);
  close_fd(reply_fd_);
  if (status_ || pid_ <= 0) return;
  for (int i = 0; i < 100; ++i) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
}

void ChildProcess::send_line(const std::string& line) {
  const std::string s = line + "\n";
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(stdin_fd_, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the driver process has gone (" + exit_description() + ")");
    done += static_cast<size_t>(n);
  }
}

std::optional<std::string> ChildProcess::read_line() {
  size_t scanned = 0;  // bytes of buffer_ known to hold no newline: each byte is looked at once
  for (;;) {
    if (const size_t nl = buffer_.find('\n', scanned); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    scanned = buffer_.size();
    if (buffer_.size() > kMaxLineBytes)
      throw std::length_error("a reply line longer than " + std::to_string(kMaxLineBytes >> 20) +
                              " MiB without a newline");
    if (!reply_ready()) return std::nullopt;  // the child exited, its pipe held by what it started
    char chunk[65536];
    const ssize_t n = ::read(reply_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

bool ChildProcess::reply_ready() {
  std::optional<std::chrono::steady_clock::time_point> exited_at;
  for (;;) {
    pollfd fd{reply_fd_, POLLIN, 0};
    const int r = ::poll(&fd, 1, 500);
    if (r > 0) return true;  // bytes, or the end of the pipe: read() says which
    if (r < 0 && errno != EINTR) return true;  // read() reports it
    if (!exited_at && !exit_description().empty()) exited_at = std::chrono::steady_clock::now();
    if (exited_at && std::chrono::steady_clock::now() - *exited_at >= kHeldPipeGrace) {
      // The child has exited; what still holds its pipe is a process it started (in its group,
      // unless it left it): ended with the group.
      held_after_exit_ = true;
      ::kill(-pid_, SIGKILL);
      return false;
    }
  }
}

int ChildProcess::wait() {
  if (!status_) {
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
  return *status_;
}

bool ChildProcess::end_within(std::chrono::milliseconds grace) {
  close_fd(stdin_fd_);
  if (status_ || pid_ <= 0) return true;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
      return true;
    }
    if (r < 0 && errno != EINTR) {  // reaped elsewhere (an interrupt handler ending the children)
      status_ = 128 + SIGKILL;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Not yet reaped, so its process group (the one it leads, see the constructor) is still ours.
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);  // should it have left that group
  wait();
  return false;
}

std::string ChildProcess::exit_description() {
  if (!status_) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r < 0 && errno == ECHILD) {  // reaped elsewhere (an interrupt handler ending the children)
      status_ = 128 + SIGKILL;
      return "killed by signal " + std::to_string(SIGKILL);
    }
    if (r != pid_) return "";
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
  return *status_ > 128 ? "killed by signal " + std::to_string(*status_ - 128) : "exit status " + std::to_string(*status_);
}

std::string ChildProcess::log_tail(size_t n) const {
  std::ifstream in(log_, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - static_cast<std::streamoff>(kLogTailBytes));
  std::string text(static_cast<size_t>(std::max<std::streamoff>(0, size - from)), '\0');
  in.seekg(from);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  std::deque<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    lines.push_back(std::string_view(text).substr(at, end - at));
    if (lines.size() > n) lines.pop_front();
    at = end + 1;
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    bool cut = from > 0 && l.data() == text.data();  // the read began inside this line
    if (l.size() > kLogLineBytes) {
      size_t skip = l.size() - kLogLineBytes;
      while (skip < l.size() && (static_cast<unsigned char>(l[skip]) & 0xC0) == 0x80) ++skip;  // a character's start
      l.remove_prefix(skip);
      cut = true;
    }
    out += (cut ? "[...] " : "") + std::string(l) + "\n";
  }
  return out;
}

}  // namespace hs::engines

#include "engines/program_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "engines/spawn_env.h"

namespace hs::engines {

namespace {

using detail::c_strings;
using detail::merged_environment;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our own stdout closed: the program's output is still kept in the tail
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

ProgramRun::ProgramRun(const std::vector<std::string>& argv_in, const std::map<std::string, std::string>& env) {
  if (argv_in.empty()) throw std::invalid_argument("ProgramRun: no command");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot create pipes: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);  // hookscope's handlers and ignored signals are not the program's
  std::vector<std::string> args = argv_in, envs = merged_environment(env);
  auto argv = c_strings(args), envp = c_strings(envs);
  const int rc = ::posix_spawnp(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  out_[0] = out[0];
  out_[1] = err[0];
  if (rc != 0) {
    ::close(out_[0]);
    ::close(out_[1]);
    throw std::runtime_error("cannot run " + argv_in[0] + ": " + std::strerror(rc));
  }
}

ProgramRun::~ProgramRun() {
  if (!exited_ && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  for (int fd : out_)
    if (fd >= 0) ::close(fd);
}

void ProgramRun::signal(int signo) const {
  if (pid_ > 0) ::kill(-pid_, signo);
}

bool ProgramRun::pump(int timeout_ms) {
  pollfd fds[2] = {{out_[0], POLLIN, 0}, {out_[1], POLLIN, 0}};
  if (out_[0] < 0 && out_[1] < 0) return false;
  const int n = ::poll(fds, 2, timeout_ms);
  if (n <= 0) return true;  // timeout, or EINTR
  char buf[65536];
  for (int k = 0; k < 2; ++k) {
    if (out_[k] < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t r = ::read(out_[k], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(out_[k]);
      out_[k] = -1;
      continue;
    }
    write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, static_cast<size_t>(r));
    std::string& t = tail_[k];
    t.append(buf, static_cast<size_t>(r));
    if (t.size() > 2 * kTailBytes) t.erase(0, t.size() - kTailBytes);
  }
  return out_[0] >= 0 || out_[1] >= 0;
}

int ProgramRun::wait() {
  int st = 0;
  for (;;) {
    const bool open = pump(100);
    const pid_t w = ::waitpid(pid_, &st, open ? WNOHANG : 0);
    if (w == pid_) break;
    if (w < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  exited_ = true;
  while (pump(0)) {  // what it wrote just before exiting; a child of it keeping a pipe open is not waited for
    pollfd fds[2] = {{out_[0], POLLIN, 0}, {out_[1], POLLIN, 0}};
    if (::poll(fds, 2, 0) <= 0) break;
  }
  for (std::string& t : tail_)
    if (t.size() > kTailBytes) t.erase(0, t.size() - kTailBytes);
  term_signal_ = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

}  // namespace hs::engines

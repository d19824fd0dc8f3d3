#include "tests/test_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <fstream>
#include <functional>
#include <cctype>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace fs = std::filesystem;

namespace hs::test {

namespace {
// A path built in, unless the environment names another (tools/gpu_check.sh runs the test
// binaries on a machine where this checkout and build folder live elsewhere).
fs::path overridable(const char* env, const char* built_in) {
  const char* p = std::getenv(env);
  return p && *p ? fs::path(p) : fs::path(built_in);
}
}  // namespace

fs::path source_dir() { return overridable("HOOKSCOPE_SOURCE_DIR", HOOKSCOPE_SOURCE_DIR); }

std::string python() {
  if (const char* p = std::getenv("HOOKSCOPE_PYTHON"); p && *p) return p;
  return HOOKSCOPE_DEFAULT_PYTHON;
}


fs::path scratch_dir(const std::string& name) {
  // ctest runs every test in a process of its own, several at once: a folder of the running
  // test's own, so that two tests building the same capture never remove each other's.
  fs::path p = overridable("HOOKSCOPE_BINARY_DIR", HOOKSCOPE_BINARY_DIR) / "test-scratch";
  if (const auto* t = ::testing::UnitTest::GetInstance()->current_test_info()) {
    std::string id = std::string(t->test_suite_name()) + "." + t->name();
    std::replace(id.begin(), id.end(), '/', '_');
    p /= id;
  }
  p /= name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

fs::path fixture_dir() {
  fs::path p = overridable("HOOKSCOPE_BINARY_DIR", HOOKSCOPE_BINARY_DIR) / "fixtures";
  fs::create_directories(p);
  return p;
}

fs::path sample_dir() {
  if (const char* p = std::getenv("HOOKSCOPE_SAMPLE"); p && *p) return p;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".cache/hookscope/SmolLM2-135M-Instruct";
}

fs::path edited_copy(const fs::path& from, const fs::path& to, const std::string& sql) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  sqlite3* h = nullptr;
  if (sqlite3_open(to.c_str(), &h) != SQLITE_OK) {
    sqlite3_close(h);
    throw std::runtime_error("cannot open " + to.string());
  }
  char* err = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  const std::string what = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  if (rc != SQLITE_OK) throw std::runtime_error(sql + ": " + what);
  return to;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_file(p)); }

std::string process_still_running(const fs::path& pid_file) {
  const std::string pid = read_file(pid_file);
  const fs::path stat = "/proc/" + pid.substr(0, pid.find('\n')) + "/stat";
  std::string state;
  for (int i = 0; i < 100; ++i) {
    std::ifstream in(stat);
    std::string line;
    if (!std::getline(in, line)) return "";
    state = line.substr(line.rfind(')') + 2, 1);
    if (state == "Z") return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return state;
}

std::string broken_markdown_line(const std::string& md, const std::string& needle) {
  std::istringstream in(md);
  size_t header_pipes = 0;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (const size_t text = line.find_first_not_of("# "); line.rfind("#", 0) == 0 && !needle.empty() &&
                                                           text != std::string::npos && line.compare(text, needle.size(), needle) == 0)
      return line;
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    size_t pipes = 0;  // as GFM scans a row: `\` and a punctuation character are one escaped character
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && std::ispunct(static_cast<unsigned char>(line[i + 1]))) ++i;
      else pipes += line[i] == '|';
    }
    if (!in_table) header_pipes = pipes, in_table = true;
    else if (pipes != header_pipes) return line;
  }
  return "";
}

ProcResult run(const std::vector<std::string>& argv) {
  char out_tpl[] = "/tmp/hs-test-out-XXXXXX";
  char err_tpl[] = "/tmp/hs-test-err-XXXXXX";
  int out_fd = mkstemp(out_tpl);
  int err_fd = mkstemp(err_tpl);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    const std::string why = "cannot run " + argv.front() + ": " + std::strerror(errno) + "\n";
    (void)!::write(2, why.data(), why.size());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(out_fd);
  close(err_fd);
  ProcResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out_tpl);
  r.err = read_file(err_tpl);
  fs::remove(out_tpl);
  fs::remove(err_tpl);
  return r;
}

pid_t start(const std::vector<std::string>& argv, const fs::path& log, bool own_process_group) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (own_process_group) setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (own_process_group) setpgid(pid, pid);  // also here: no race with a kill(-pid) right after
  return pid;
}

bool wait_while_running(pid_t pid, const std::function<bool()>& ready, int timeout_s) {
  const auto running = [pid] {  // without reaping it: the caller still waits for its status
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  };
  for (int i = 0; i < timeout_s * 5 && running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (ready()) return true;
  }
  return false;
}

std::string run_oracle(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv{python(), (source_dir() / "tests/oracles" / script).string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcResult r = run(argv);
  if (r.exit_code != 0)
    throw std::runtime_error("oracle " + script + " failed under the interpreter " + python() + " (exit " +
                             std::to_string(r.exit_code) + "; set HOOKSCOPE_PYTHON to the project's .venv/bin/python):\n" +
                             r.err);
  return r.out;
}

const std::string& oracle_environment() {
  // Once per test process: a Python start without importing the packages (importlib.metadata
  // reads their dist-info), ~0.1 s.
  static const std::string key = [] {
    const std::string probe =
        "import sys, importlib.metadata as m\n"
        "print('interpreter', sys.executable, sys.version.split()[0])\n"
        "for p in ('torch', 'transformers', 'accelerate', 'tokenizers', 'safetensors'):\n"
        "    print(p, m.version(p))\n";
    const ProcResult r = run({python(), "-c", probe});
    if (r.exit_code != 0 || r.out.empty())
      throw std::runtime_error("the oracles' interpreter " + python() + " cannot run (exit " +
                               std::to_string(r.exit_code) + "; set HOOKSCOPE_PYTHON to the project's "
                               ".venv/bin/python):\n" + r.err);
    return "interpreter " + python() + "\n" + r.out;
  }();
  return key;
}

void with_fixture_lock(const std::function<void()>& fn) {
  const fs::path lock = fixture_dir() / ".lock";
  int fd = ::open(lock.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd < 0) throw std::runtime_error("cannot open fixture lock " + lock.string());
  flock(fd, LOCK_EX);
  try {
    fn();
  } catch (...) {
    flock(fd, LOCK_UN);
    ::close(fd);
    throw;
  }
  flock(fd, LOCK_UN);
  ::close(fd);
}

fs::path tiny_checkpoint(const std::string& name) {
  fs::path dir = fixture_dir();
  fs::path target = dir / name;
  // The stamp names the interpreter and the library versions that wrote the fixture: another
  // Python, or an upgraded transformers, makes it anew.
  const std::string stamp_want = read_file(source_dir() / "tests/oracles/make_fixtures.py") + oracle_environment();
  auto fresh = [&] {
    return fs::exists(target / ".complete") && fs::exists(target / ".stamp") && read_file(target / ".stamp") == stamp_want;
  };
  if (fresh()) return target;
  with_fixture_lock([&] {
    if (fresh()) return;
    run_oracle("make_fixtures.py", {"--out", dir.string(), "--only", name});
    if (!fs::exists(target / ".complete"))
      throw std::runtime_error("make_fixtures.py did not produce " + target.string());
    std::ofstream(target / ".stamp", std::ios::binary) << stamp_want;
  });
  return target;
}

fs::path cached_oracle(const std::string& name, const std::string& script, const std::vector<std::string>& extra) {
  fs::path dir = fixture_dir() / name;
  // The stamp holds the script's text, its arguments, the interpreter and the library versions:
  // editing the oracle, or running another Python or another transformers, regenerates it.
  std::string stamp_want = read_file(source_dir() / "tests/oracles" / script) + oracle_environment();
  for (const auto& a : extra) stamp_want += "arg " + a + "\n";
  auto fresh = [&] {
    return fs::exists(dir / ".stamp") && fs::exists(dir / "result.json") && read_file(dir / ".stamp") == stamp_want;
  };
  if (fresh()) return dir;
  with_fixture_lock([&] {
    if (fresh()) return;
    std::vector<std::string> args{"--out", dir.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string out = run_oracle(script, args);
    std::ofstream(dir / "result.json", std::ios::binary) << out;
    std::ofstream(dir / ".stamp", std::ios::binary) << stamp_want;
  });
  return dir;
}

std::string cli() { return overridable("HOOKSCOPE_CLI", HOOKSCOPE_CLI).string(); }

ProcResult hookscope(std::vector<std::string> args) {
  args.insert(args.begin(), cli());
  return run(args);
}

std::vector<int64_t> transformers_greedy(const fs::path& model, const std::vector<int64_t>& prompt, int64_t n) {
  std::string ids;
  for (int64_t t : prompt) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(t);
  }
  std::string name = "hf-greedy-" + model.filename().string() + "-" + std::to_string(n) + "-" + ids;
  std::replace(name.begin(), name.end(), ',', '_');
  const fs::path dir = cached_oracle(name, "hf_generate.py",
                                     {"--model", model.string(), "--prompt-ids", ids, "--max-new-tokens", std::to_string(n)});
  return read_json(dir / "result.json")["new_ids"].get<std::vector<int64_t>>();
}

}  // namespace hs::test

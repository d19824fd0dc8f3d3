#include "cli/profile_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "engines/program_run.h"
#include "importers/run_import.h"
#include "output/capture_output.h"
#include "output/paths.h"
#include "output/text.h"
#include "storage/bounded_json.h"
#include "storage/capture_reader.h"
#include "storage/capture_settings.h"
#include "storage/store.h"

namespace hs::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ProfileArgs {
  std::vector<std::string> command;
  std::string out = "profile.sqlite";
  bool force_overwrite = false;
  bool append = false;
  std::string policies = "whole-hook";
  std::vector<std::string> accelerate;  // NAME=PATH
  std::string capture_range = "all";
  double delay_s = 0, duration_s = 0;
  std::string label;
};

// One policy to run the program under: its name and, for a source tree, the tree.
struct Policy {
  std::string name;
  std::string tree;
};

std::vector<Policy> policies_of(const ProfileArgs& a) {
  std::map<std::string, std::string> trees;
  for (const auto& t : a.accelerate) {
    const AccelerateTree tree = parse_accelerate_tree(t);
    if (!trees.emplace(tree.name, tree.path).second)
      throw std::invalid_argument("--accelerate: the name '" + tree.name + "' is taken");
    if (std::error_code ec; !fs::is_directory(tree.path, ec))
      throw std::invalid_argument("--accelerate " + tree.name + ": " + output::terminal_text(tree.path, false) +
                                  " is not a folder");
  }
  std::vector<Policy> out;
  std::stringstream ss(a.policies);
  std::set<std::string> seen;
  for (std::string p; std::getline(ss, p, ',');) {
    if (!seen.insert(p).second) throw std::invalid_argument("--policies: '" + p + "' is given twice");
    if (p == "whole-hook" || p == "offload-only") {
      out.push_back({p, ""});
    } else if (auto it = trees.find(p); it != trees.end()) {
      // A git clone holds accelerate under src/; a folder may hold accelerate/ itself.
      const fs::path tree = fs::absolute(it->second);
      out.push_back({p, fs::is_directory(tree / "src" / "accelerate") ? (tree / "src").string() : tree.string()});
    } else {
      throw std::invalid_argument("--policies: '" + p + "' is neither whole-hook, offload-only nor a tree of --accelerate NAME=PATH");
    }
  }
  if (out.empty()) throw std::invalid_argument("--policies: no policy given");
  return out;
}

void check_args(const ProfileArgs& a, const fs::path& out) {
  if (a.command.empty()) throw std::invalid_argument("profile: give the command to run (hookscope profile -- python script.py ...)");
  if (out.empty()) throw std::invalid_argument("--out: empty path");
  if (a.out.front() == '-')
    throw std::invalid_argument("--out: '" + a.out + "' looks like a flag, not a file name (write ./" + a.out + " for a file of that name)");
  if (a.append && a.force_overwrite) throw std::invalid_argument("--append and --force-overwrite: choose one");
  if (a.capture_range == "markers" && (a.delay_s > 0 || a.duration_s > 0))
    throw std::invalid_argument("--delay / --duration time the capture range; --capture-range markers takes it from "
                                "hookscope_torch.start() / stop(): choose one");
  output::refuse_invalid_utf8("--label", a.label);
  output::refuse_control_characters("--label", a.label);
  // The program may load any checkpoint: never a capture inside a folder that holds one.
  output::refuse_output_in_model_folder("--out", out, output::checkpoint_folders_above(out), "it holds a config.json");
  if (fs::is_directory(out)) throw std::invalid_argument("--out: " + out.string() + " is a folder; name the capture file");
  if (fs::exists(out) && !fs::is_regular_file(out))
    throw std::invalid_argument("--out: " + out.string() + " is not a regular file; refusing to write over it");
  if (fs::exists(out) && !a.append && !a.force_overwrite)
    throw std::invalid_argument("--out: " + out.string() + " exists; pass --append to add the runs to it, or --force-overwrite");
  if (out.has_parent_path() && !fs::is_directory(out.parent_path()))
    throw std::invalid_argument("--out: folder " + out.parent_path().string() + " does not exist");
  output::refuse_name_too_long("--out", out);
  for (const auto& arg : a.command)
    if (fs::path(arg) == out || output::same_file(out, arg))
      throw std::invalid_argument("--out: " + out.string() + " is an argument of the command; name another file");
  if (const auto capture = output::running_capture_of(out))
    throw std::invalid_argument("--out: " + out.string() + " is the temporary file of a capture into " + capture->string() +
                                " that is still running");
}

bool ends_with_py(const std::string& s) { return s.size() > 3 && s.compare(s.size() - 3, 3, ".py") == 0; }

// What the runs are filed under (RUNS.scenario): for a Python interpreter, what it runs as
// Python reads its command line — the script's file name, `-m`'s module, or `-c` —, the
// interpreter's options (and the values of -W, -X, --check-hash-based-pycs) skipped; for another
// program, its first argument ending in .py, else the program's name.
std::string script_name(const std::vector<std::string>& command) {
  const std::string program = fs::path(command.front()).filename().string();
  if (ends_with_py(program)) return program;
  if (program.rfind("python", 0) == 0) {
    for (size_t i = 1; i < command.size(); ++i) {
      const std::string& arg = command[i];
      if (arg == "-c") return "-c";
      if (arg == "-m") return i + 1 < command.size() ? command[i + 1] : program;
      if (arg.rfind("-m", 0) == 0 && arg.size() > 2) return arg.substr(2);  // python -mpkg
      if (arg == "-W" || arg == "-X" || arg == "--check-hash-based-pycs") {
        ++i;
        continue;
      }
      if (arg == "-" || arg.empty() || arg.front() != '-') return arg == "-" ? "<stdin>" : fs::path(arg).filename().string();
    }
    return program;
  }
  for (const auto& arg : command)
    if (ends_with_py(arg)) return fs::path(arg).filename().string();
  return program;
}

// The variables that inject the recording (python/hookscope_torch/profile_inject.py).
std::map<std::string, std::string> environment(const ProfileArgs& a, const Policy& p, const fs::path& dir) {
  const char* pkg = std::getenv("HOOKSCOPE_DRIVER_PATH");
  const fs::path package = fs::absolute(pkg && *pkg ? fs::path(pkg) : fs::path(HOOKSCOPE_DRIVER_DIR));
  std::string path = (package / "hookscope_torch" / "_inject").string() + ":" + package.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  const std::string range = a.capture_range == "markers" ? "markers" : (a.delay_s > 0 || a.duration_s > 0) ? "timer" : "all";
  return {{"PYTHONPATH", path},
          {"HOOKSCOPE_PROFILE_DIR", dir.string()},
          {"HOOKSCOPE_PROFILE_POLICY", p.tree.empty() ? p.name : "accelerate:" + p.name},
          {"HOOKSCOPE_ACCELERATE_PATH", p.tree},
          {"HOOKSCOPE_PROFILE_RANGE", range},
          {"HOOKSCOPE_PROFILE_DELAY_S", std::to_string(a.delay_s)},
          {"HOOKSCOPE_PROFILE_DURATION_S", std::to_string(a.duration_s)},
          {"TORCH_TRACE", (dir / "torch_trace").string()}};
}

std::string read_text(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What a run's files gave: its record (RUNS.results), and an error when recording failed.
struct Recorded {
  json result = json::object();
  std::string error;
  std::vector<std::string> diagnostics;   // the recording's notes, stored by the caller
  std::vector<std::string> import_notes;  // the import's, already stored (source "import"): printed only
};

// The session's profile.json and traces, and the compile log, into run `run`.
Recorded import_recording(storage::Store& store, int64_t run, const fs::path& dir) {
  Recorded r;
  if (fs::exists(dir / "profile-error.txt")) {
    r.error = "the recording could not be set up in the program: " + read_text(dir / "profile-error.txt").substr(0, 4000);
    return r;
  }
  if (!fs::exists(dir / "profile.json")) {
    r.error = "the program ended without writing its recording (" + (dir / "profile.json").string() +
              "): it is not a Python program (hookscope profile records Python programs, which must find torch and accelerate), "
              "or it was killed, or called os._exit()";
    return r;
  }
  const json doc = storage::parse_json_bounded(read_text(dir / "profile.json"), (dir / "profile.json").string());
  const int64_t shift = doc.value("trace_clock_offset_ns", int64_t{0});
  json imports = json::array();
  auto take = [&](const importers::RunFiles& files) {
    const importers::RunImportSummary s = importers::import_run_files(store, run, files, {{}, shift});
    imports.push_back({{"trace", files.trace ? s.trace : json(nullptr)}, {"compile_log", s.compile_log}});
    if (s.compile_log.is_object())
      for (const char* k : {"recompiles", "frames_skipped", "recompile_limit_hits", "unique_graphs"})
        if (s.compile_log.contains(k)) r.result[k] = s.compile_log[k];
    r.import_notes.insert(r.import_notes.end(), s.diagnostics.begin(), s.diagnostics.end());
  };
  // The compile log goes with the first trace; without any range (markers never called, a
  // delay past the end) on its own: the compiles still count.
  std::optional<fs::path> log;
  if (fs::is_directory(dir / "torch_trace") && !fs::is_empty(dir / "torch_trace")) log = dir / "torch_trace";
  for (const json& range : doc.value("ranges", json::array())) {
    if (!range.value("trace", json()).is_string()) continue;
    importers::RunFiles files;
    files.trace = dir / range["trace"].get<std::string>();
    files.compile_log = std::exchange(log, std::nullopt);
    take(files);
  }
  if (log) take({std::nullopt, log, ""});
  if (doc.value("ranges", json::array()).empty())
    r.diagnostics.push_back("no capture range was recorded (--capture-range markers without "
                            "hookscope_torch.start(), or a --delay past the program's end): the run holds its compile log only");
  r.result["profile"] = {{"capture_range", doc.value("capture_range", "")}, {"ranges", doc.value("ranges", json::array())},
                         {"models", doc.value("models", json::array())}, {"imports", imports}};
  r.result["versions"] = doc.value("versions", json::object());
  r.result["trace_clock_offset_ns"] = shift;
  std::string stop_error;  // the profiler could not be stopped: another one stopped it first
  for (const json& e : doc.value("errors", json::array()))
    if (e.is_string()) {
      r.diagnostics.push_back(e.get<std::string>());
      if (stop_error.empty() && e.get<std::string>().rfind("stopping the profiler", 0) == 0) stop_error = e.get<std::string>();
    }
  // A range opened but its trace never written: torch.profiler keeps one Kineto profiler per
  // process, and the program's own `torch.profiler.profile()` stopped hookscope's (which then
  // cannot be stopped: "Can't disable Kineto profiler when it's not running"). What the range
  // held is lost: the recording failed, not "no hook call recorded".
  const json ranges = doc.value("ranges", json::array());
  const bool unwritten = std::any_of(ranges.begin(), ranges.end(),
                                     [](const json& g) { return !g.is_object() || !g.value("trace", json()).is_string(); });
  if (unwritten || !stop_error.empty())
    r.error = "a capture range's trace was never written (" + (stop_error.empty() ? std::string("its profiler was not stopped") : stop_error) +
              "): the program's own torch.profiler took over hookscope's (one profiler per process); profile the code "
              "outside the program's profiler with --capture-range markers and hookscope_torch.start() / stop(), or "
              "remove its profiler";
  return r;
}

json machine() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return {{"hostname", host}, {"cpus", std::thread::hardware_concurrency()}};
}

// `s` as a JSON string can hold it: bytes that are not UTF-8 (a tail cut inside a character, a
// program's binary output, a file name) become U+FFFD.
json text(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace));
}

// The record of one policy's run of the program.
json program_record(const ProfileArgs& a, int status, const engines::ProgramRun& prog) {
  json command = json::array();
  for (const auto& w : a.command) command.push_back(text(w));
  return {{"engine", "profile"},
          {"command", command},
          {"exit_status", status},
          {"stdout_tail", text(prog.stdout_tail())},
          {"stderr_tail", text(prog.stderr_tail())},
          {"machine", machine()}};
}

struct Outcome {
  int64_t run = 0;             // its run in the capture
  int status = 0;              // the program's exit status
  int term_signal = 0;         // the signal that ended it, 0 where it exited
  bool recorded = false;       // its recording was imported
  std::string error;           // why not
};

// Runs the program once under `p` into a new run of `store`.
Outcome run_policy(const ProfileArgs& a, const Policy& p, storage::Store& store, std::atomic<engines::ProgramRun*>& live,
                   const std::atomic<int>& interrupted) {
  std::string tmpl = (fs::temp_directory_path() / "hookscope-profile-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a temporary folder in " + fs::temp_directory_path().string());
  const fs::path dir = fs::absolute(tmpl);  // the program may change its directory
  tracer::RunInfo info;
  info.scenario = script_name(a.command);
  info.policy = p.name;
  info.engine = "profile";
  info.label = (a.label.empty() ? info.scenario : a.label) + " · " + p.name;
  info.versions_json = json{{"hookscope", "0.1.0"}}.dump();
  const int64_t run = store.add_run(info);
  std::fprintf(stderr, "[hookscope] profile: run %lld, policy %s: %s\n", static_cast<long long>(run), p.name.c_str(),
               output::terminal_text(storage::shell_command(a.command)).c_str());
  Outcome o;
  o.run = run;
  std::unique_ptr<engines::ProgramRun> started;
  try {
    started = std::make_unique<engines::ProgramRun>(a.command, environment(a, p, dir));
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    const std::string why = std::string(e.what()) + " (the command after --)";
    store.end_run(run, tracer::RunStatus::Failed, why);  // an appended capture keeps it, marked failed
    throw std::runtime_error(why);
  }
  engines::ProgramRun& prog = *started;
  live = &prog;
  o.status = prog.wait();
  o.term_signal = prog.term_signal();
  live = nullptr;
  json result = program_record(a, o.status, prog);
  Recorded rec;
  try {
    rec = import_recording(store, run, dir);
  } catch (const std::exception& e) {
    rec.error = e.what();
  }
  result.update(rec.result);
  if (const auto v = rec.result.find("versions"); v != rec.result.end() && v->is_object() && !v->empty()) {
    json versions = {{"hookscope", "0.1.0"}};  // and what the program ran: RUNS.versions, as a torch engine run's
    versions.update(*v);
    store.set_run_versions(run, versions);
  }
  for (const auto& d : rec.diagnostics) store.add_diagnostic(run, storage::Severity::Warning, "profile", d);
  for (const auto* notes : {&rec.import_notes, &rec.diagnostics})
    for (const auto& d : *notes)
      std::fprintf(stderr, "[hookscope] profile: run %lld: %s\n", static_cast<long long>(run), output::terminal_text(d).c_str());
  result["status"] = rec.error.empty() ? "ok" : "failed";
  if (!rec.error.empty()) result["error"] = rec.error;
  store.set_run_result(run, result);
  const bool stopped = interrupted.load() != 0 || o.term_signal == SIGINT;  // Ctrl+C, forwarded or not
  store.end_run(run, stopped ? tracer::RunStatus::Incomplete : rec.error.empty() ? tracer::RunStatus::Complete : tracer::RunStatus::Failed,
                rec.error);
  std::error_code ec;
  fs::remove_all(dir, ec);
  o.recorded = rec.error.empty();
  o.error = rec.error;
  return o;
}

int run_profile(const ProfileArgs& a) {
  const fs::path out(a.out);
  check_args(a, out);
  const std::vector<Policy> policies = policies_of(a);
  const output::OutputLock lock(out);
  // Only into, or over, a capture every reader opens (never a file of other data).
  if ((a.append || a.force_overwrite) && fs::exists(out)) storage::CaptureReader check(out);
  const bool in_place = a.append && fs::exists(out);
  // OUT.PID.partial, as `capture` names it: import and other writers see a capture in progress.
  const fs::path target = in_place ? out : fs::path(out.string() + "." + std::to_string(::getpid()) + ".partial");
  std::atomic<engines::ProgramRun*> live{nullptr};
  std::atomic<int> interrupted{0};
  // Ctrl+C / SIGTERM go to the program (its own process group); its run stays `incomplete`
  // with what it recorded, the capture is finished, and no further policy runs.
  const output::InterruptWatch watch([&](int signo) {
    interrupted = signo;
    if (engines::ProgramRun* p = live.load()) p->signal(signo);
  });
  if (watch.ignored(SIGINT))
    std::fprintf(stderr, "[hookscope] profile: SIGINT is ignored in this process (started in the background?): Ctrl+C "
                         "will not stop the program; SIGTERM does\n");
  int status = 0;
  size_t ran = 0;
  std::string failure;
  int stopped_by = 0;     // the signal that stopped the policies (Ctrl+C, SIGTERM, a SIGINT to the program)
  int64_t stopped_run = 0;
  {
    storage::Store store(target);
    try {
      for (const Policy& p : policies) {
        const Outcome o = run_policy(a, p, store, live, interrupted);
        ++ran;
        if (!o.recorded && failure.empty()) failure = "policy " + p.name + ": " + o.error;
        if (o.status != 0 && status == 0) status = o.status;
        if (interrupted.load() || o.term_signal == SIGINT) {
          stopped_by = interrupted.load() ? interrupted.load() : SIGINT;
          stopped_run = o.run;
        }
        if (interrupted.load()) break;
        // A program ended by SIGINT that hookscope did not forward (hookscope started with
        // SIGINT ignored, a `kill -INT` to the program): stop as a shell's loop does.
        if (o.term_signal == SIGINT && &p != &policies.back()) {
          std::fprintf(stderr, "[hookscope] profile: the program was ended by SIGINT: no further policy runs\n");
          break;
        }
      }
    } catch (...) {  // the program could not be started: nothing is left behind
      store.close();
      if (!in_place)
        for (const char* s : {"", "-wal", "-shm", "-journal"}) fs::remove(target.string() + s);
      throw;
    }
    store.finalize();
    store.close();
  }
  if (!in_place) {
    if (a.force_overwrite)
      for (const char* s : {"-wal", "-shm", "-journal"}) fs::remove(out.string() + s);
    fs::rename(target, out);
  }
  std::fprintf(stderr, "[hookscope] wrote %zu run(s) to %s\n", ran, output::terminal_text(out.string()).c_str());
  std::fputs(output::open_hint(out, ran + (in_place ? 1 : 0), a.command).c_str(), stderr);
  if (stopped_by != 0) {
    // What the interruption left (the last line): the run it stopped and the policies it kept
    // from running.
    std::string not_run;
    for (size_t i = ran; i < policies.size(); ++i) not_run += (not_run.empty() ? "" : ", ") + policies[i].name;
    std::fprintf(stderr, "[hookscope] profile: interrupted by %s: run %lld incomplete%s%s\n",
                 stopped_by == SIGINT ? "SIGINT" : stopped_by == SIGTERM ? "SIGTERM" : ("signal " + std::to_string(stopped_by)).c_str(),
                 static_cast<long long>(stopped_run), not_run.empty() ? "" : "; policies not run: ",
                 output::terminal_text(not_run).c_str());
  }
  if (interrupted.load()) return 128 + interrupted.load();
  // As the help says: a failed program keeps its status, a recording failed under a program
  // that exited 0 is hookscope's own failure, 1.
  if (!failure.empty()) {
    std::fprintf(stderr, "hookscope: error: %s\n", output::terminal_text(failure).c_str());
    return status != 0 ? status : 1;
  }
  return status;
}

}  // namespace

std::pair<std::vector<std::string>, std::vector<std::string>> split_profile_command(const std::vector<std::string>& args) {
  if (args.empty() || args.front() != "profile") return {args, {}};
  static const std::set<std::string> kTakesValue = {"-o", "--out", "--policies", "--accelerate", "--capture-range",
                                                    "--delay", "--duration", "--label"};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") return {{args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i)}, {args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end()}};
    if (w.empty() || w.front() != '-') return {{args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i)}, {args.begin() + static_cast<std::ptrdiff_t>(i), args.end()}};
    if (kTakesValue.count(w)) ++i;  // its value, whatever it looks like
  }
  return {args, {}};
}

CLI::App* add_profile_command(CLI::App& app, std::function<int()>& run_selected, std::vector<std::string> command) {
  auto a = std::make_shared<ProfileArgs>();
  a->command = std::move(command);
  auto* c = app.add_subcommand("profile", "Run a Python program with hookscope's recording injected (as nsys profile): "
                                           "hookscope profile [OPTIONS] [--] COMMAND ARGS...");
  // The program's words are split off before CLI11 parses the rest (split_profile_command).
  c->add_option("-o,--out", a->out, "Capture to write (default profile.sqlite)")->capture_default_str();
  c->add_flag("--force-overwrite", a->force_overwrite, "Replace an existing --out once the runs are recorded");
  c->add_flag("--append", a->append, "Add the runs to an existing capture");
  c->add_option("--policies", a->policies,
                "Run the program once per policy, each in its own process: whole-hook (accelerate as installed), "
                "offload-only, or a tree's NAME (--accelerate)")
      ->capture_default_str();
  c->add_option("--accelerate", a->accelerate, "An accelerate source tree as a policy: NAME=PATH (repeatable)");
  c->add_option("--capture-range", a->capture_range,
                "What torch.profiler records: all (the whole program) or markers (between hookscope_torch.start() and stop())")
      ->check(one_of({"all", "markers"}))
      ->capture_default_str();
  c->add_option("--delay", a->delay_s, "Start recording this many seconds after the program starts")->check(CLI::Range(0.0, 1e7));
  c->add_option("--duration", a->duration_s, "Record for this many seconds (0: to the end)")->check(CLI::Range(0.0, 1e7));
  c->add_option("--label", a->label, "Name of the runs (default: the script's file name), followed by the policy");
  c->footer("Exit status: the program's (the first non-zero one over the policies), also where a recording failed;\n"
            "1 where the program exited 0 but a policy's recording failed (not a Python program, killed, os._exit(): the\n"
            "error names the policy and why); 128 + N where signal N (Ctrl+C, SIGTERM) interrupted it.\n"
            "Examples:\n  hookscope profile -o run.sqlite -- python train.py --epochs 1\n"
            "  hookscope profile --policies whole-hook,offload-only --capture-range markers -- python bench.py");
  c->callback([a, &run_selected] {
    if (a->command.empty()) throw CLI::RequiredError("profile: the command to run (hookscope profile -- python script.py)");
    run_selected = [a] { return run_profile(*a); };
  });
  return c;
}

}  // namespace hs::cli

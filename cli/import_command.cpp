#include "cli/import_command.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "output/capture_output.h"
#include "cli/cli_util.h"
#include "importers/run_import.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "output/paths.h"
#include "output/text.h"

namespace hs::cli {

namespace fs = std::filesystem;

namespace {

struct ImportArgs {
  std::string trace;
  std::string compile_log;
  std::string out;
  bool append = false;
  std::string label, scenario = "imported", policy, mode, model, cell;
  bool fullgraph = false;
  bool cell_given = false;  ///< --scenario, --policy, --mode, --fullgraph or --model given
};

// The cell a `hookscope export` trace names ("hookscope": {scenario, policy, mode, fullgraph,
// model}) when no flag gave one: a trace exported from a capture goes back under its own cell,
// so that `report A B` matches it. Untrusted, so all or nothing: printable strings of at most
// 1000 bytes, a mode hookscope knows and a boolean fullgraph, else the flags' defaults stay and
// the returned note says why.
std::string take_exported_cell(storage::Store& store, int64_t run, const ImportArgs& a, const nlohmann::json& exported) {
  if (a.cell_given || !exported.is_object()) return "";
  auto text = [&](const char* key) -> std::optional<std::string> {
    const auto it = exported.find(key);
    if (it == exported.end() || !it->is_string()) return std::nullopt;
    const std::string& v = it->get_ref<const std::string&>();
    if (v.size() > 1000) return std::nullopt;
    for (const unsigned char c : v)
      if (c < 0x20 || c == 0x7f) return std::nullopt;
    return v;
  };
  const auto scenario = text("scenario"), policy = text("policy"), mode = text("mode"), model = text("model");
  const auto fg = exported.find("fullgraph");
  const bool known_mode = mode && (*mode == "eager" || *mode == "default" || *mode == "reduce-overhead");
  if (!scenario || !policy || !known_mode || !model || fg == exported.end() || !fg->is_boolean())
    return "the trace's \"hookscope\" object does not name a cell hookscope writes (scenario, policy, mode, "
           "fullgraph, model); the run is filed under the flags' values";
  store.set_run_cell(run, *scenario, *policy, *mode, fg->get<bool>(), *model);
  return "";
}

// The model description a `hookscope export` trace carries ("hookscope": {"model_info": {...}}),
// as RUNS.results' "model" (what `report` shows). Untrusted, so all or nothing: only the keys
// the LibTorch engine writes, printable strings of at most 1000 bytes and non-negative integers;
// anything else is dropped with the returned note.
std::string take_exported_model(nlohmann::json& result, const nlohmann::json& exported) {
  if (!exported.is_object() || !exported.contains("model_info")) return "";
  const nlohmann::json& m = exported["model_info"];
  bool ok = m.is_object() && m.size() <= 6;
  for (auto it = m.begin(); ok && it != m.end(); ++it) {
    const std::string& k = it.key();
    if (k == "params" || k == "bytes") {
      ok = it->is_number_unsigned();
    } else if (k == "id" || k == "path" || k == "dtype" || k == "architecture") {
      ok = it->is_string() && it->get_ref<const std::string&>().size() <= 1000;
      for (const unsigned char c : ok ? it->get_ref<const std::string&>() : std::string())
        ok = ok && c >= 0x20 && c != 0x7f;
    } else {
      ok = false;
    }
  }
  if (!ok)
    return "the trace's \"hookscope\".\"model_info\" is not a model description hookscope writes (id, path, dtype, "
           "architecture as text; params, bytes as counts); the report shows the model as '?'";
  result["model"] = m;
  return "";
}

// Whether `v` is made of what hookscope writes into a run's break facts: objects and arrays at
// most 5 levels deep (facts → log_break_reasons → a group → its module_calls → a call) and 100,000 items
// wide, strings of at most 64 KiB without control characters but newline and tab, booleans,
// null, and integers from 0 to 2^31 − 1.
bool plain_facts_value(const nlohmann::json& v, int depth) {
  if (v.is_null() || v.is_boolean()) return true;
  if (v.is_number_integer()) return v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t{1} << 31);
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return s.size() <= 65536 && std::none_of(s.begin(), s.end(), [](unsigned char c) {
             return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;
           });
  }
  if ((!v.is_array() && !v.is_object()) || depth >= 5 || v.size() > 100000) return false;
  return std::all_of(v.begin(), v.end(), [&](const nlohmann::json& x) { return plain_facts_value(x, depth + 1); });
}

// The break facts a `hookscope export` trace carries ("hookscope": {"engine", "facts": {...}},
// facts/breaks.h): the run's engine back in RUNS.engine and its figures in RUNS.results, so that
// report, explain and view show the run as it was captured (Dynamo's graph_break_count, its
// recompiles, its log's graph-break records). Untrusted, so all or nothing: only the keys
// facts/breaks.h writes, of the types it writes; anything else is dropped with the returned note.
std::string take_exported_facts(storage::Store& store, int64_t run, nlohmann::json& result,
                                const nlohmann::json& exported) {
  if (!exported.is_object() || !exported.contains("facts")) return "";
  static const std::set<std::string> counts = {
      "graph_count", "graph_break_count", "recompiles", "frames_skipped", "recompile_limit_hits", "log_compiles",
      "log_graphs", "log_graph_break_records", "log_graph_break_count", "log_recompiles", "log_frames_skipped",
      "log_recompile_limit_hits", "disabled_scope_entries", "captured_regions", "recorded_disabled_scope_entries",
      "guard_recompiles"};
  static const std::set<std::string> lists = {"break_reasons", "log_break_reasons"};
  const nlohmann::json& f = exported["facts"];
  const nlohmann::json engine = exported.value("engine", nlohmann::json());
  std::string bad;  // what is not as facts/breaks.h writes it
  if (engine != "torch" && engine != "libtorch") bad = "\"engine\" (torch or libtorch)";
  else if (!f.is_object()) bad = "\"facts\" (an object)";
  for (auto it = bad.empty() ? f.begin() : f.end(); bad.empty() && it != f.end(); ++it) {
    const std::string& k = it.key();
    bool ok = plain_facts_value(*it, 1);
    if (counts.count(k)) ok = ok && (it->is_null() || it->is_number_integer());
    else if (lists.count(k)) ok = ok && it->is_array() && std::all_of(it->begin(), it->end(), [](const nlohmann::json& b) { return b.is_object(); });
    else if (k == "log_statuses") ok = ok && (it->is_null() || it->is_object());
    else ok = ok && k == "breaks_source" && it->is_string();
    if (!ok) bad = "\"facts\".\"" + nlohmann::json(k).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(1);
  }
  if (!bad.empty()) {
    if (bad.size() > 200) {  // cut between UTF-8 characters
      size_t cut = 200;
      while (cut > 0 && (static_cast<unsigned char>(bad[cut]) & 0xC0) == 0x80) --cut;
      bad = bad.substr(0, cut) + "...";
    }
    return "the trace's \"hookscope\" " + bad +
           " is not what hookscope writes there (counts are integers from 0 to 2^31 − 1, reasons lists of objects); its "
           "break facts are dropped and the run keeps what its events say";
  }
  store.set_run_engine(run, engine.get<std::string>());
  for (const char* k : {"graph_count", "graph_break_count", "break_reasons", "recompiles", "frames_skipped",
                        "recompile_limit_hits", "disabled_scope_entries", "captured_regions", "guard_recompiles"})
    if (f.contains(k)) result[k] = f[k];
  // The compile log's figures: its rows are not in the trace, its summary is.
  nlohmann::json log = nlohmann::json::object();
  for (const auto& [k, v] : f.items())
    if (k.rfind("log_", 0) == 0) log[k] = v;
  result["carried_log"] = log;
  return "";
}

// The run's name when --label is not given: the input's file name as one line of valid UTF-8
// (control characters become spaces, bytes that are not UTF-8 U+FFFD), as --label must be.
std::string default_label(const ImportArgs& a) {
  std::string name = fs::path(a.trace.empty() ? a.compile_log : a.trace).filename().string();
  for (char& c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return nlohmann::json::parse(nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

tracer::RunInfo run_info(const ImportArgs& a) {
  tracer::RunInfo info;
  info.scenario = a.scenario;
  info.policy = a.policy;
  info.mode = a.mode;
  info.fullgraph = a.fullgraph;
  // A --model naming a checkpoint folder from here is kept as its absolute path: so the capture's
  // readers find it from any folder (output::model_folders: never an output inside it).
  std::error_code ec;
  const fs::path named(a.model);
  info.model = !a.model.empty() && named.is_relative() && fs::is_regular_file(named / "config.json", ec)
                   ? fs::absolute(named).lexically_normal().string()
                   : a.model;
  info.engine = "import";
  info.label = a.label.empty() ? default_label(a) : a.label;
  info.versions_json = nlohmann::json{{"hookscope", "0.1.0"}}.dump();
  return info;
}

// A terminal line with the bytes read, redrawn in place; nothing when stderr is not a terminal.
std::function<void(uint64_t, uint64_t)> progress_printer() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](uint64_t done, uint64_t total) {
    std::fprintf(stderr, "\r\033[K[hookscope] importing: %.1f / %.1f MB", done / 1e6, total / 1e6);
    std::fflush(stderr);
  };
}

// The import's arguments and its --out checked before anything is opened or written.
void check_import_args(const ImportArgs& a, const fs::path& out) {
  if (a.trace.empty() && a.compile_log.empty())
    throw std::invalid_argument("import: give a trace (TRACE.json[.gz]) and/or --compile-log DIR|FILE");
  for (const auto& [flag, p] : {std::pair{"TRACE", a.trace}, std::pair{"--compile-log", a.compile_log}})
    if (!p.empty() && !fs::exists(p)) throw std::invalid_argument(std::string(flag) + ": " + p + " does not exist");
  if (out.empty()) throw std::invalid_argument("--out: empty path");
  for (const auto& [flag, v] : {std::pair{"--label", a.label}, std::pair{"--scenario", a.scenario},
                                std::pair{"--policy", a.policy}, std::pair{"--mode", a.mode}, std::pair{"--model", a.model},
                                std::pair{"--cell", a.cell}}) {
    output::refuse_invalid_utf8(flag, v);
    output::refuse_control_characters(flag, v);
  }
  for (const auto& input : {a.trace, a.compile_log})
    if (!input.empty() && (output::same_file(out, input) || fs::path(input) == out))
      throw std::invalid_argument("--out: " + out.string() + " is " + input + ", an input of this import; name the capture to write");
  if (a.out.front() == '-')  // `-o --append`: the flag taken as the file name
    throw std::invalid_argument("--out: '" + a.out + "' looks like a flag, not a file name (write ./" + a.out +
                                " for a file of that name)");
  output::refuse_output_in_model_folder("--out", out, output::checkpoint_folders_above(out), "it holds a config.json");
  if (fs::exists(out) && !a.append)
    throw std::invalid_argument("--out: " + out.string() + " exists; pass --append to add a run to it");
  if (out.has_parent_path() && !fs::is_directory(out.parent_path()))
    throw std::invalid_argument("--out: folder " + out.parent_path().string() + " does not exist");
  output::refuse_name_too_long("--out", out);
  if (const auto capture = output::running_capture_of(out))
    throw std::invalid_argument("--out: " + out.string() + " is the temporary file of a capture into " + capture->string() +
                                " that is still running; wait for it to finish and import into that file");
}

// --append adds to a capture every reader opens, never to anything else: a zero-byte file
// (SQLite would take it for an empty database and the Store make it a capture) or a foreign
// one is refused with the readers' own message, before anything is written.
void refuse_appending_to_non_capture(const fs::path& out) {
  std::error_code ec;
  if (fs::is_regular_file(out, ec) && fs::file_size(out, ec) == 0 && !ec)
    throw storage::CaptureError(out, "not a hookscope capture: " + out.string() +
                                         " (an empty file); --append adds a run to an existing capture, refusing "
                                         "to write into it");
  storage::CaptureReader check(out);
}

// What an import is doing, for its SIGINT / SIGTERM handler (which runs on a thread of its own).
struct ImportPhase {
  enum Kind { Importing, Committing, Stopped } kind = Importing;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> signal{0};  // the signal that asked the import to stop, 0: none
  void set(Kind k) {
    {
      std::lock_guard lk(mu);
      kind = k;
    }
    cv.notify_all();
  }
};

// Thrown on the importing thread (from the progress callback) once a signal asked it to stop.
struct Interrupted {
  int signo;
};

// How long a signal waits for the importing thread to stop at its next progress report
// before the capture is left as it is and the process ends.
constexpr auto kStopGrace = std::chrono::seconds(10);

// Temporary files of earlier imports into `out` that were killed outright (SIGKILL: nothing could
// remove them then): `OUT.partial-PID` and its -journal, -wal and -shm. This import holds OUT's
// lock, so no other import writes them; those whose process is gone are removed, saying so.
void remove_stale_partials(const fs::path& out) {
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const std::string prefix = out.filename().string() + ".partial-";
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::string pid = name.substr(prefix.size());
    for (const std::string suffix : {"-journal", "-wal", "-shm"})
      if (pid.ends_with(suffix)) {
        pid.resize(pid.size() - suffix.size());
        break;
      }
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t holder = static_cast<pid_t>(std::stol(pid));
    if (holder == ::getpid() || ::kill(holder, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to know
    stale.push_back(it->path());
  }
  for (const fs::path& p : stale)
    if (fs::remove(p, ec))
      std::fprintf(stderr, "[hookscope] import: removed %s, left by an import into %s that was killed\n",
                   output::terminal_text(p.string()).c_str(), output::terminal_text(out.string()).c_str());
}

int run_import(const ImportArgs& a) {
  const fs::path out(a.out);
  check_import_args(a, out);
  output::OutputLock lock(out);  // no capture or other import writes it meanwhile
  remove_stale_partials(out);
  if (a.append && fs::exists(out)) refuse_appending_to_non_capture(out);  // never a zero-byte or foreign file
  // A new capture is written next to its name and renamed when finished: an interrupted import
  // leaves no file that looks like a capture.
  const fs::path target = a.append ? out : fs::path(out.string() + ".partial-" + std::to_string(::getpid()));
  importers::RunFiles files;
  if (!a.trace.empty()) files.trace = a.trace;
  if (!a.compile_log.empty()) files.compile_log = a.compile_log;
  files.cell = a.cell;
  importers::RunImportSummary summary;
  int64_t run = 0;
  // SIGINT / SIGTERM while importing: the import stops at its next progress report (a chunk of
  // the trace read), the run is ended `incomplete` and the capture closed as after an error
  // (a new capture's temporary file goes; an appended capture keeps its earlier runs, with no
  // journal or WAL left); a read that does not come back within kStopGrace ends the process
  // with the files as they are (SQLite commits whole transactions). Once the run is written
  // (being finalized, renamed), a signal lets the import finish.
  ImportPhase phase;
  const output::InterruptWatch watch([&](int signo) {
    std::unique_lock lk(phase.mu);
    phase.signal = signo;
    if (phase.kind != ImportPhase::Importing) return;  // the run is written (or failing): let it finish
    if (phase.cv.wait_for(lk, kStopGrace, [&] { return phase.kind != ImportPhase::Importing; })) return;
    std::error_code ec;
    if (!a.append)
      for (const char* s : {"", "-wal", "-shm", "-journal"}) fs::remove(target.string() + s, ec);
    fs::remove(lock.path(), ec);  // _exit runs no destructor
    std::fprintf(stderr, "\n[hookscope] interrupted by %s: %s\n", output::signal_name(signo).c_str(),
                 a.append ? ("the run being imported stays incomplete in " + out.string()).c_str()
                          : ("nothing was written to " + out.string()).c_str());
    std::fflush(stderr);
    ::_exit(128 + signo);
  });
  const auto print = progress_printer();
  importers::RunImportOptions options{[&](uint64_t done, uint64_t total) {
    if (const int signo = phase.signal.load()) throw Interrupted{signo};
    if (print) print(done, total);
  }};
  {
    storage::Store store(target);
    run = store.add_run(run_info(a));
    try {
      summary = importers::import_run_files(store, run, files, options);
    } catch (const Interrupted& i) {
      phase.set(ImportPhase::Stopped);  // the handler leaves the clean-up to this thread
      if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
      try {  // a run not ended stays incomplete all the same; the signal is what is reported
        store.end_run(run, tracer::RunStatus::Incomplete, "interrupted by " + output::signal_name(i.signo));
        store.close();
      } catch (const std::exception&) {
      }
      if (!a.append) fs::remove(target);
      std::fprintf(stderr, "[hookscope] interrupted by %s: %s\n", output::signal_name(i.signo).c_str(),
                   a.append ? ("run " + std::to_string(run) + " stays incomplete in " +
                               output::terminal_text(out.string()) + " (the runs it held before are unchanged)")
                                  .c_str()
                            : ("nothing was written to " + output::terminal_text(out.string())).c_str());
      return 128 + i.signo;
    } catch (const std::exception& e) {
      phase.set(ImportPhase::Stopped);  // what a signal now meets is this error's clean-up
      if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
      std::string unmarked;  // why the run could not be marked failed (a full disk fails that too)
      try {
        store.end_run(run, tracer::RunStatus::Failed, e.what());
        store.close();
      } catch (const std::exception& again) {
        unmarked = again.what();
      }
      if (!a.append) {
        fs::remove(target);
        // The user named OUT: the temporary file the error names is gone.
        std::string what = e.what();
        for (size_t at = 0; (at = what.find(target.string(), at)) != std::string::npos; at += out.string().size())
          what.replace(at, target.string().size(), out.string());
        throw std::runtime_error(what);
      }
      if (unmarked.empty())  // the runs it held before are whole: SQLite commits whole transactions
        std::fprintf(stderr, "[hookscope] run %lld stays in %s, marked failed with the error below (with what was "
                             "read before it; `hookscope explain` shows it); the runs it held before are unchanged\n",
                     static_cast<long long>(run), output::terminal_text(out.string()).c_str());
      else
        std::fprintf(stderr, "[hookscope] run %lld stays in %s as incomplete (it could not be marked failed: %s); the "
                             "runs it held before are unchanged\n",
                     static_cast<long long>(run), output::terminal_text(out.string()).c_str(),
                     output::terminal_text(unmarked).c_str());
      throw;
    }
    phase.set(ImportPhase::Committing);
    if (summary.trace.is_object())
      if (const std::string note = take_exported_cell(store, run, a, summary.trace.value("hookscope_run", nlohmann::json()));
          !note.empty()) {
        store.add_diagnostic(run, storage::Severity::Warning, "import", note);
        summary.diagnostics.push_back(note);
      }
    nlohmann::json result{{"engine", "import"}, {"status", "ok"}, {"import", {{"trace", summary.trace}, {"compile_log", summary.compile_log}}}};
    if (summary.compile_log.is_object())
      // Dynamo's compile metrics as the log records them; the log's graphs − 1 is not
      // explain's graph_break_count and is read from the log's rows (facts/breaks.h).
      for (const char* k : {"recompiles", "frames_skipped", "recompile_limit_hits", "unique_graphs"})
        if (summary.compile_log.contains(k)) result[k] = summary.compile_log[k];
    if (summary.trace.is_object()) {
      const nlohmann::json exported = summary.trace.value("hookscope_run", nlohmann::json());
      for (const std::string& note : {take_exported_model(result, exported), take_exported_facts(store, run, result, exported)})
        if (!note.empty()) {
          store.add_diagnostic(run, storage::Severity::Warning, "import", note);
          summary.diagnostics.push_back(note);
        }
    }
    store.set_run_result(run, result);
    store.end_run(run, tracer::RunStatus::Complete);
    store.finalize();
    store.close();
  }
  if (!a.append) fs::rename(target, out);
  lock.release();  // while the watch still handles a signal: no OUT.lock is left behind
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  for (const auto& d : summary.diagnostics) std::fprintf(stderr, "[hookscope] note: %s\n", d.c_str());
  if (const int signo = phase.signal.load())
    std::fprintf(stderr, "[hookscope] %s arrived as the run was being written: the import finished\n",
                 output::signal_name(signo).c_str());
  std::fprintf(stderr, "[hookscope] wrote run %lld to %s\n", static_cast<long long>(run), output::terminal_text(out.string()).c_str());
  std::fputs(output::open_hint(out, a.append ? 2 : 1, {a.trace, a.compile_log}).c_str(), stderr);  // appended: the capture holds other runs too
  return 0;
}

}  // namespace

CLI::App* add_import_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ImportArgs>();
  auto* c = app.add_subcommand("import", "Import a torch.profiler trace and/or a TORCH_TRACE compile log as a run");
  c->add_option("trace", a->trace, "torch.profiler / Kineto Chrome trace (.json or .json.gz)");
  c->add_option("--compile-log", a->compile_log, "TORCH_TRACE folder (or one of its log files) of the same run");
  c->add_option("-o,--out", a->out, "Capture to write (new), or to add the run to with --append")->required();
  c->add_flag("--append", a->append, "Add the run to an existing capture");
  c->add_option("--label", a->label, "Name of the run (default: the trace's file name)");
  // Without any of these, a trace written by `hookscope export` goes under the cell it names.
  const std::vector<CLI::Option*> cell_flags{
      c->add_option("--scenario", a->scenario, "Scenario to file the run under")->capture_default_str(),
      c->add_option("--policy", a->policy, "Policy to file the run under (whole-hook, offload-only, a tree's name)"),
      c->add_option("--mode", a->mode, "Mode to file the run under (eager, default, reduce-overhead)"),
      c->add_flag("--fullgraph", a->fullgraph, "The run compiled with fullgraph=True"),
      c->add_option("--model", a->model, "The model the run ran")};
  c->add_option("--cell", a->cell, "Take only this hookscope_cell of the compile log (logs written by the torch engine)");
  c->footer("Examples:\n  hookscope import trace.json.gz --compile-log /tmp/torch_trace -o run.sqlite --label main\n"
            "  hookscope import pr.json --compile-log pr_trace/ -o run.sqlite --append --label pr");
  c->callback([a, cell_flags, &run_selected] {
    for (const CLI::Option* o : cell_flags) a->cell_given |= o->count() > 0;
    // Nothing to import is a usage error (exit 2), like a missing argument.
    if (a->trace.empty() && a->compile_log.empty())
      throw CLI::RequiredError("import: give a trace (TRACE.json[.gz]) and/or --compile-log DIR|FILE");
    run_selected = [a] { return run_import(*a); };
  });
  return c;
}

}  // namespace hs::cli

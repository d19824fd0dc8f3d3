#include "engines/torch_engine.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "engines/child_process.h"
#include "output/text.h"
#include "importers/run_import.h"
#include "storage/bounded_json.h"

namespace hs::engines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string cell_id(int n) { return "c" + std::to_string(n); }

template <class T>
std::optional<T> opt(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

// The driver's per-repeat lists ({"prefill_ms": [...], "decode_ms_per_token": [...]}).
measurement::LatencySamples samples_of(const json& reply, const char* key) {
  measurement::LatencySamples out;
  const auto it = reply.find(key);
  if (it == reply.end() || !it->is_object()) return out;
  auto list = [&](const char* k, std::vector<double>& v) {
    const auto l = it->find(k);
    if (l == it->end() || !l->is_array()) return;
    for (const auto& x : *l)
      if (x.is_number()) v.push_back(x.get<double>());
  };
  list("prefill_ms", out.prefill_ms);
  list("decode_ms_per_token", out.decode_ms_per_token);
  return out;
}

// The folder hookscope gives a policy's driver for its output (its spec's out_dir): the files
// its results name must lie there.
fs::path driver_out_dir(const fs::path& work_dir, const std::string& policy) { return fs::absolute(work_dir / policy); }

// `p` with `..`, `.` and symbolic links resolved (the part that exists; the rest lexically), no
// trailing separator; nullopt when it cannot be resolved (a loop of links, a folder not readable).
std::optional<fs::path> resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) return std::nullopt;
  r = r.lexically_normal();
  if (!r.has_filename() && r != r.root_path()) r = r.parent_path();
  return r;
}

// Whether resolved `p` lies inside resolved `root` (or is it, where `or_root`).
bool lies_inside(const fs::path& p, const fs::path& root, bool or_root) {
  const fs::path rel = p.lexically_relative(root);
  if (rel.empty()) return false;
  if (rel == ".") return or_root;
  return *rel.begin() != "..";
}

// The files a driver's result names, checked: each must resolve (after `..` and links) to a path
// inside the folder hookscope gave that driver for its output; else `refused` says which field
// names which path (a protocol break: hookscope never reads a file elsewhere as a recording).
struct DriverFiles {
  std::optional<fs::path> trace;        ///< resolved; absent when the result names none
  std::string trace_named;              ///< the trace as the result names it, joined to its out_dir
  std::optional<fs::path> compile_log;  ///< the TORCH_TRACE folder, resolved
  std::string refused;                  ///< "" or what is wrong
  bool wrong_types = false;             ///< a path field that is not a string
};

DriverFiles driver_files(const json& reply, const fs::path& out_dir) {
  DriverFiles f;
  const auto text = [&](const char* key) -> std::optional<std::string> {
    const auto it = reply.find(key);
    if (it == reply.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) f.wrong_types = true;
    return it->is_string() ? std::optional<std::string>(it->get<std::string>()) : std::nullopt;
  };
  const auto root = resolved(out_dir).value_or(fs::absolute(out_dir).lexically_normal());
  // One path of the result, resolved and checked; nullopt (and `refused` said) when refused.
  const auto check = [&](const char* field, const std::string& given, const fs::path& path,
                         bool or_root) -> std::optional<fs::path> {
    const auto r = resolved(path);
    if (r && lies_inside(*r, root, or_root)) return r;
    if (f.refused.empty()) {
      f.refused = std::string("whose ") + field + " '" + output::terminal_text(given, false) + "'";
      if (!r) f.refused += ", which cannot be resolved,";
      else if (r->string() != given) f.refused += " (resolved: " + output::terminal_text(r->string(), false) + ")";
      f.refused += std::string(" is not ") + (or_root ? "" : "a file ") + "inside the folder hookscope gave it for " +
                   "its output, " + output::terminal_text(root.string(), false);
    }
    return std::nullopt;
  };
  const auto dir = text("out_dir");
  if (dir && !check("out_dir", *dir, *dir, true)) return f;
  if (const auto t = text("trace")) {
    const fs::path named = fs::path(dir ? *dir : out_dir.string()) / *t;
    f.trace_named = named.string();
    if (!(f.trace = check("trace", *t, named, false))) return f;
  }
  if (const auto l = text("torch_trace_dir")) {  // relative: to out_dir, as the trace
    const fs::path named = fs::path(*l).is_absolute() ? fs::path(*l) : fs::path(dir ? *dir : out_dir.string()) / *l;
    if (!(f.compile_log = check("torch_trace_dir", *l, named, true))) return f;
  }
  return f;
}

// The profiler trace a driver's result names when it is not on disk, as "its trace 'PATH'";
// "" when it is there or none is named. (A missing TORCH_TRACE folder stays a diagnostic of the
// import: torch writes the log lazily, a run without compiles may have none.)
std::string missing_recording(const DriverFiles& files) {
  std::error_code ec;
  if (files.trace && !fs::exists(*files.trace, ec))
    return "its trace '" + output::terminal_text(files.trace_named, false) + "'";
  return "";
}

// The driver as an error names it: its policy, the --python that runs it and its log.
std::string driver_named(const std::string& policy, const fs::path& python, const fs::path& log) {
  return "the torch driver (" + policy + "; --python " + python.string() + ", log " + log.string() + ")";
}

// Text the driver printed, as a message quotes it: cut to `max` bytes, every control character,
// escape sequence and bidi override shown as text (it reaches a terminal).
std::string shown(std::string_view s, size_t max = 200) {
  const std::string cut = output::terminal_text(s.substr(0, max), /*keep_lines=*/false);
  return "'" + cut + "'" + (s.size() > max ? " (cut; " + std::to_string(s.size()) + " bytes)" : "");
}

// What the driver said on its reply pipe during one cell, for the message when it ends or
// breaks the protocol.
struct Replies {
  size_t lines = 0;
  std::string last;        ///< the last line
  std::string other_cell;  ///< the id of a result for another cell, if one came
};

// Why the policy's driver ended before replying: what it replied (when it did), the last lines
// of its log, or, where it printed nothing or could not import a module, what the user has to
// change.
std::string driver_ended(const std::string& policy, ChildProcess& p, const fs::path& python, const std::string& id,
                         const Replies& replies) {
  const std::string head = driver_named(policy, python, p.log_path()) + " ended, " + p.exit_description();
  const std::string need =
      "the torch engine runs a Python with torch, transformers and accelerate (--python, or $HOOKSCOPE_PYTHON)";
  const std::string tail = output::terminal_text(p.log_tail());
  const bool log_empty = tail.find_first_not_of(" \t\r\n") == std::string::npos;
  if (p.reply_held_after_exit())  // it exited, but what it started held the pipe: not "no Python"
    return head + " without the result for cell " + id + " after " + std::to_string(replies.lines) + " reply line" +
           (replies.lines == 1 ? "" : "s") + ", and a process it started held its reply pipe open " +
           std::to_string(ChildProcess::kHeldPipeGrace.count()) + " s longer: hookscope ended the driver's process " +
           "group" + (log_empty ? "; its log is empty" : "; its log ends:\n" + tail);
  if (replies.lines > 0) {
    std::string why = head + " after " + std::to_string(replies.lines) + " reply line" + (replies.lines == 1 ? "" : "s") +
                      " without the result for cell " + id;
    if (!replies.other_cell.empty()) why += " (it replied for cell " + shown(replies.other_cell, 40) + " instead)";
    why += "; its last line: " + shown(replies.last);
    return why + (log_empty ? "; its log is empty" : "; its log ends:\n" + tail);
  }
  const std::string tag = "ModuleNotFoundError: No module named '";
  if (const size_t at = tail.rfind(tag); at != std::string::npos) {
    const size_t from = at + tag.size();
    const std::string module = tail.substr(from, tail.find('\'', from) - from);
    return head + ": " + python.string() + " cannot import '" + module + "'; " + need;
  }
  if (log_empty) return head + " before printing anything: is " + python.string() + " a Python? " + need;
  return head + ":\n" + tail;
}

// How long a driver that closed its reply pipe (or its stdin) has to exit before it is killed.
constexpr std::chrono::seconds kHangUpGrace{5};

// Why the policy's driver, which closed its reply pipe (`sent`: else its stdin, before the cell's
// request) without the cell's result, was killed: it had not exited kHangUpGrace later.
std::string driver_hung_up(const std::string& policy, ChildProcess& p, const fs::path& python, const std::string& id,
                           const Replies& replies, bool sent) {
  std::string why = driver_named(policy, python, p.log_path()) +
                    (sent ? " closed its reply pipe without the result for cell " + id
                          : " closed its stdin before taking the request for cell " + id) +
                    " and had not exited " + std::to_string(kHangUpGrace.count()) + " s later: hookscope ended it (" +
                    p.exit_description() + ")";
  if (replies.lines > 0) {
    why += "; it printed " + std::to_string(replies.lines) + " reply line" + (replies.lines == 1 ? "" : "s");
    if (!replies.other_cell.empty()) why += " (a result for cell " + shown(replies.other_cell, 40) + ")";
    why += ", the last: " + shown(replies.last);
  } else if (sent) {
    why += "; it printed no reply line";
  }
  const std::string tail = output::terminal_text(p.log_tail());
  const bool log_empty = tail.find_first_not_of(" \t\r\n") == std::string::npos;
  return why + (log_empty ? "; its log is empty" : "; its log ends:\n" + tail);
}

std::string string_field(const json& msg, const char* key) {
  const auto it = msg.find(key);
  return it != msg.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A driver's "progress" line (a note, shown under `prefix`; past 200 in a run, no more) or
// "tick" (which generate and step it is in), shown through `progress` (else stderr); false for
// any other reply.
bool show_progress(const json& msg, const std::string& type, const std::string& prefix, size_t& notes,
                   const CellProgressFn& progress) {
  if (type == "progress") {
    if (++notes > 200) return true;
    const std::string note = prefix + (notes == 200 ? std::string("(further progress lines of this run not shown)")
                                                    : output::terminal_text(string_field(msg, "text"), false));
    if (progress) progress({{}, 0, 0, note});
    else std::fprintf(stderr, "  %s\n", note.c_str());
    return true;
  }
  if (type != "tick") return false;
  const auto number = [&](const char* key) {
    const auto it = msg.find(key);
    return it != msg.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
  };
  if (progress) progress({output::terminal_text(string_field(msg, "phase"), false), number("step"), number("steps"), {}});
  return true;
}

}  // namespace

TorchEngine::TorchEngine(TorchEngineOptions options) : opt_(std::move(options)) {
  if (!fs::exists(opt_.python)) throw std::invalid_argument("--python: " + opt_.python.string() + " does not exist");
  if (!fs::is_directory(opt_.package_dir / "hookscope_torch"))
    throw std::invalid_argument("the torch engine's driver package is missing: " +
                                (opt_.package_dir / "hookscope_torch").string() +
                                " (set HOOKSCOPE_DRIVER_PATH to the folder holding hookscope_torch/)");
  if (!fs::is_directory(opt_.model)) throw std::invalid_argument("--model: " + opt_.model + " is not a folder (the torch engine loads HF folders)");
  for (const auto& [name, tree] : opt_.accelerate_trees)
    if (!fs::is_regular_file(tree / "accelerate" / "hooks.py"))
      throw std::invalid_argument("--accelerate " + name + "=" + tree.string() +
                                  ": no accelerate/hooks.py there (give the folder that holds the accelerate package, e.g. SRC/src)");
  fs::create_directories(opt_.work_dir);
}

TorchEngine::~TorchEngine() = default;

void TorchEngine::prepare(Scenario) {}

RunSetup TorchEngine::setup(const Cell&) const {
  json versions = versions_.is_object() ? versions_ : json{{"hookscope", "0.1.0"}};
  // The first driver's message also describes its own cell and machine (policy, accelerators,
  // threads): RUNS.versions keeps the library versions only (each result keeps everything).
  for (const char* k : {"policy", "offload_only", "accelerate_file", "accelerators", "threads", "device"}) versions.erase(k);
  return {opt_.model, json::object(), versions};
}

json TorchEngine::spec_for(const std::string& policy, const std::optional<fs::path>& tree) const {
  json s{{"model", fs::absolute(opt_.model).string()},
         {"policy", tree ? "accelerate:" + policy : policy},
         {"accelerate_path", tree ? json(fs::absolute(*tree).string()) : json(nullptr)},
         {"dtype", opt_.dtype},
         {"prompt", opt_.prompt},
         {"prompt_ids", opt_.prompt_ids.empty() ? json(nullptr) : json(opt_.prompt_ids)},
         {"max_new_tokens", opt_.max_new_tokens},
         {"repeats", opt_.repeats},
         {"warmup", opt_.warmup},
         {"devices", opt_.devices},
         {"cache_implementation", opt_.cache_implementation},
         {"backend", opt_.backend.empty() ? json(nullptr) : json(opt_.backend)},
         {"offload_dir", fs::absolute(opt_.offload_dir.empty() ? opt_.work_dir / policy / "offload"
                                                               : opt_.offload_dir / ("torch-" + policy))
                             .string()},
         {"out_dir", driver_out_dir(opt_.work_dir, policy).string()},
         {"profile", opt_.profile},
         {"threads", opt_.threads > 0 ? json(opt_.threads) : json(nullptr)},
         {"cells", json::array()}};
  return s;
}

// The process of the cell's policy, started on first use.
ChildProcess& TorchEngine::process_for(const Cell& cell) {
  const std::string policy = policy_label(cell);
  auto& slot = processes_[policy];
  if (slot) return *slot;
  std::optional<fs::path> tree;
  if (!cell.accelerate_tree.empty()) tree = opt_.accelerate_trees.at(cell.accelerate_tree);
  const fs::path dir = opt_.work_dir / policy;
  fs::create_directories(dir);
  const fs::path spec = dir / "spec.json";
  std::ofstream(spec) << spec_for(policy, tree).dump(2);
  std::map<std::string, std::string> env{{"PYTHONPATH", fs::absolute(opt_.package_dir).string()},
                                         {"HOOKSCOPE_REPLY_FD", std::to_string(ChildProcess::kReplyFd)},
                                         {"PYTHONUNBUFFERED", "1"}};
  slot = std::make_unique<ChildProcess>(
      std::vector<std::string>{opt_.python.string(), "-m", "hookscope_torch", "serve", "--spec", spec.string()}, env,
      dir / "driver.log");
  std::fprintf(stderr, "[hookscope] torch engine: started the %s driver (pid %d, log %s%s)\n", policy.c_str(),
               static_cast<int>(slot->pid()), (dir / "driver.log").c_str(),
               opt_.keep_work_dir ? ""
                                  : ", removed with the capture's other temporary files unless a run fails or "
                                    "--keep-driver-files DIR");
  return *slot;
}

RunResult TorchEngine::run(const Cell& cell, RunContext& ctx) {
  RunResult r;
  const std::string id = cell_id(next_cell_++);
  try {
    ChildProcess& p = process_for(cell);
    // A driver that has already ended (a --python that is no Python exits at once) refuses the
    // request: that is reported as its end, with its log, not as the broken pipe.
    bool sent = true;
    try {
      p.send_line(json{{"cell",
                        {{"id", id},
                         {"scenario", scenario_name(cell.scenario)},
                         {"mode", compile::mode_name(cell.mode)},
                         {"fullgraph", cell.fullgraph}}}}
                      .dump());
    } catch (const std::runtime_error&) {
      sent = false;
    }
    Replies replies;
    size_t notes = 0;  // progress lines shown: a driver printing thousands is cut short
    // A reply hookscope cannot use ends the driver (the policy's next cell starts a fresh one).
    auto broken = [&](const std::string& what) {
      const std::string why = driver_named(policy_label(cell), opt_.python, p.log_path()) + " " + what + ": " +
                              shown(replies.last) + "; see its log";
      processes_.erase(policy_label(cell));
      return std::runtime_error(why);
    };
    for (;;) {
      std::optional<std::string> line;
      try {
        if (sent) line = p.read_line();
      } catch (const std::length_error& e) {
        throw broken(std::string("printed ") + e.what() + " after its last line");
      }
      if (!line) {
        // The reply pipe is closed (or the request could not be sent): a driver exiting says how
        // it ended; one that lives on without its pipe is given kHangUpGrace, then killed.
        const std::string why = p.end_within(kHangUpGrace)
                                    ? driver_ended(policy_label(cell), p, opt_.python, id, replies)
                                    : driver_hung_up(policy_label(cell), p, opt_.python, id, replies, sent);
        processes_.erase(policy_label(cell));  // the policy's next cell starts a fresh one
        throw std::runtime_error(why);
      }
      ++replies.lines;
      replies.last = *line;
      // The driver's line: bounded like every JSON hookscope did not write (a reply nested
      // 100,000 deep would parse, then overflow the stack when copied or dumped).
      json msg;
      try {
        msg = storage::parse_json_bounded(*line, "the torch driver's reply line");
      } catch (const std::exception&) {
        throw broken("printed a reply line that is not a JSON object of its protocol");
      }
      if (!msg.is_object()) throw broken("printed a reply line that is not a JSON object of its protocol");
      const auto text = [&](const char* key) { return string_field(msg, key); };
      const std::string type = text("type");
      if (show_progress(msg, type, "[torch " + policy_label(cell) + "] ", notes, ctx.progress)) continue;
      if (type == "fatal")
        throw std::runtime_error(driver_named(policy_label(cell), opt_.python, p.log_path()) +
                                 " failed: " + output::terminal_text(text("error").empty() ? "?" : text("error")));
      if (type != "result") continue;
      if (text("id") != id) {
        replies.other_cell = text("id");
        continue;
      }
      try {
        r = result_of(msg);
      } catch (const nlohmann::json::exception&) {
        throw broken("sent a result whose fields have the wrong types");
      }
      r.warmup = opt_.warmup;
      r.repeats = opt_.repeats;
      if (versions_.is_null() && msg.contains("versions")) versions_ = msg["versions"];
      // A result naming files outside the folder hookscope gave the driver, or recordings that
      // are not there, is a broken driver, not a complete run.
      const DriverFiles files = driver_files(msg, driver_out_dir(opt_.work_dir, policy_label(cell)));
      if (files.wrong_types) throw broken("sent a result whose fields have the wrong types");
      if (!files.refused.empty()) throw broken("sent a result for " + id + " " + files.refused + " (a protocol break)");
      if (const std::string missing = missing_recording(files); !missing.empty())
        throw broken("sent a result for " + id + " naming " + missing + ", which does not exist");
      import_recordings(msg, files.trace, files.compile_log, id, ctx, r);
      return r;
    }
  } catch (const std::exception& e) {
    r.outcome = RunResult::Outcome::Failed;
    r.error = e.what();
  }
  return r;
}

// The trace and the cell's part of the compile log, into the run.
void TorchEngine::import_recordings(const json& reply, const std::optional<fs::path>& trace,
                                    const std::optional<fs::path>& compile_log, const std::string& id, RunContext& ctx,
                                    RunResult& r) {
  importers::RunFiles files;
  files.trace = trace;
  files.compile_log = compile_log;
  files.cell = id;
  importers::RunImportOptions o;
  // The driver's trace is on CLOCK_REALTIME: its events go onto the capture's steady clock.
  o.trace_shift_ns = opt<int64_t>(reply, "trace_clock_offset_ns").value_or(0);
  try {
    const importers::RunImportSummary s = importers::import_run_files(ctx.store, ctx.run_id, files, o);
    for (const auto& d : s.diagnostics) r.diagnostics.push_back(d);
  } catch (const std::exception& e) {
    r.diagnostics.push_back(std::string("import of the driver's recordings failed: ") + e.what());
  }
}

RunResult TorchEngine::result_of(const json& reply) {
  RunResult r;
  const std::string status = reply.value("status", "failed");
  r.outcome = status == "ok" ? RunResult::Outcome::Ok
              : status == "unsupported" ? RunResult::Outcome::Unsupported
                                        : RunResult::Outcome::Failed;
  r.error = reply.contains("error") && reply["error"].is_string() ? reply["error"].get<std::string>() : "";
  if (r.outcome == RunResult::Outcome::Failed && r.error.empty()) r.error = "the driver reported a failure";
  r.graph_count = opt<int64_t>(reply, "graph_count");
  r.graph_break_count = opt<int64_t>(reply, "graph_break_count");
  r.recompiles = opt<int64_t>(reply, "recompiles");
  r.argmax_match = opt<bool>(reply, "argmax_match");
  r.params_on_meta_after = opt<bool>(reply, "params_on_meta_after");
  const auto same = opt<bool>(reply, "logits_identical");
  const auto ulp = opt<int64_t>(reply, "logits_max_ulp");
  if (same && (*same || ulp)) {
    models::LogitsDiff d;
    d.identical = *same;
    d.max_abs_diff = opt<double>(reply, "logits_max_abs_diff").value_or(0);
    d.max_ulp = ulp.value_or(0);
    r.logits = d;
  } else if (same) {
    r.extra["logits_identical"] = *same;  // how far apart is unknown: no figures invented
  }
  if (reply.contains("weight_devices")) r.weight_devices = reply["weight_devices"].get<std::vector<std::string>>();
  if (reply.contains("diagnostics")) r.diagnostics = reply["diagnostics"].get<std::vector<std::string>>();
  if (reply.contains("model")) r.model = reply["model"];
  // The dtype the driver found on the loaded model's parameters (docs/torch-engine.md).
  r.dtype = opt<std::string>(reply, "dtype").value_or("");
  r.new_tokens = opt<int64_t>(reply, "new_tokens").value_or(0);
  r.latency = samples_of(reply, "latency");
  // A compiled cell also measures the eager model, interleaved with its own repeats (A B A B):
  // the comparison that drift cannot favour.
  r.eager_latency = samples_of(reply, "eager_latency");
  json& extra = r.extra;
  for (const char* k : {"break_reasons", "recompile_limit_hits", "frames_skipped", "unique_graphs", "compile_time_s",
                        "device_map", "hooked_modules", "cache_implementation", "scenario_note", "versions",
                        "measurement", "op_count", "compile_time_total_s", "cudagraph_skips", "skipped_frames",
                        "tokens", "tokens_match_reference", "backend", "execution_device", "prefill_argmax",
                        "profiled_run"})
    if (reply.contains(k)) extra[k] = reply[k];
  // The measured generates' wall times, beside profiled_run.generate_ms (the generate the
  // timeline shows, recorded): what recording costs (facts: recording_overhead).
  if (const auto l = reply.find("latency"); l != reply.end() && l->is_object() && l->contains("generate_ms"))
    extra["generate_ms"] = (*l)["generate_ms"];
  return r;
}

}  // namespace hs::engines

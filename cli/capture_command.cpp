#include "cli/capture_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "output/capture_output.h"
#include "engines/capture_runner.h"
#include "storage/capture_settings.h"
#include "cli/cli_util.h"
#include "engines/libtorch_engine.h"
#include "engines/torch_engine.h"
#include "models/generate.h"
#include "models/loader.h"
#include "output/paths.h"
#include "output/text.h"

namespace hs::cli {

namespace fs = std::filesystem;

namespace {

struct CaptureArgs {
  std::string model;
  std::string scenarios = "sharded,cpu-offload,disk-offload,mixed";
  std::string policies = "whole-hook,offload-only";
  std::string modes = "eager,default,reduce-overhead";
  std::string fullgraph = "both";
  int devices = 4;
  std::string max_memory;
  std::string prompt = "The capital of France is";
  std::string prompt_ids;  ///< comma-separated token ids; replaces --prompt (no tokenizer needed)
  bool prompt_ids_given = false;
  int64_t max_new_tokens = 64;
  int repeats = 5;
  int warmup = 2;
  std::string dtype = "f32";
  std::string out = "out/capture.sqlite";
  std::string engine;  ///< torch | libtorch | both; "" = both where the driver's Python is there
  std::string python;
  std::vector<std::string> accelerate;  ///< NAME=PATH
  std::string cache_implementation = "dynamic";
  std::string backend;
  std::string keep_driver_files;
  std::string keep_offload_dir;
  int threads = 0;
  bool force_overwrite = false;
};

#ifndef HOOKSCOPE_DEFAULT_PYTHON
#define HOOKSCOPE_DEFAULT_PYTHON ""
#endif
#ifndef HOOKSCOPE_DRIVER_DIR
#define HOOKSCOPE_DRIVER_DIR ""
#endif

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

engines::Matrix matrix_of(const CaptureArgs& a) {
  engines::Matrix m;
  for (const auto& s : output::split_list(a.scenarios)) m.scenarios.push_back(engines::parse_scenario(s));
  for (const auto& p : output::split_list(a.policies)) m.policies.push_back(hooks::parse_policy(p));
  for (const auto& s : output::split_list(a.modes)) m.modes.push_back(compile::parse_mode(s));
  if (m.scenarios.empty() || m.policies.empty() || m.modes.empty())
    throw std::invalid_argument("--scenarios, --policies and --modes each need at least one value");
  for (engines::Scenario sc : m.scenarios)
    if ((sc == engines::Scenario::Sharded || sc == engines::Scenario::Mixed) && a.devices < 2)
      throw std::invalid_argument("scenario " + engines::scenario_name(sc) + " needs --devices 2 or more");
  if (a.fullgraph == "both") m.fullgraphs = {false, true};
  else if (a.fullgraph == "on" || a.fullgraph == "true") m.fullgraphs = {true};
  else if (a.fullgraph == "off" || a.fullgraph == "false") m.fullgraphs = {false};
  else throw std::invalid_argument("--fullgraph must be both, on or off (got '" + a.fullgraph + "')");
  if (m.cells(m.scenarios.front(), true).empty())
    throw std::invalid_argument("--modes " + a.modes + " with --fullgraph " + a.fullgraph +
                                " selects no run: fullgraph applies only to the capturing modes (default, reduce-overhead)");
  return m;
}

// Whether a scenario of the matrix writes weights to a disk-offload folder.
bool matrix_offloads_to_disk(const engines::Matrix& m) {
  return std::any_of(m.scenarios.begin(), m.scenarios.end(),
                     [](engines::Scenario s) { return s == engines::Scenario::DiskOffload || s == engines::Scenario::Mixed; });
}

// "5, 17,99" -> {5, 17, 99}; an empty item ("1,,2", a trailing comma) is an error, not skipped.
std::vector<int64_t> parse_prompt_ids(const std::string& list) {
  std::vector<int64_t> ids;
  if (list.find_first_not_of(" \t") == std::string::npos) return ids;
  std::vector<std::string> items;
  for (size_t b = 0;; ) {
    const size_t e = list.find(',', b);
    std::string t = list.substr(b, e == std::string::npos ? std::string::npos : e - b);
    const size_t f = t.find_first_not_of(" \t");
    items.push_back(f == std::string::npos ? std::string() : t.substr(f, t.find_last_not_of(" \t") - f + 1));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& t = items[i];
    if (t.empty())
      throw std::invalid_argument("--prompt-ids: item " + std::to_string(i + 1) + " of '" + list +
                                  "' is empty (expected comma-separated token ids such as 5,17,99)");
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(t, &used);
    } catch (const std::exception&) {
    }
    if (used != t.size() || v < 0) throw std::invalid_argument("--prompt-ids: '" + t + "' is not a token id");
    ids.push_back(v);
  }
  return ids;
}

// Whether `file` starts with SQLite's header ("SQLite format 3\0"): a capture or another database.
bool is_sqlite_file(const fs::path& file) {
  char head[16] = {};
  std::ifstream in(file, std::ios::binary);
  return in.read(head, sizeof head) && std::memcmp(head, "SQLite format 3", sizeof head) == 0;
}

// --keep-offload-dir DIR: the capture replaces DIR/offload-disk, DIR/offload-mixed and the torch
// drivers' DIR/torch-POLICY; each may already be an offload folder (index.json and .dat files,
// from an earlier capture or accelerate), never anything else, which it would delete.
void check_keep_offload_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw std::invalid_argument("--keep-offload-dir: " + dir.string() + " exists and is not a folder");
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("offload-", 0) != 0 && name.rfind("torch-", 0) != 0) continue;
    if (!e.is_directory()) {
      throw std::invalid_argument("--keep-offload-dir: " + e.path().string() +
                                  " is in the way of the capture's offload folders; name another folder or move it");
    }
    for (const auto& f : fs::recursive_directory_iterator(e.path(), ec)) {
      const std::string fname = f.path().filename().string();
      const bool offload_file = f.is_regular_file() && (fname == "index.json" || f.path().extension() == ".dat") &&
                                !is_sqlite_file(f.path());  // a capture named *.dat is no tensor
      const bool driver_folder = f.is_directory() && name.rfind("torch-", 0) == 0;
      if (!offload_file && !driver_folder)
        throw std::invalid_argument("--keep-offload-dir: " + e.path().string() + " holds " + f.path().string() +
                                    ", which is not an offload folder's (index.json, *.dat): the capture would delete "
                                    "it when it rewrites the folder; name another folder or move it");
    }
  }
}

// The disk-offload folders' parent: --keep-offload-dir, else a folder of this capture's own
// under hookscope's cache ($HOOKSCOPE_CACHE, else $XDG_CACHE_HOME/hookscope, else
// ~/.cache/hookscope; the temporary folder without a home), removed when the capture ends.
fs::path offload_folder_of(const CaptureArgs& a, const fs::path& out) {
  if (!a.keep_offload_dir.empty()) {
    check_keep_offload_dir(a.keep_offload_dir);
    return fs::absolute(a.keep_offload_dir);
  }
  fs::path cache;
  if (const char* c = std::getenv("HOOKSCOPE_CACHE"); c && *c) cache = c;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) cache = fs::path(x) / "hookscope";
  else if (const char* h = std::getenv("HOME"); h && *h) cache = fs::path(h) / ".cache" / "hookscope";
  else cache = fs::temp_directory_path() / "hookscope";
  std::error_code ec;
  if (fs::exists(cache, ec) && !fs::is_directory(cache, ec))
    throw std::invalid_argument("hookscope's cache " + cache.string() +
                                " (where the disk-offload folders go; $HOOKSCOPE_CACHE) is not a folder");
  return fs::absolute(cache / "offload" / (out.stem().string() + "-" + std::to_string(::getpid())));
}

// Removes what the capture wrote into its offload folder (and the folder itself when it is
// the capture's own); --keep-offload-dir keeps all of it. Never throws. From the interrupt
// handler the capture thread may still be writing .dat files there: the folder is first renamed
// out of its way (its next write fails instead of landing in a half-removed folder), and one it
// re-created meanwhile is removed too.
void remove_offload_folder(const fs::path& dir, bool keep) {
  if (keep || dir.empty()) return;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return;
    const fs::path doomed = dir.string() + ".removing-" + std::to_string(attempt);
    fs::rename(dir, doomed, ec);
    fs::remove_all(ec ? dir : doomed, ec);
  }
}

engines::LibTorchEngineOptions engine_options(const CaptureArgs& a, const fs::path& out) {
  if (a.repeats < 1 || a.warmup < 0 || a.max_new_tokens < 1)
    throw std::invalid_argument("--repeats must be >= 1, --warmup >= 0 and --max-new-tokens >= 1");
  engines::LibTorchEngineOptions o;
  o.model = a.model;
  o.dtype = models::parse_dtype(a.dtype, "--dtype");
  o.accelerators = a.devices;
  if (!a.max_memory.empty())
    o.max_memory = parse_max_memory_option(a.max_memory, a.devices - 1, "--devices " + std::to_string(a.devices), false);
  output::refuse_invalid_utf8("--prompt", a.prompt);
  o.prompt = a.prompt;
  o.prompt_ids = parse_prompt_ids(a.prompt_ids);
  if (a.prompt_ids_given && o.prompt_ids.empty()) throw std::invalid_argument("--prompt-ids: no token ids given");
  o.max_new_tokens = a.max_new_tokens;
  o.repeats = a.repeats;
  o.warmup = a.warmup;
  o.offload_dir = offload_folder_of(a, out);
  return o;
}

engines::TorchEngineOptions torch_options(const CaptureArgs& a, const engines::LibTorchEngineOptions& lt, const fs::path& work) {
  engines::TorchEngineOptions o;
  o.python = a.python.empty() ? env_or("HOOKSCOPE_PYTHON", HOOKSCOPE_DEFAULT_PYTHON) : a.python;
  o.package_dir = env_or("HOOKSCOPE_DRIVER_PATH", HOOKSCOPE_DRIVER_DIR);
  o.model = a.model;
  o.dtype = a.dtype;
  o.devices = a.devices;
  o.prompt = a.prompt;
  o.prompt_ids = lt.prompt_ids;
  o.max_new_tokens = a.max_new_tokens;
  o.repeats = a.repeats;
  o.warmup = a.warmup;
  o.cache_implementation = a.cache_implementation;
  o.backend = a.backend == "inductor" ? "" : a.backend;
  for (const auto& t : a.accelerate) {
    const AccelerateTree tree = parse_accelerate_tree(t);
    if (!o.accelerate_trees.emplace(tree.name, tree.path).second)
      throw std::invalid_argument("--accelerate: the name '" + tree.name + "' is taken");
  }
  o.work_dir = work;
  o.keep_work_dir = !a.keep_driver_files.empty();
  if (!a.keep_offload_dir.empty()) o.offload_dir = lt.offload_dir;
  o.threads = a.threads;
  return o;
}

// Whether the LibTorch engine refuses the checkpoint: config.json names an architecture the port
// does not have (one naming none is left to the port's own message).
bool libtorch_refuses(const models::ConfigSummary& m) { return !m.ported && !m.architecture.empty(); }

std::string not_ported(const std::string& engine, const models::ConfigSummary& m, const fs::path& config) {
  return engine + ": " + config.string() + " names " + m.architecture +
         ", which the LibTorch engine does not port (it ports " + models::ported_architectures() +
         "); capture it with --engine torch, which runs transformers' own model for any architecture "
         "AutoModelForCausalLM loads";
}

bool driver_python_found(const CaptureArgs& a) {
  const std::string py = a.python.empty() ? env_or("HOOKSCOPE_PYTHON", HOOKSCOPE_DEFAULT_PYTHON) : a.python;
  return !py.empty() && fs::exists(py) &&
         fs::is_directory(fs::path(env_or("HOOKSCOPE_DRIVER_PATH", HOOKSCOPE_DRIVER_DIR)) / "hookscope_torch");
}

// Which engines run: --engine, or both when the driver's Python is there. An architecture the
// LibTorch engine does not port is refused to it, and runs in the torch engine alone by default.
std::pair<bool, bool> engines_of(const CaptureArgs& a, const models::ConfigSummary& model, const fs::path& config) {
  if (a.engine == "torch") return {false, true};
  const bool refused = libtorch_refuses(model);
  if (refused && !a.engine.empty()) throw std::invalid_argument(not_ported("--engine " + a.engine, model, config));
  if (a.engine == "libtorch") return {true, false};
  if (a.engine == "both") return {true, true};
  const bool torch = driver_python_found(a);
  if (refused && !torch)
    throw std::invalid_argument(not_ported("no Python with the torch engine's driver (--python)", model, config));
  if (refused)
    std::fprintf(stderr, "[hookscope] %s is not ported to the libtorch engine: running the torch engine only\n",
                 output::terminal_text(model.architecture, false).c_str());
  else if (!torch)
    std::fprintf(stderr, "[hookscope] no Python with the torch engine's driver: running the libtorch engine only\n");
  return {!refused, torch};
}

// --prompt-ids against the model's embedding, once for both engines (they take the ids as given):
// the LibTorch engine's config when it runs, else config.json's vocab_size whatever the architecture.
void check_prompt_ids_of(const models::ConfigSummary& model, const fs::path& config, bool libtorch,
                         const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  try {
    if (libtorch) models::check_prompt_ids(models::ModelConfig::from_file(config), ids);
    else if (model.vocab_size) models::check_prompt_ids(*model.vocab_size, config, ids);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--prompt-ids: ") + e.what());
  }
}

// What the capture runs with, as stored in the file and printed by every report.
nlohmann::json settings_of(const CaptureArgs& a, const std::vector<engines::Engine*>& engines,
                           const engines::LibTorchEngineOptions& o) {
  nlohmann::json names = nlohmann::json::array(), accelerators = nlohmann::json::array();
  for (const engines::Engine* e : engines) names.push_back(e->name());
  for (const auto& acc : engines.front()->accelerators())
    accelerators.push_back(std::to_string(acc.index) + ": " + acc.name);
  return {{"command", storage::command_line()},
          {"date", storage::utc_now_iso8601()},
          {"machine", storage::machine_info()},
          {"model", a.model},
          {"prompt", o.prompt_ids.empty() ? nlohmann::json(a.prompt) : nlohmann::json(nullptr)},
          {"prompt_ids", o.prompt_ids.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.prompt_ids)},
          {"max_new_tokens", a.max_new_tokens},
          {"warmup", a.warmup},
          {"repeats", a.repeats},
          {"interleaving",
           "per compiled run: warm-ups, then each measured round is an eager generate and a compiled generate "
           "of the same dispatched model (A B A B); eager runs measure back to back after their warm-ups"},
          {"engines", names},
          {"scenarios", a.scenarios},
          {"policies", a.policies},
          {"modes", a.modes},
          {"fullgraph", a.fullgraph},
          {"devices", a.devices},
          {"accelerators", accelerators},
          {"max_memory", a.max_memory.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.max_memory)},
          {"dtype", a.dtype},
          {"backend", a.backend.empty() ? "inductor" : a.backend},
          {"cache_implementation", a.cache_implementation},
          {"threads", a.threads > 0 ? nlohmann::json(a.threads) : nlohmann::json(nullptr)},
          {"versions", {{"hookscope", "0.1.0"}}}};  // the torch each engine ran: RUNS.versions
}

// A folder of this process's own under the temporary folder (mkdtemp: a name nobody could have
// planted a link or a folder at beforehand). Throws std::runtime_error naming it.
fs::path new_temporary_folder(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error("cannot create a temporary folder " + tmpl + ": " + std::strerror(errno));
  return tmpl;
}

void remove_temporary_folder(const fs::path& dir) {
  std::error_code ec;
  if (!dir.empty()) fs::remove_all(dir, ec);
}

// After a torch driver failed: the temporary folder keeps only its drivers' logs (DIR/POLICY/
// driver.log, which the errors named), its traces and compile logs removed; removed whole when
// it holds no log. Says where they are.
void keep_driver_logs(const fs::path& dir) {
  std::error_code ec;
  bool any = false;
  for (const auto& policy : fs::directory_iterator(dir, ec))
    if (policy.is_directory(ec) && fs::is_regular_file(policy.path() / "driver.log", ec)) {
      any = true;
      for (const auto& f : fs::directory_iterator(policy.path(), ec))
        if (f.path().filename() != "driver.log") fs::remove_all(f.path(), ec);
    } else {
      fs::remove_all(policy.path(), ec);
    }
  if (!any) return remove_temporary_folder(dir);
  std::fprintf(stderr, "[hookscope] the torch drivers' logs are kept in %s (POLICY/driver.log; remove it when read)\n",
               output::terminal_text(dir.string()).c_str());
}

// SIGINT / SIGTERM: the capture is finalized onto --out (the run in progress stays incomplete),
// the children go, the temporary folders are removed, and the process exits 128 + N.
std::function<void(int)> interrupt_handler(output::CaptureOutput& output, const fs::path& offload_dir, bool keep_offload,
                                           const fs::path& work, bool keep_work) {
  return [&output, offload_dir, keep_offload, work, keep_work](int signo) {
    const std::string name = output::signal_name(signo);
    std::fprintf(stderr, "\n[hookscope] %s: ending the capture (the run in progress stays incomplete)\n", name.c_str());
    std::fflush(stderr);
    // The capture is finished first, then the drivers are ended: a driver ended before would be
    // recorded by the capture thread as the run in progress failing.
    std::string why;
    const fs::path file = output.finish_interrupted(name, why);
    output::terminate_child_processes(2000);
    remove_offload_folder(offload_dir, keep_offload);
    if (!keep_work) remove_temporary_folder(work);
    if (!file.empty())
      std::fprintf(stderr, "[hookscope] wrote %s (%s)\n", output::terminal_text(file.string()).c_str(), output::terminal_text(why).c_str());
    else
      std::fprintf(stderr, "[hookscope] interrupted by %s: %s\n", name.c_str(), why.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(128 + signo);
  };
}

// --keep-driver-files DIR: a folder of this capture's own. One holding an earlier capture's
// traces and TORCH_TRACE logs would be read back with this one's (every compile counted twice),
// and the model's folder is an input.
void check_driver_files_folder(const fs::path& dir, const fs::path& model_dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw std::invalid_argument("--keep-driver-files: " + dir.string() + " exists and is not a folder");
  output::refuse_output_in_model_folder("--keep-driver-files", dir, {model_dir}, "--model", /*holds_too=*/true);
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec))
    throw std::invalid_argument("--keep-driver-files: " + dir.string() +
                                " is not empty (an earlier capture's logs there would be read with this one's); "
                                "name a new or empty folder");
  // The drivers write there: a folder that cannot be written (read-only, another user's) is
  // refused now, naming the flag, not as each run's failure.
  fs::create_directories(dir, ec);
  if (ec)
    throw std::invalid_argument("--keep-driver-files: cannot create " + dir.string() + " (" + ec.message() +
                                "); name a folder you can write");
  const fs::path probe = dir / ".hookscope-write-check";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::invalid_argument("--keep-driver-files: " + dir.string() + " cannot be written (" +
                                std::strerror(errno) + "); name a folder you can write");
  ::close(fd);
  ::unlink(probe.c_str());
}

int run_capture(const CaptureArgs& a) {
  engines::Matrix matrix = matrix_of(a);
  const fs::path out(a.out);
  // A --model folder that is no checkpoint is named before anything is said or made.
  const fs::path model_dir = models::resolve_model_path(a.model), config = model_dir / "config.json";
  if (std::error_code ec; !fs::is_regular_file(config, ec))
    throw std::invalid_argument("--model: " + config.string() +
                                ": cannot open (no such file): not a Hugging Face checkpoint folder");
  const models::ConfigSummary model = models::summarize_config(config);
  const auto [use_libtorch, use_torch] = engines_of(a, model, config);
  if (!a.accelerate.empty() && !use_torch) throw std::invalid_argument("--accelerate needs the torch engine (--engine torch or both)");
  for (const auto& t : a.accelerate) matrix.accelerate_trees.push_back(parse_accelerate_tree(t).name);
  engines::LibTorchEngineOptions options = engine_options(a, out);
  options.log = [](const std::string& level, const std::string& msg) {
    if (level == "WARNING" && msg.find("offloaded to the") == std::string::npos)
      std::fprintf(stderr, "[accelerate WARNING] %s\n", msg.c_str());
  };
  fs::path work = a.keep_driver_files;  // the torch drivers' files; a new temporary folder unless kept
  // --out is checked and locked before anything slow: a second capture on it fails at once.
  output::CaptureOutputOptions oo;
  oo.force_overwrite = a.force_overwrite;
  oo.model_dir = model_dir;
  check_prompt_ids_of(model, config, use_libtorch, options.prompt_ids);
  oo.offload_dir = options.offload_dir;
  if (!a.keep_driver_files.empty()) check_driver_files_folder(work, oo.model_dir);
  output::CaptureOutput output(out, oo);
  if (use_torch && work.empty()) work = new_temporary_folder("hookscope-torch-");
  const bool keep_offload = !a.keep_offload_dir.empty();
  output::InterruptWatch watch(interrupt_handler(output, options.offload_dir, keep_offload, work, !a.keep_driver_files.empty()));
  if (matrix_offloads_to_disk(matrix))
    std::fprintf(stderr, "[hookscope] disk offload folder: %s (%s)\n", output::terminal_text(options.offload_dir.string()).c_str(),
                 keep_offload ? "kept: --keep-offload-dir" : "removed when the capture ends; --keep-offload-dir DIR keeps one");
  if (a.threads > 0) at::set_num_threads(a.threads);
  std::unique_ptr<engines::TorchEngine> torch;
  std::unique_ptr<engines::LibTorchEngine> libtorch;
  int failures = 0;
  try {
    if (use_torch) torch = std::make_unique<engines::TorchEngine>(torch_options(a, options, work));
    if (use_libtorch) libtorch = std::make_unique<engines::LibTorchEngine>(options);
    std::vector<engines::Engine*> engines;
    if (libtorch) engines.push_back(libtorch.get());
    if (torch) engines.push_back(torch.get());
    failures = engines::run_matrix(engines, matrix, output, settings_of(a, engines, options));
  } catch (...) {
    std::string error = "unknown error";
    try {
      throw;
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
    }
    const fs::path kept = output.abandon(error);
    torch.reset();
    libtorch.reset();
    remove_offload_folder(options.offload_dir, keep_offload);
    if (a.keep_driver_files.empty()) keep_driver_logs(work);  // the error may be a driver's, naming its log
    if (!kept.empty())
      std::fprintf(stderr, "[hookscope] the capture stopped; the runs recorded so far are in %s (%s is left as it was)\n",
                   output::terminal_text(kept.string()).c_str(), output::terminal_text(fs::path(out).string()).c_str());
    throw;
  }
  torch.reset();  // the drivers finish before their folder goes
  libtorch.reset();  // and the models before the offload folder their weights map
  remove_offload_folder(options.offload_dir, keep_offload);
  if (keep_offload)
    std::fprintf(stderr, "[hookscope] the disk offload folders are in %s\n", output::terminal_text(options.offload_dir.string()).c_str());
  if (a.keep_driver_files.empty() && failures && use_torch) keep_driver_logs(work);  // a failed cell's error names its log
  else if (a.keep_driver_files.empty()) remove_temporary_folder(work);
  else if (use_torch)
    std::fprintf(stderr, "[hookscope] the torch driver's files (traces, compile logs, logs) are in %s\n",
                 output::terminal_text(work.string()).c_str());
  return failures ? 1 : 0;
}

}  // namespace

CLI::App* add_capture_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<CaptureArgs>();
  auto* c = app.add_subcommand("capture", "Run the scenario x policy x mode matrix and record it into SQLite");
  c->option_defaults()->always_capture_default();  // --help shows every default
  c->add_option("--model", a->model, "HF checkpoint folder, or a model id in the offline HF cache")->required();
  c->add_option("--scenarios", a->scenarios, "Comma-separated: sharded, cpu-offload, disk-offload, mixed")
      ->check(list_of({"sharded", "cpu-offload", "disk-offload", "mixed"}));
  c->add_option("--policies", a->policies, "Comma-separated: whole-hook, offload-only")
      ->check(list_of({"whole-hook", "offload-only"}));
  c->add_option("--modes", a->modes, "Comma-separated: eager, default, reduce-overhead")
      ->check(list_of({"eager", "default", "reduce-overhead"}));
  c->add_option("--fullgraph", a->fullgraph, "both | on | off (fullgraph runs for the capturing modes)")
      ->check(one_of({"both", "on", "off", "true", "false"}));
  c->add_option("--devices", a->devices, "Logical accelerators (emulated when fewer real ones)")->check(CLI::Range(1, 64));
  c->add_option("--max-memory", a->max_memory, "Budgets for the sharded map, e.g. 0=200MB,1=200MB,cpu=4GiB")
      ->check(max_memory_spec());
  auto* prompt = c->add_option("--prompt", a->prompt, "Prompt text (encoded with the checkpoint's tokenizer.json)");
  auto* prompt_ids =
      c->add_option("--prompt-ids", a->prompt_ids, "Comma-separated prompt token ids instead of --prompt")
          ->excludes(prompt)
          ->check(CLI::Validator(
              [](std::string& v) {  // malformed lists are usage errors (exit 2), like other bad values
                try {
                  parse_prompt_ids(v);
                  return std::string();
                } catch (const std::invalid_argument& e) {
                  const std::string m = e.what();
                  return m.rfind("--prompt-ids: ", 0) == 0 ? m.substr(14) : m;
                }
              },
              "IDS"));
  c->add_option("--max-new-tokens", a->max_new_tokens, "Tokens per greedy decode")->check(CLI::Range(1, 1 << 20));
  c->add_option("--repeats", a->repeats, "Measured decodes per run")->check(CLI::Range(1, 100000));
  c->add_option("--warmup", a->warmup, "Unmeasured decodes first")->check(CLI::Range(0, 100000));
  c->add_option("--dtype", a->dtype, "Weight dtype")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  c->add_option("--engine", a->engine,
                 "torch (real transformers + accelerate + torch.compile in a child Python), libtorch (hookscope's "
                 "C++ port) or both; default: both when the driver's Python is there")
      ->check(one_of({"torch", "libtorch", "both"}));
  c->add_option("--python", a->python, "Python of the torch engine (default: $HOOKSCOPE_PYTHON, else the project's .venv)");
  c->add_option("--accelerate", a->accelerate,
                "NAME=PATH: run an accelerate source tree (the folder holding accelerate/) as one more policy; "
                "repeatable (torch engine)");
  c->add_option("--cache-implementation", a->cache_implementation,
                "transformers' KV cache for generate (torch engine): dynamic, or static (the path it recommends with torch.compile)")
      ->check(one_of({"dynamic", "static"}));
  c->add_option("--backend", a->backend,
                "torch.compile backend of the capturing modes (torch engine): inductor, or Dynamo's eager / aot_eager "
                "(graph breaks and fullgraph do not depend on it; they compile in seconds)")
      ->check(one_of({"inductor", "eager", "aot_eager"}));
  c->add_option("--threads", a->threads,
                 "CPU threads for torch's intra-op pool in both engines (default: torch's, one per core; on a "
                 "shared machine 1 is often faster and steadier)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--keep-driver-files", a->keep_driver_files,
                "Keep the torch engine's traces and compile logs in DIR (default: a temporary folder, removed; "
                "the offload folders are --keep-offload-dir's)");
  c->add_option("--keep-offload-dir", a->keep_offload_dir,
                "Write the disk-offload folders (disk-offload, mixed) into DIR and keep them (default: a folder of the "
                "capture's own under ~/.cache/hookscope/offload, removed when the capture ends)");
  c->add_option("-o,--out", a->out,
                "SQLite capture to write: runs go to OUT.PID.partial beside it, renamed onto OUT when the "
                "capture finishes (or is interrupted)");
  c->add_flag("--force-overwrite", a->force_overwrite,
              "Replace an existing --out (once the new capture has finished); without it an existing file is refused");
  c->footer("Example:\n  hookscope capture --model DIR --devices 4 --max-new-tokens 8 --repeats 2 --warmup 1 --out out/demo.sqlite");
  c->callback([a, prompt_ids, &run_selected] {
    a->prompt_ids_given = prompt_ids->count() > 0;
    run_selected = [a] { return run_capture(*a); };
  });
  return c;
}

}  // namespace hs::cli

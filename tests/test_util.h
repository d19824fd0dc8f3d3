// Helpers shared by the GoogleTest suites: where fixtures and oracles live, running the Python
// oracles (transformers, tokenizers, accelerate) and the hookscope CLI as subprocesses.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hs::test {

// The build's own paths, each overridable from the environment for test binaries run where the
// checkout and build folder live elsewhere (tools/gpu_check.sh on the device machine):
// $HOOKSCOPE_SOURCE_DIR, $HOOKSCOPE_BINARY_DIR (scratch and fixtures), $HOOKSCOPE_CLI.

/// Repository root (compile-time).
std::filesystem::path source_dir();
/// Python interpreter with the oracle packages: $HOOKSCOPE_PYTHON, else the configured venv.
std::string python();
/// A fresh, empty directory under the build tree, test-scratch/SUITE.TEST/NAME for the running
/// test (so tests running at once never share one); emptied on the next call with that name.
std::filesystem::path scratch_dir(const std::string& name);
/// Cache of fixtures made by the Python oracles; shared by all tests of one build.
std::filesystem::path fixture_dir();
/// The converted SmolLM2-135M-Instruct HF folder ($HOOKSCOPE_SAMPLE or ~/.cache/hookscope/...).
std::filesystem::path sample_dir();
/// Path of the built `hookscope` CLI.
std::string cli();

struct ProcResult {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};
/// Runs argv (no shell) and captures stdout/stderr.
ProcResult run(const std::vector<std::string>& argv);
/// Starts argv (no shell) in the background, its stdout and stderr to `log`; returns its pid.
/// With `own_process_group` it leads a new process group, so that kill(-pid, SIG) reaches it
/// and everything it started, as a terminal's Ctrl+C reaches a foreground job.
pid_t start(const std::vector<std::string>& argv, const std::filesystem::path& log, bool own_process_group = false);
/// Polls `ready` every 200 ms while process `pid` (a child of this one) runs, for up to
/// `timeout_s`; true once `ready` is.
bool wait_while_running(pid_t pid, const std::function<bool()>& ready, int timeout_s = 120);
/// Runs `fn` holding the fixture folder's lock: fixture generation is serialised across the
/// parallel ctest processes (each gtest case is its own process).
void with_fixture_lock(const std::function<void()>& fn);
/// Runs the built `hookscope` CLI with `args`.
ProcResult hookscope(std::vector<std::string> args);
/// The built `hookscope` CLI's path ($HOOKSCOPE_CLI when set).
std::string cli();
/// The interpreter the oracles run under and the versions of torch, transformers, accelerate,
/// tokenizers and safetensors it imports: the key of every cached oracle result. Throws
/// std::runtime_error naming the interpreter (and its stderr) when it cannot run.
const std::string& oracle_environment();
/// Runs tests/oracles/<script> with the oracle Python; throws naming the interpreter and its
/// stderr on a non-zero exit.
std::string run_oracle(const std::string& script, const std::vector<std::string>& args);
/// Copies the capture `from` to `to` (replacing it) and runs `sql` on the copy: a hand-edited or
/// damaged capture for a test. Throws std::runtime_error with SQLite's message when `sql` fails.
std::filesystem::path edited_copy(const std::filesystem::path& from, const std::filesystem::path& to,
                                  const std::string& sql);
/// Reads a whole file.
std::string read_file(const std::filesystem::path& p);
/// Whether the process whose pid the file `pid_file` holds has ended (gone, or a zombie), waiting
/// up to 5 s for it; "" when it has, else its /proc state letter.
std::string process_still_running(const std::filesystem::path& pid_file);
/// Parses a JSON file.
nlohmann::json read_json(const std::filesystem::path& p);
/// The first row of a Markdown pipe table in `md` that GFM would split into another number of
/// cells than its header (pipes not escaped as `\|` count, in code spans too; `\\|` is an escaped
/// backslash and a border), or a line outside
/// any table that is a heading beginning with `needle` (text injected after a newline); "" if none.
std::string broken_markdown_line(const std::string& md, const std::string& needle);

/// Runs `make_fixtures` once per oracle environment (guarded by a lock + a stamp of the script
/// and oracle_environment()): tiny random checkpoints written by transformers and their
/// reference logits. Returns fixture_dir()/<name>.
std::filesystem::path tiny_checkpoint(const std::string& name);

/// Runs tests/oracles/<script> --out <fixture_dir()/name> once (locked, reused by later test
/// processes until the script, its arguments or oracle_environment() change); its stdout is
/// kept as result.json in that folder. Returns the folder.
std::filesystem::path cached_oracle(const std::string& name, const std::string& script,
                                    const std::vector<std::string>& extra_args = {});

/// transformers' greedy tokens (fp32, eager attention; exactly `n` argmax steps, no eos stop,
/// as hs::models::greedy_generate by default) for `prompt` on the HF folder `model`, through
/// tests/oracles/hf_generate.py --prompt-ids (cached like cached_oracle).
std::vector<int64_t> transformers_greedy(const std::filesystem::path& model, const std::vector<int64_t>& prompt,
                                         int64_t n);

}  // namespace hs::test

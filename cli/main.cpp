// hookscope command-line interface.
//
// Exit codes: 0 success; 1 runtime failure (bad checkpoint, config, tokenizer ...);
// 2 usage error (unknown flag, missing argument).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "models/config.h"
#include "models/generate.h"
#include "models/loader.h"
#include "models/tokenizer.h"
#include "cli/capture_command.h"
#include "cli/cli_util.h"
#include "output/text.h"
#include "cli/explain_command.h"
#include "cli/export_command.h"
#include "cli/import_command.h"
#include "cli/plan_command.h"
#include "cli/profile_command.h"
#include "cli/report_command.h"
#include "cli/stats_command.h"
#include "cli/view_command.h"

namespace {

using namespace hs::models;

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int64_t max_new_tokens = 32;
  std::string dtype = "f32";
  bool json = false;
  bool static_cache = false;
  bool ignore_eos = false;
};

int run_generate(const GenerateArgs& a) {
  hs::output::refuse_invalid_utf8("--prompt", a.prompt);
  LoadOptions lo;
  lo.dtype = parse_dtype(a.dtype, "--dtype");
  LoadedModel lm = load_model(a.model, lo);
  const auto tok_path = lm.dir / "tokenizer.json";
  Tokenizer tok = Tokenizer::from_file(tok_path);
  std::vector<int64_t> prompt_ids = tok.encode(a.prompt, /*add_special_tokens=*/true);
  if (prompt_ids.empty()) throw std::invalid_argument("--prompt encodes to no tokens; give a non-empty prompt");
  try {
    check_prompt_ids(lm.config, prompt_ids);  // a tokenizer with more tokens than the embedding has rows
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--prompt, encoded by " + tok_path.string() + ": " + e.what());
  }

  // As transformers' generate: past the model's trained context the output is not what it
  // was trained for (RoPE positions it never saw); said, not refused.
  if (const int64_t limit = lm.config.max_position_embeddings;
      limit > 0 && static_cast<int64_t>(prompt_ids.size()) + a.max_new_tokens > limit)
    std::fprintf(stderr,
                 "[hookscope] warning: %zu prompt tokens + --max-new-tokens %lld exceed the model's "
                 "max_position_embeddings (%lld, config.json): positions past it are outside what the model was "
                 "trained on\n",
                 prompt_ids.size(), static_cast<long long>(a.max_new_tokens), static_cast<long long>(limit));
  GenerateOptions go;
  go.max_new_tokens = a.max_new_tokens;
  go.static_cache = a.static_cache;
  if (!a.ignore_eos) go.eos_token_ids = lm.generation.eos_token_ids;

  const bool stream = !a.json && isatty(STDOUT_FILENO);
  // Streaming as text-generation-inference does it: decode only the tokens since the last
  // printed boundary (`prefix` .. end) and print what they add to the text of `prefix` ..
  // `read`, so each new token costs a few tokens' decode, not the whole generation's.
  std::vector<int64_t> so_far;
  size_t prefix = 0, read = 0;
  TokenCallback cb;
  if (stream) {
    std::cout << a.prompt << std::flush;
    cb = [&](int64_t, int64_t t) {
      so_far.push_back(t);
      const std::vector<int64_t> head(so_far.begin() + prefix, so_far.begin() + read), all(so_far.begin() + prefix, so_far.end());
      const std::string before = tok.decode(head, true), text = tok.decode(all, true);
      // Print only complete UTF-8: hold back while the decode ends in a replacement char.
      if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return;
      if (text.size() > before.size() && text.compare(0, before.size(), before) == 0) {
        std::cout << text.substr(before.size()) << std::flush;
        prefix = read;
        read = so_far.size();
      }
    };
  }
  GenerateResult r = greedy_generate(*lm.model, prompt_ids, go, cb);
  const std::string text = tok.decode(r.new_ids, /*skip_special_tokens=*/true);
  if (a.json) {
    nlohmann::json j{{"prompt_ids", r.prompt_ids}, {"new_ids", r.new_ids}, {"text", text}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  if (stream) {
    // What the stream held back (an incomplete character at the end).
    const std::vector<int64_t> head(so_far.begin() + prefix, so_far.begin() + read), all(so_far.begin() + prefix, so_far.end());
    const std::string before = tok.decode(head, true), rest = tok.decode(all, true);
    if (rest.size() > before.size() && rest.compare(0, before.size(), before) == 0) std::cout << rest.substr(before.size());
    std::cout << "\n";
  } else {
    std::cout << a.prompt << text << "\n";
  }
  // The first new token comes from the prefill; the decode steps are the tokens after it. Without
  // any (--max-new-tokens 0 or 1, or an end-of-sequence first) there is no rate to give.
  const double decode_s = r.decode_ns / 1e9;
  const size_t steps = r.new_ids.size() > 0 ? r.new_ids.size() - 1 : 0;
  char decode[64] = "no decode step";
  if (steps > 0) std::snprintf(decode, sizeof decode, "decode %.1f tok/s", decode_s > 0 ? steps / decode_s : 0.0);
  std::fprintf(stderr, "[hookscope] %s, %s, %zu prompt + %zu new token%s; prefill %.1f ms, %s\n",
               lm.config.architecture.c_str(), dtype_short_name(*lo.dtype).c_str(), r.prompt_ids.size(),
               r.new_ids.size(), r.new_ids.size() == 1 ? "" : "s", r.prefill_ns / 1e6, decode);
  return 0;
}

// What a command printed reaches its reader or the exit status says it did not (stdout on a
// full disk or /dev/full: exit 1, the reason named), as coreutils' close_stdout does.
int finish_stdout(int rc) {
  // The command has finished and its result stands: a SIGINT / SIGTERM during the process's
  // teardown (LibTorch's static destructors take about 0.15 s) must not turn it into a death by
  // signal. Blocked, it stays pending until the process exits.
  sigset_t interrupts;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  sigaddset(&interrupts, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &interrupts, nullptr);
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;  // the reason, when this last flush is what failed
  if (std::cout.good() && flushed && !std::ferror(stdout)) return rc;
  std::cerr << "hookscope: error: cannot write to standard output" << (err ? std::string(": ") + std::strerror(err) : "")
            << "\n";
  return rc == 0 ? 1 : rc;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hookscope: profile and diagnose models dispatched over several devices by accelerate-style hooks"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hookscope ") + HOOKSCOPE_VERSION + " (built against LibTorch " +
                                        TORCH_VERSION + ")");
  app.footer("Examples:\n  hookscope generate --model ~/.cache/hookscope/SmolLM2-135M-Instruct "
             "--prompt \"The capital of France is\" --max-new-tokens 16\n"
             "  hookscope generate --model Qwen/Qwen3-0.6B --prompt Hi --json   (offline HF cache)\n"
             "  hookscope plan --model DIR --max-memory 0=200MB,1=200MB,cpu=4GiB --json\n"
             "  hookscope capture --model DIR --devices 4 --max-new-tokens 8 --repeats 2 --warmup 1 --out out/demo.sqlite\n"
             "  hookscope import trace.json.gz --compile-log torch_trace/ -o imported.sqlite\n"
             "  hookscope report out/demo.sqlite --markdown out/report.md --json out/report.json\n"
             "  hookscope stats out/demo.sqlite --report hook_time_by_device\n"
             "  hookscope view out/demo.sqlite\n"
             "  hookscope export out/demo.sqlite --run 3 --format chrome -o out/run3.json");

  GenerateArgs ga;
  auto* gen = app.add_subcommand("generate", "Greedy-decode a continuation of a prompt");
  gen->add_option("--model", ga.model, "HF checkpoint folder, or a model id in the offline HF cache")->required();
  gen->add_option("--prompt", ga.prompt, "Prompt text")->required();
  gen->add_option("--max-new-tokens", ga.max_new_tokens, "Tokens to generate")->check(CLI::Range(0, 1 << 20));
  gen->add_option("--dtype", ga.dtype, "Weight dtype")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  gen->add_flag("--json", ga.json, "Print {\"prompt_ids\", \"new_ids\", \"text\"} as JSON");
  gen->add_flag("--static-cache", ga.static_cache, "Use a preallocated KV cache (StaticCache)");
  gen->add_flag("--ignore-eos", ga.ignore_eos, "Do not stop at the end-of-sequence token");
  gen->footer("Example:\n  hookscope generate --model DIR --prompt \"The capital of France is\" --max-new-tokens 16 --json");

  std::function<int()> run_plan, run_capture, run_import, run_report, run_explain, run_view, run_stats, run_export, run_profile;
  auto* plan = hs::cli::add_plan_command(app, run_plan);
  auto* capture = hs::cli::add_capture_command(app, run_capture);
  auto* import = hs::cli::add_import_command(app, run_import);
  const auto [own_args, profiled] = hs::cli::split_profile_command(std::vector<std::string>(argv + 1, argv + argc));
  auto* profile = hs::cli::add_profile_command(app, run_profile, profiled);
  auto* report = hs::cli::add_report_command(app, run_report);
  auto* explain = hs::cli::add_explain_command(app, run_explain);
  auto* stats = hs::cli::add_stats_command(app, run_stats);
  auto* view = hs::cli::add_view_command(app, run_view);
  auto* exp = hs::cli::add_export_command(app, run_export);
  hs::cli::check_numbers(app);  // "--run: 'three' is not a whole number", for every option taking a number

  const std::vector<std::string> args(argv + 1, argv + argc);
  if (const std::string unknown = hs::cli::unknown_command(app, args); !unknown.empty()) {
    std::cerr << unknown << "\n";
    return 2;
  }
  try {
    app.parse(std::vector<std::string>(own_args.rbegin(), own_args.rend()));  // CLI11 takes them reversed
    hs::cli::refuse_empty_values(app);
  } catch (const CLI::CallForHelp& e) {  // help and version: written out, or an error (stdout /dev/full)
    return finish_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return finish_stdout(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return finish_stdout(app.exit(e));
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    const std::string hint = hs::cli::did_you_mean(app, args);
    if (!hint.empty()) std::cerr << hint << "\n";
    return 2;
  }
  try {
    int rc = 2;
    if (gen->parsed()) rc = run_generate(ga);
    else if (plan->parsed()) rc = run_plan();
    else if (capture->parsed()) rc = run_capture();
    else if (import->parsed()) rc = run_import();
    else if (profile->parsed()) rc = run_profile();
    else if (report->parsed()) rc = run_report();
    else if (explain->parsed()) rc = run_explain();
    else if (stats->parsed()) rc = run_stats();
    else if (view->parsed()) rc = run_view();
    else if (exp->parsed()) rc = run_export();
    return finish_stdout(rc);
  } catch (const std::filesystem::filesystem_error& e) {  // named by the flag that gave the path
    std::cerr << "hookscope: error: " << hs::cli::filesystem_error_message(e, args) << "\n";
    return 1;
  } catch (const c10::Error& e) {  // LibTorch's message without its C++ backtrace
    std::cerr << "hookscope: error: " << hs::output::terminal_text(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "hookscope: error: " << hs::output::terminal_text(e.what()) << "\n";
    return 1;
  }
  return 2;
}

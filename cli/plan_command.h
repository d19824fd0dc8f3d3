// `hookscope plan`: accelerate's `infer_auto_device_map` for a checkpoint, without loading it
// onto any device.
//
//   hookscope plan --model DIR|ID [--max-memory 0=1GiB,1=1GiB,cpu=4GiB] [--no-split CLASS,...]
//                  [--dtype f32|bf16|f16] [--offload-buffers] [--fallback-allocation]
//                  [--balanced [--low-zero]] [--verbose] [--json]
//
// --json prints {"device_map": {...}, "module_sizes": {...}, "max_memory": {...}} with
// accelerate's insertion order and values (ints for accelerators, strings otherwise; sizes in
// bytes); without it a readable table. accelerate's warnings and info lines go to stderr.
// Defaults: --no-split = the model's `_no_split_modules`; --dtype f32; no --max-memory =
// accelerate's `get_max_memory(None)` (the configured accelerators' free memory + free RAM).
// Exit codes: 0 success (also when only disk is left: the map is then {"": "disk"}, as
// accelerate returns, with a note on stderr); 1 bad --max-memory (the message names the entry),
// a model that cannot be loaded, or another runtime error; 2 usage errors (CLI11).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers the `plan` subcommand on `app`. When `plan` is the parsed subcommand, CLI11 runs
/// its callback, which sets `run_selected` to a function that runs the plan and returns the
/// exit code; that function prints its own "hookscope: error: ..." for failures. The
/// registered options live as long as `app`; `run_selected` must outlive `app.parse`.
CLI::App* add_plan_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli

#include "cli/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "hooks/device.h"
#include "hooks/device_map.h"
#include "hooks/runtime.h"
#include "models/config.h"
#include "models/loader.h"
#include "output/text.h"

namespace hs::cli {

namespace {

constexpr int kMaxPlannedAccelerators = 1024;

struct PlanArgs {
  std::string model;
  std::string max_memory;
  std::string no_split;
  std::string dtype = "f32";
  bool offload_buffers = false;
  bool fallback_allocation = false;
  bool balanced = false;
  bool low_zero = false;
  bool verbose = false;
  bool json = false;
  CLI::Option* max_memory_opt = nullptr;
  CLI::Option* no_split_opt = nullptr;
};

std::string with_commas(int64_t v) {
  const std::string digits = std::to_string(v);
  const size_t start = (v < 0) ? 1 : 0;
  std::string out = digits.substr(0, start);
  for (size_t i = start; i < digits.size(); ++i) {
    if (i > start && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// A folder of the HF cache (.../models--ORG--NAME/snapshots/REV) as "ORG/NAME@REV", as the hub
// names a model at a revision; any other folder by its name.
std::string model_label(const std::filesystem::path& dir) {
  const std::string repo = dir.parent_path().parent_path().filename().string();
  const size_t sep = repo.find("--", 8);
  if (dir.parent_path().filename() == "snapshots" && repo.rfind("models--", 0) == 0 && sep != std::string::npos)
    return repo.substr(8, sep - 8) + "/" + repo.substr(sep + 2) + "@" + dir.filename().string();
  return dir.filename().string();
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

// The plan as a readable table: the model, per device its budget and what was placed, then
// every device_map entry with its size (tied weights noted).
void print_plan(const models::LoadedModel& lm, c10::ScalarType dtype, const std::vector<std::string>& no_split,
                const hooks::MaxMemory& max_memory, const hooks::DeviceMap& device_map,
                const hooks::ModuleSizes& sizes) {
  using namespace hs::hooks;
  const models::CausalLM& model = *lm.model;
  const int64_t total = sizes.get("");
  std::cout << output::terminal_text(model_label(lm.dir) + " (" + lm.config.architecture + ")") << ", dtype "
            << models::dtype_short_name(dtype) << ": " << with_commas(total) << " bytes (" << human(total) << ")\n";
  std::string ns;
  for (const auto& c : no_split) ns += (ns.empty() ? "" : ", ") + c;
  std::cout << "no_split_module_classes: " << (ns.empty() ? "(none)" : ns) << "\n\n";

  std::vector<DeviceId> devices;
  for (const auto& [d, v] : max_memory) devices.push_back(d);
  for (const auto& [k, d] : device_map)
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  std::cout << pad("device", 8) << pad("max_memory", 28) << pad("placed", 28) << "entries\n";
  for (const auto& d : devices) {
    int64_t placed = 0;
    int entries = 0;
    for (const auto& [k, dev] : device_map)
      if (dev == d) {
        placed += sizes.get(k);
        ++entries;
      }
    std::string budget = "unlimited";
    for (const auto& [md, v] : max_memory)
      if (md == d) budget = with_commas(v) + " (" + human(v) + ")";
    std::cout << pad(d.str(), 8) << pad(budget, 28) << pad(with_commas(placed) + " (" + human(placed) + ")", 28)
              << entries << "\n";
  }
  std::cout << "\ndevice_map:\n";
  size_t width = 4;
  for (const auto& [k, d] : device_map) width = std::max(width, k.size());
  const auto tied = find_tied_parameters(model);
  for (const auto& [k, d] : device_map) {
    // Tied weights are counted once, under their first name (accelerate's accounting).
    std::string note;
    for (const auto& group : tied)
      for (const auto& member : group)
        if (k.empty() || member.rfind(k + ".", 0) == 0)
          for (const auto& other : group)
            if (other != member && !(k.empty() || other.rfind(k + ".", 0) == 0) && note.empty())
              note = " (" + member + " is tied to " + other + ")";
    std::cout << "  " << pad(k.empty() ? "\"\"" : k, width + 2) << pad(d.str(), 6) << with_commas(sizes.get(k))
              << " bytes" << note << "\n";
  }
}

int run_plan(const PlanArgs& a) {
  using namespace hs::hooks;
  // accelerate's warnings and info lines, each once, on stderr.
  auto seen = std::make_shared<std::set<std::string>>();
  LogFn log = [seen](const std::string& level, const std::string& msg) {
    if (level == "VERBOSE") {
      std::cerr << msg << "\n";
      return;
    }
    if (!seen->insert(level + msg).second) return;
    std::string lower = level;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    std::cerr << "hookscope: " << lower << ": " << msg << "\n";
  };

  std::optional<MaxMemory> user_max_memory;
  // Accelerators named in --max-memory are planned for even when absent (up to a bound that
  // keeps the per-device tables small); mps too, as accelerate plans for it.
  if (a.max_memory_opt->count() > 0)
    user_max_memory = parse_max_memory_option(a.max_memory, kMaxPlannedAccelerators - 1,
                                              "plan handles up to " + std::to_string(kMaxPlannedAccelerators), true);
  models::LoadOptions lo;
  lo.dtype = models::parse_dtype(a.dtype, "--dtype");
  models::LoadedModel lm = models::load_model(a.model, lo);
  const models::CausalLM& model = *lm.model;

  // The devices a plain process sees (the default max_memory probes them). Accelerators named
  // in --max-memory are planned for (emulated when absent), so only negative ids get
  // accelerate's "not available" warning.
  RuntimeOptions ro = RuntimeOptions::cuda_devices();
  ro.log = log;
  Runtime runtime(ro);
  RuntimeScope runtime_installed(runtime);
  int num_accelerators = runtime.devices().num_accelerators();
  if (user_max_memory)
    for (const auto& [d, v] : *user_max_memory)
      if (d.is_accelerator()) num_accelerators = std::max(num_accelerators, d.index + 1);

  const std::vector<std::string> no_split =
      a.no_split_opt->count() > 0 ? output::split_list(a.no_split) : model.no_split_modules();
  if (a.no_split_opt->count() > 0) {
    // accelerate silently ignores a class the model does not have; a typo would then split
    // every layer without a word. Say so.
    std::set<std::string> classes;
    for (const auto& [name, m] : models::named_modules(lm.model)) classes.insert(m->class_name());
    for (const auto& c : no_split)
      if (!classes.count(c)) {
        std::string known;
        for (const auto& k : classes) known += (known.empty() ? "" : ", ") + k;
        std::cerr << "hookscope: warning: --no-split: " << lm.config.architecture << " has no module of class '" << c
                  << "' (its classes: " << known << ")\n";
      }
  }
  MaxMemory max_memory = get_max_memory(user_max_memory, num_accelerators, log);
  if (a.balanced) {
    GetBalancedMemoryOptions b;
    b.max_memory = max_memory;
    b.no_split_module_classes = no_split;
    b.dtype = lo.dtype;
    b.low_zero = a.low_zero;
    b.num_accelerators = num_accelerators;
    b.log = log;
    max_memory = get_balanced_memory(model, b);
  }
  InferAutoDeviceMapOptions o;
  o.max_memory = max_memory;
  o.no_split_module_classes = no_split;
  o.dtype = lo.dtype;
  o.offload_buffers = a.offload_buffers;
  o.fallback_allocation = a.fallback_allocation;
  o.verbose = a.verbose;
  o.num_accelerators = num_accelerators;
  o.log = log;
  const DeviceMap device_map = infer_auto_device_map(model, o);
  const ModuleSizes sizes = compute_module_sizes(model, lo.dtype);

  if (device_map.size() == 1 && device_map[0].first.empty() && device_map[0].second.is_disk())
    std::cerr << "hookscope: note: nothing fits in the given max_memory except disk, so the whole model is offloaded "
                 "to disk (device_map {\"\": \"disk\"}, as accelerate returns it; dispatch_model expands it to every "
                 "module). Give an accelerator or the cpu at least the bytes reported above.\n";

  if (a.json) {
    nlohmann::ordered_json out;
    out["device_map"] = device_map_to_json(device_map);
    out["module_sizes"] = module_sizes_to_json(sizes);
    out["max_memory"] = max_memory_to_json(max_memory);
    std::cout << out.dump() << "\n";
    return 0;
  }

  print_plan(lm, *lo.dtype, no_split, max_memory, device_map, sizes);
  return 0;
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, std::function<int()>& run_selected) {
  auto args = std::make_shared<PlanArgs>();
  auto* plan = app.add_subcommand("plan", "Compute accelerate's device map (infer_auto_device_map) for a checkpoint");
  plan->add_option("--model", args->model, "HF checkpoint folder, or a model id in the offline HF cache")->required();
  args->max_memory_opt = plan->add_option(
      "--max-memory", args->max_memory,
      "Bytes per device: comma-separated device=size, devices 0,1,... (accelerators), mps, cpu, disk; sizes as "
      "accelerate's (1GiB, 500MB, 1gb = gigabits) or plain bytes. Default: free memory of the configured "
      "accelerators and the free RAM")
      ->check(max_memory_spec());
  args->no_split_opt = plan->add_option("--no-split", args->no_split,
                                        "Comma-separated module classes never split across devices (default: the "
                                        "model's _no_split_modules, e.g. LlamaDecoderLayer; \"\" for none)");
  plan->add_option("--dtype", args->dtype, "Dtype the weights are loaded in")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  plan->add_flag("--offload-buffers", args->offload_buffers, "Offloaded layers offload their buffers too");
  plan->add_flag("--fallback-allocation", args->fallback_allocation,
                 "When nothing fits on a device, place any smaller module that does (accelerate's fallback_allocation)");
  auto* balanced = plan->add_flag(
      "--balanced", args->balanced,
      "Spread the model evenly over the accelerators first (get_balanced_memory, device_map=\"balanced\")");
  // accelerate's low_zero only exists inside get_balanced_memory: alone it is a usage error.
  plan->add_flag("--low-zero", args->low_zero, "With --balanced: keep accelerator 0 as empty as possible")
      ->needs(balanced);
  plan->add_flag("--verbose", args->verbose, "Print accelerate's step-by-step trace to stderr");
  plan->add_flag("--json", args->json, "Print {\"device_map\", \"module_sizes\", \"max_memory\"} as JSON");
  plan->footer(
      "Examples:\n"
      "  hookscope plan --model ~/.cache/hookscope/SmolLM2-135M-Instruct --max-memory 0=100MB,1=100MB,cpu=1GB\n"
      "  hookscope plan --model DIR --max-memory 0=50MB,cpu=100MB --dtype bf16 --json   (the rest goes to disk)\n"
      "  hookscope plan --model DIR --max-memory 0=1GB,1=1GB --balanced --no-split LlamaDecoderLayer");
  plan->callback([args, &run_selected] {
    run_selected = [args] { return run_plan(*args); };  // its errors printed as every command's (main)
  });
  return plan;
}

}  // namespace hs::cli

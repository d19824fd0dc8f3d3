#include "models/loader.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "models/safetensors.h"

namespace hs::models {

namespace fs = std::filesystem;

namespace {

std::string shape_str(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// An environment variable's value with a leading "~" expanded, as huggingface_hub does; empty
// when unset or empty.
fs::path env_path(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return {};
  const std::string s = v;
  if (s == "~" || s.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return fs::path(home ? home : "/root") / s.substr(s.size() > 1 ? 2 : 1);
  }
  return s;
}

// huggingface_hub's cache folder (its constants.HF_HUB_CACHE): $HF_HUB_CACHE, the legacy
// $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
fs::path hub_cache_dir() {
  for (const char* v : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (fs::path p = env_path(v); !p.empty()) return p;
  if (fs::path h = env_path("HF_HOME"); !h.empty()) return h / "hub";
  if (fs::path x = env_path("XDG_CACHE_HOME"); !x.empty()) return x / "huggingface" / "hub";
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".cache/huggingface/hub";
}

}  // namespace

fs::path resolve_model_path(const std::string& dir_or_id) {
  if (dir_or_id.empty()) throw ModelLoadError("empty model path or id");
  fs::path p(dir_or_id);
  if (fs::is_directory(p)) return fs::absolute(p);
  if (fs::exists(p)) throw ModelLoadError(dir_or_id + ": not a folder (pass the checkpoint folder that holds config.json)");
  const fs::path hub = hub_cache_dir();
  auto slash = dir_or_id.find('/');
  // "org/name" (one slash, inside): a hub id; a path ("/x", "./x", "a/b/c") is a folder.
  if (slash != std::string::npos && slash > 0 && slash + 1 < dir_or_id.size() &&
      dir_or_id.find('/', slash + 1) == std::string::npos && dir_or_id[0] != '.') {
    std::string repo = "models--" + dir_or_id.substr(0, slash) + "--" + dir_or_id.substr(slash + 1);
    fs::path base = hub / repo;
    fs::path snaps = base / "snapshots";
    if (fs::is_directory(snaps)) {
      std::ifstream ref(base / "refs" / "main", std::ios::binary);
      if (ref) {
        // The whole file (huggingface_hub writes the hash alone; one trailing newline is allowed),
        // at most 256 bytes read: a commit hash names a folder under snapshots/, and anything
        // else (empty, several lines, too long, leaving snapshots/) is refused.
        std::string rev(257, '\0');
        ref.read(rev.data(), static_cast<std::streamsize>(rev.size()));
        rev.resize(static_cast<size_t>(ref.gcount()));
        if (rev.size() >= 2 && rev.compare(rev.size() - 2, 2, "\r\n") == 0) rev.resize(rev.size() - 2);
        else if (!rev.empty() && rev.back() == '\n') rev.pop_back();
        const bool plain = !rev.empty() && rev.size() <= 255 && rev != "." && rev != ".." &&
                           rev.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-") ==
                               std::string::npos;
        std::string shown;  // what the file holds, printable
        for (const char c : rev.substr(0, 80)) shown += c >= 0x20 && c < 0x7f ? std::string(1, c) : std::string("?");
        if (!plain)
          throw ModelLoadError((base / "refs" / "main").string() + " holds '" + shown + (rev.size() > 80 ? "..." : "") +
                               "', not a revision (a commit hash naming a folder under " + snaps.string() + ")");
        // huggingface_hub resolves the revision refs/main names or nothing: never another one.
        if (!fs::is_directory(snaps / rev))
          throw ModelLoadError((base / "refs" / "main").string() + " names snapshot " + rev + ", which " +
                               snaps.string() + " does not hold (an interrupted download?); hookscope never downloads");
        return snaps / rev;
      }
      // No refs/main: huggingface_hub finds no revision "main" offline, and neither does
      // hookscope (guessing one snapshot among several would load weights nobody asked for).
      std::vector<std::string> held;
      for (const auto& e : fs::directory_iterator(snaps))
        if (e.is_directory()) held.push_back(e.path().filename().string());
      std::sort(held.begin(), held.end());
      std::string list;
      for (size_t i = 0; i < held.size() && i < 5; ++i) list += (i ? ", " : "") + held[i];
      if (held.size() > 5) list += ", ... (" + std::to_string(held.size()) + " in all)";
      throw ModelLoadError((base / "refs" / "main").string() + " is missing, so no snapshot is the revision 'main' (" +
                           snaps.string() + " holds " + (held.empty() ? std::string("none") : list) +
                           "); pass one snapshot's folder as --model");
    }
    throw ModelLoadError("model '" + dir_or_id + "' is not a folder and is not in the offline HF cache (looked for " +
                         snaps.string() + "); hookscope never downloads");
  }
  throw ModelLoadError("model folder '" + dir_or_id + "' does not exist");
}

torch::Tensor aligned_for_kernels(torch::Tensor t) {
  if (t.device().is_cpu() && t.numel() > 0 && reinterpret_cast<uintptr_t>(t.data_ptr()) % c10::gAlignment != 0)
    return t.clone(at::MemoryFormat::Contiguous);  // the CPU allocator's storage: gAlignment-aligned
  return t;
}

std::vector<std::string> load_weights(CausalLM& model, const Checkpoint& ckpt, c10::ScalarType dtype,
                                      torch::Device device) {
  // Resolve every tensor first, then install them all: a failure leaves the model untouched.
  struct Pending {
    HookableModule* module;
    std::string local;
    torch::Tensor value;
  };
  std::vector<Pending> pending;
  std::set<std::string> used;
  const auto tied = model.tied_weights();
  auto is_tied_target = [&](const std::string& n) {
    for (const auto& [dst, src] : tied)
      if (dst == n) return true;
    return false;
  };
  auto root = std::dynamic_pointer_cast<HookableModule>(model.shared_from_this());
  for (const auto& [prefix, m] : named_modules(root)) {
    for (const auto& slot : m->local_tensors()) {
      if (!slot.is_parameter && !slot.persistent) continue;  // computed, not stored
      const std::string name = prefix.empty() ? slot.name : prefix + "." + slot.name;
      const auto want = slot.value.sizes();
      // Structured bindings are not captured by name (clang before 16 refuses it: the fuzz build).
      auto check_shape = [&, &owner = *m, &owner_fqn = prefix](const TensorInfo& info) {
        if (c10::IntArrayRef(info.shape) != want)
          throw ModelLoadError("tensor '" + name + "' in " + ckpt.file_of(name).string() + " has shape " +
                               shape_str(info.shape) + " but " + owner.class_name() + " '" + owner_fqn +
                               "' expects " + shape_str(want));
      };
      if (is_tied_target(name)) {
        // The tied copy a checkpoint may carry is not loaded, but one of another shape means
        // the checkpoint is not this model's (transformers refuses it as a size mismatch).
        if (ckpt.contains(name)) check_shape(ckpt.info(name));
        continue;
      }
      if (!ckpt.contains(name))
        throw ModelLoadError("checkpoint is missing tensor '" + name + "' needed by module '" + prefix + "' (" +
                             m->class_name() + ")");
      const TensorInfo& info = ckpt.info(name);
      check_shape(info);
      const std::string& dt = info.dtype;
      if (dt != "F32" && dt != "BF16" && dt != "F16")
        throw ModelLoadError("tensor '" + name + "' in " + ckpt.file_of(name).string() + " has dtype " + dt +
                             ", which hookscope does not load as a weight (supported: F32, BF16, F16)");
      torch::Tensor t = ckpt.get(name);
      if (t.scalar_type() != dtype || t.device() != device) t = t.to(device, dtype);
      t = aligned_for_kernels(std::move(t));
      pending.push_back({m.get(), slot.name, t});
      used.insert(name);
    }
  }
  for (const auto& [dst, src] : tied) used.insert(dst);  // a checkpoint may still carry the tied copy
  // Every checkpoint tensor must have a home: one without (a config that builds fewer layers or
  // other modules than the checkpoint was saved from) means the two disagree. Old checkpoints'
  // per-layer rotary_emb.inv_freq buffers are computed, not loaded: transformers skips them too.
  std::vector<std::string> ignored, unused;
  for (const auto& n : ckpt.names())
    if (!used.count(n)) (n.find("rotary_emb.inv_freq") != std::string::npos ? ignored : unused).push_back(n);
  if (!unused.empty())
    throw ModelLoadError("checkpoint " + ckpt.dir().string() + " holds " + std::to_string(unused.size()) +
                         " tensor(s) that no module of the " + model.config().architecture + " built from " +
                         model.config().path.string() + " uses, e.g. '" + unused.front() + "' (in " +
                         ckpt.file_of(unused.front()).string() + "): the config does not describe this checkpoint (" +
                         "num_hidden_layers " + std::to_string(model.config().num_hidden_layers) + "?)");
  for (auto& p : pending) p.module->set_tensor(p.local, std::move(p.value));
  for (const auto& [dst, src] : tied) {
    auto dot_d = dst.rfind('.'), dot_s = src.rfind('.');
    auto dm = get_submodule(root, dst.substr(0, dot_d));
    auto sm = get_submodule(root, src.substr(0, dot_s));
    dm->set_tensor(dst.substr(dot_d + 1), sm->get_tensor(src.substr(dot_s + 1)));
  }
  return ignored;
}

LoadedModel load_model(const std::string& dir_or_id, const LoadOptions& options) {
  LoadedModel out;
  out.dir = resolve_model_path(dir_or_id);
  out.config = ModelConfig::from_file(out.dir / "config.json");
  out.generation = GenerationConfig::load(out.dir / "generation_config.json", out.config);
  Checkpoint ckpt = Checkpoint::open_dir(out.dir);
  const c10::ScalarType dtype = options.dtype.value_or(c10::kFloat);
  auto model = std::make_shared<CausalLM>(out.config, torch::TensorOptions().device(torch::kMeta).dtype(dtype));
  out.unused_tensors = load_weights(*model, ckpt, dtype, options.device);
  // Non-persistent buffers (rotary inv_freq) are computed on the CPU; follow the weights.
  if (options.device != torch::kCPU)
    for (const auto& [prefix, m] : named_modules(model))
      for (const auto& slot : m->local_tensors())
        if (!slot.is_parameter && slot.value.defined()) m->set_tensor(slot.name, slot.value.to(options.device));
  out.model = model;
  return out;
}

}  // namespace hs::models

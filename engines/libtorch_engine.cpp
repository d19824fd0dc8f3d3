#include "engines/libtorch_engine.h"

#include <algorithm>
#include <stdexcept>

#include "engines/cupti_correlation.h"
#include "hooks/memory.h"
#include "models/generate.h"
#include "models/tokenizer.h"

namespace hs::engines {

using nlohmann::json;

namespace {

json device_map_json(const hooks::DeviceMap& m) {
  json j = json::object();
  for (const auto& [k, d] : m) j[k] = d.to_json();
  return j;
}

std::vector<int64_t> prompt_ids_of(const LibTorchEngineOptions& o, const models::LoadedModel& ref) {
  for (int64_t v : o.prompt_ids)
    if (v < 0 || v >= ref.config.vocab_size)
      throw std::invalid_argument("--prompt-ids: '" + std::to_string(v) + "' is not a token id of this model (vocab_size " +
                                  std::to_string(ref.config.vocab_size) + ")");
  std::vector<int64_t> ids = o.prompt_ids;
  if (ids.empty()) {
    const auto tokenizer = ref.dir / "tokenizer.json";
    if (!std::filesystem::exists(tokenizer))
      throw std::invalid_argument("--prompt: the model has no " + tokenizer.string() + " to encode '" + o.prompt +
                                  "' with; give the prompt as token ids instead, e.g. --prompt-ids 1,2,3");
    ids = models::Tokenizer::from_file(tokenizer).encode(o.prompt, true);
    if (ids.empty()) throw std::invalid_argument("--prompt encodes to no tokens");
    try {
      models::check_prompt_ids(ref.config, ids);  // a tokenizer with more tokens than the embedding has rows
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--prompt, encoded by " + tokenizer.string() + ": " + e.what());
    }
  }
  return ids;
}

}  // namespace

LibTorchEngine::LibTorchEngine(LibTorchEngineOptions options) : opt_(std::move(options)) {
  hooks::RuntimeOptions ro;
  ro.accelerators = opt_.accelerators;
  ro.log = opt_.log;
  if (opt_.max_memory)
    for (const auto& [d, b] : *opt_.max_memory)
      if (d.is_accelerator()) {
        if (static_cast<int>(ro.budget_bytes.size()) <= d.index) ro.budget_bytes.resize(d.index + 1, 0);
        ro.budget_bytes[d.index] = b;
      }
  runtime_ = std::make_unique<hooks::Runtime>(ro);
  installed_ = std::make_unique<hooks::RuntimeScope>(*runtime_);
  // The reference: the same checkpoint on one device, no hooks.
  models::LoadOptions lo;
  lo.dtype = opt_.dtype;
  models::LoadedModel ref = models::load_model(opt_.model, lo);
  ids_ = torch::tensor(prompt_ids_of(opt_, ref), torch::kInt64).unsqueeze(0);
  {
    c10::InferenceMode g;
    ref_logits_ = ref.model->forward(ids_, models::KVCache::dynamic_cache(ref.config.num_hidden_layers), 1)[0][-1]
                      .to(torch::kCPU, torch::kFloat)
                      .clone();
  }
  ref_argmax_ = ref_logits_.argmax().item<int64_t>();
  int64_t n_params = 0, n_bytes = 0;
  for (const auto& [n, t] : models::named_parameters(*ref.model)) {
    n_params += t.numel();
    n_bytes += static_cast<int64_t>(t.nbytes());
  }
  // The model as a reader knows it: the hub id as given, or a local folder's name (its path
  // stays in "path").
  const std::string id = std::filesystem::is_directory(opt_.model)
                             ? std::filesystem::canonical(opt_.model).filename().string()
                             : opt_.model;
  model_json_ = {{"id", id}, {"path", ref.dir.string()}, {"dtype", models::dtype_short_name(opt_.dtype)},
                 {"params", n_params}, {"bytes", n_bytes}, {"architecture", ref.config.architecture}};
}

LibTorchEngine::~LibTorchEngine() {
  // The model and its hooks go before the runtime they were dispatched on.
  prep_.reset();
  cache_.reset();
  installed_.reset();
}

std::vector<hooks::AcceleratorInfo> LibTorchEngine::accelerators() const {
  return runtime_->devices().accelerators();
}

void LibTorchEngine::prepare(Scenario s) {
  prep_.reset();  // the previous scenario's model and offload folder go first
  cache_.reset();
  ScenarioOptions so{opt_.model, opt_.dtype, opt_.max_memory, opt_.offload_dir};
  try {
    prep_.emplace(prepare_scenario(s, so));
  } catch (const std::filesystem::filesystem_error& e) {  // kept one: the CLI names the flag behind its path
    throw std::filesystem::filesystem_error("scenario " + scenario_name(s), e.path1(), e.path2(), e.code());
  } catch (const std::exception& e) {
    throw std::runtime_error("scenario " + scenario_name(s) + ": " + e.what());
  }
}

RunSetup LibTorchEngine::setup(const Cell&) const {
  if (!prep_) throw std::logic_error("LibTorchEngine::setup before prepare");
  return {opt_.model, device_map_json(prep_->device_map), {{"hookscope", "0.1.0"}, {"torch", TORCH_VERSION}}};
}

RunResult LibTorchEngine::run(const Cell& cell, RunContext& ctx) {
  if (!prep_ || prep_->scenario != cell.scenario) throw std::logic_error("LibTorchEngine::run: scenario not prepared");
  if (!cell.accelerate_tree.empty()) throw std::logic_error("LibTorchEngine::run: accelerate trees need the torch engine");
  tracer::HostTracer& tracer = ctx.tracer;
  runtime_->set_compile_policy(cell.policy);
  runtime_->set_sink(&tracer);
  std::optional<CuptiCorrelation> gpu_ids;  // GPU work named after the hook call that launched it
  if (ctx.cupti) gpu_ids.emplace(*runtime_, *ctx.cupti);
  auto& ledger = runtime_->ledger();
  ledger.begin(*prep_->lm.model);  // MEMORY_COUNTERS: bytes resident per device (hooks/memory.h)
  RunResult r;
  r.model = model_json_;
  r.dtype = model_json_.value("dtype", "");
  r.weight_devices = prep_->weight_devices;
  try {
    measure(cell, r, tracer, ctx.progress);
  } catch (const compile::Unsupported& e) {
    r.outcome = RunResult::Outcome::Unsupported;
    r.error = e.what();
    r.break_reasons = {{e.record().reason, e.record().function, e.record().module}};
  } catch (const std::exception& e) {
    r.outcome = RunResult::Outcome::Failed;
    r.error = e.what();
  }
  for (const auto& [dev, bytes] : ledger.end()) r.peak_memory_bytes[dev.str()] = bytes;
  runtime_->set_sink(nullptr);
  return r;
}

// Prefill (structure, argmax and logits against the reference), then the decode latency.
void LibTorchEngine::measure(const Cell& cell, RunResult& r, tracer::HostTracer& tracer,
                            const CellProgressFn& progress) {
  auto& model = *prep_->lm.model;
  compile::Function fn = [this, &model](const std::vector<c10::IValue>& in) -> c10::IValue {
    return model.forward(in.at(0).toTensor(), cache_, 1);
  };
  compile::CompileOptions co;
  co.mode = cell.mode;
  co.fullgraph = cell.fullgraph;
  co.name = "CausalLM.forward";
  compile::CompiledFunction cf = compile::compile(fn, co);
  c10::InferenceMode g;
  cache_ = models::KVCache::dynamic_cache(prep_->lm.config.num_hidden_layers);
  torch::Tensor logits = cf.call_tensor({ids_})[0][-1].to(torch::kCPU, torch::kFloat);
  runtime_->ledger().sample();
  const compile::ExplainOutput ex = cf.explain();
  r.captured_regions = ex.graph_count;
  r.disabled_scope_entries = ex.graph_break_count;
  for (const auto& b : ex.break_reasons) r.break_reasons.push_back({b.reason, b.function, b.module});
  r.diagnostics = ex.diagnostics;
  r.argmax_match = logits.argmax().item<int64_t>() == ref_argmax_;
  // Offloaded runs must reproduce the reference bit for bit (as accelerate does); where they
  // do not, how far: max |Δ| and ulps of the model's dtype.
  if (cell.scenario != Scenario::Sharded) r.logits = models::compare_logits(logits, ref_logits_, opt_.dtype);
  if (!prep_->offloaded_params.empty()) r.params_on_meta_after = offloaded_params_on_meta(*prep_);
  decode_latency(
      cell, [&cf](const torch::Tensor& ids) { return cf.call_tensor({ids}); },
      [&fn](const torch::Tensor& ids) { return fn({ids}).toTensor(); }, r, tracer, progress);
  r.guard_recompiles = cf.recompiles();  // the emulated compiler's: never under Dynamo's name
}

LibTorchEngine::Timed LibTorchEngine::generate(const StepFn& step, tracer::HostTracer* tracer) {
  auto& ledger = runtime_->ledger();
  cache_ = models::KVCache::dynamic_cache(prep_->lm.config.num_hidden_layers);
  Timed t;
  const int64_t p0 = events::now_ns();
  int64_t tok_id = step(ids_)[0][-1].argmax().item<int64_t>();
  const int64_t p1 = events::now_ns();
  if (tracer) {
    tracer->generation_step({0, tok_id, p0, p1});
    ledger.sample();
  }
  int64_t last_end = p1, n = 1;
  for (; n < opt_.max_new_tokens; ++n) {
    const int64_t s0 = events::now_ns();
    tok_id = step(torch::full({1, 1}, tok_id, torch::kInt64))[0][-1].argmax().item<int64_t>();
    last_end = events::now_ns();
    if (tracer) {
      tracer->generation_step({n, tok_id, s0, last_end});
      ledger.sample();  // step boundary
    }
  }
  // The generate's events are written now, between generates, where the writer's SQLite work
  // slows nothing that is timed (TracerOptions::writer_wake_chunks).
  if (tracer) tracer->flush();
  t.prefill_ms = double(p1 - p0) / 1e6;
  if (n > 1) t.decode_ms_per_token = double(last_end - p1) / 1e6 / double(n - 1);
  t.tokens = n;
  return t;
}

void LibTorchEngine::decode_latency(const Cell& cell, const StepFn& compiled, const StepFn& eager, RunResult& r,
                                    tracer::HostTracer& tracer, const CellProgressFn& progress) {
  const bool interleave = cell.mode != compile::Mode::Eager;
  auto keep = [](measurement::LatencySamples& s, const Timed& t) {
    s.prefill_ms.push_back(t.prefill_ms);
    if (t.decode_ms_per_token) s.decode_ms_per_token.push_back(*t.decode_ms_per_token);
  };
  for (int rep = 0; rep < opt_.warmup + opt_.repeats; ++rep) {
    const bool measured = rep >= opt_.warmup;
    const std::string round = measured ? "measured " + std::to_string(rep - opt_.warmup + 1) + "/" + std::to_string(opt_.repeats)
                                       : "warm-up " + std::to_string(rep + 1) + "/" + std::to_string(opt_.warmup);
    auto hooked = [&](const StepFn& f, bool baseline) -> StepFn {
      if (!opt_.on_step && !progress) return f;
      const std::string phase = interleave ? round + (baseline ? " eager" : " compiled") : round;
      return [&, baseline, phase, step = int64_t{0}](const torch::Tensor& ids) mutable {
        if (progress) progress({phase, step, opt_.max_new_tokens, {}});
        if (opt_.on_step) opt_.on_step(cell, baseline, rep, step);
        ++step;
        return f(ids);
      };
    };
    if (interleave) {
      runtime_->set_sink(nullptr);  // the baseline's events are not the run's
      const Timed e = generate(hooked(eager, true), nullptr);
      runtime_->set_sink(&tracer);
      if (measured) keep(r.eager_latency, e);
    }
    const Timed c = generate(hooked(compiled, false), &tracer);
    if (measured) keep(r.latency, c);
    r.new_tokens = c.tokens;
  }
  r.warmup = opt_.warmup;
  r.repeats = opt_.repeats;
  r.extra["measurement"] =
      std::to_string(opt_.warmup) + " warm-up and " + std::to_string(opt_.repeats) + " measured greedy decode(s) of " +
      std::to_string(opt_.max_new_tokens) + " token(s)" +
      (interleave ? ", each preceded by an eager decode of the same dispatched model (eager_*, not recorded): A B A B"
                  : ", back to back") +
      "; every step of the run's own decodes is a generation step (warm-ups first)";
}

}  // namespace hs::engines

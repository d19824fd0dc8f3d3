// Llama / Qwen2 / Qwen3 in LibTorch against transformers: module trees, logits, greedy tokens,
// and bad checkpoints. Fixtures are tiny random checkpoints written by transformers during
// the test run (tests/oracles/make_fixtures.py).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <fstream>

#include "models/causal_lm.h"
#include "models/generate.h"
#include "models/loader.h"
#include "models/numerics.h"
#include "models/safetensors.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace hs::models;
using nlohmann::json;

namespace {

torch::Tensor to_tensor(const json& j) {
  std::vector<float> flat;
  std::vector<int64_t> shape;
  if (j.is_array() && !j.empty() && j[0].is_array()) {
    shape = {static_cast<int64_t>(j.size()), static_cast<int64_t>(j[0].size())};
    for (const auto& row : j)
      for (const auto& v : row) flat.push_back(v.get<float>());
  } else {
    shape = {static_cast<int64_t>(j.size())};
    for (const auto& v : j) flat.push_back(v.get<float>());
  }
  return torch::tensor(flat).view(shape);
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>();
}

class TinyModel : public ::testing::TestWithParam<std::string> {};

// fp32: prefill logits at every position and 8 teacher-forced decode steps within 1e-4 of
// transformers' eager forward; with the growing cache and with the static one.
TEST_P(TinyModel, Fp32LogitsMatchTransformersPrefillAndDecode) {
  fs::path dir = hs::test::tiny_checkpoint(GetParam());
  json ref = hs::test::read_json(dir / "reference.json");
  LoadedModel lm = load_model(dir.string());
  std::vector<int64_t> prompt = ref["prompt_ids"].get<std::vector<int64_t>>();
  auto decode_ids = ref["f32"]["decode_ids"].get<std::vector<int64_t>>();
  for (bool use_static : {false, true}) {
    SCOPED_TRACE(use_static ? "static cache" : "dynamic cache");
    c10::InferenceMode guard;
    auto cache = use_static ? KVCache::static_cache(lm.config.num_hidden_layers, 64)
                            : KVCache::dynamic_cache(lm.config.num_hidden_layers);
    auto ids = torch::tensor(prompt, torch::kInt64).unsqueeze(0);
    auto logits = lm.model->forward(ids, cache)[0];
    auto want = to_tensor(ref["f32"]["prefill_logits"]);
    ASSERT_EQ(logits.sizes(), want.sizes());
    EXPECT_LE(max_abs_diff(logits, want), 1e-4) << "prefill";
    for (size_t i = 0; i < decode_ids.size(); ++i) {
      auto step = lm.model->forward(torch::full({1, 1}, decode_ids[i], torch::kInt64), cache)[0][-1];
      auto want_step = to_tensor(ref["f32"]["decode_logits"][i]);
      EXPECT_LE(max_abs_diff(step, want_step), 1e-4) << "decode step " << i;
      if (i + 1 < decode_ids.size()) {
        EXPECT_EQ(step.argmax().item<int64_t>(), decode_ids[i + 1]);
      }
    }
    EXPECT_EQ(cache->seq_length(), static_cast<int64_t>(prompt.size() + decode_ids.size()));
  }
}

// Greedy generation (not teacher-forced) produces transformers' tokens, both caches.
TEST_P(TinyModel, GreedyTokensMatchTransformers) {
  fs::path dir = hs::test::tiny_checkpoint(GetParam());
  json ref = hs::test::read_json(dir / "reference.json");
  LoadedModel lm = load_model(dir.string());
  auto want = ref["f32"]["decode_ids"].get<std::vector<int64_t>>();
  for (bool use_static : {false, true}) {
    GenerateOptions go;
    go.max_new_tokens = static_cast<int64_t>(want.size());
    go.static_cache = use_static;
    auto r = greedy_generate(*lm.model, ref["prompt_ids"].get<std::vector<int64_t>>(), go);
    EXPECT_EQ(r.new_ids, want) << (use_static ? "static" : "dynamic");
  }
}

// bf16: logits within bf16 rounding of transformers' bf16 model, argmax equal wherever it is
// not a rounding-level near-tie, and the same greedy tokens.
TEST_P(TinyModel, Bf16ArgmaxMatchesTransformers) {
  fs::path dir = hs::test::tiny_checkpoint(GetParam());
  json ref = hs::test::read_json(dir / "reference.json");
  LoadOptions lo;
  lo.dtype = torch::kBFloat16;
  LoadedModel lm = load_model(dir.string(), lo);
  EXPECT_EQ(lm.model->model->embed_tokens->get_tensor("weight").scalar_type(), torch::kBFloat16);
  auto prompt = ref["prompt_ids"].get<std::vector<int64_t>>();
  c10::InferenceMode guard;
  auto logits = lm.model->forward(torch::tensor(prompt, torch::kInt64).unsqueeze(0), nullptr)[0];
  auto argmax = logits.argmax(-1);
  // Logits agree to bf16 rounding: within 4 ulps of the largest logit (a bf16 ulp is at most
  // 2^-7 of the value); kernels may sum in another order, a real bug shows as O(1) errors.
  auto want_logits = to_tensor(ref["bf16"]["prefill_logits"]);
  const double tol = 4.0 * std::ldexp(1.0, -7) * want_logits.abs().max().item<double>();
  EXPECT_LE(max_abs_diff(logits, want_logits), tol) << "bf16 logits";
  // Argmax equal wherever transformers' top-2 margin is wider than that rounding; a
  // near-tie (margin <= tol) may legitimately flip and is not compared.
  auto want = ref["bf16"]["prefill_argmax"].get<std::vector<int64_t>>();
  auto margin = ref["bf16"]["prefill_margin"].get<std::vector<double>>();
  size_t compared = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (margin[i] <= tol) continue;
    ++compared;
    EXPECT_EQ(argmax[i].item<int64_t>(), want[i]) << "position " << i << " margin " << margin[i];
  }
  EXPECT_GE(compared, want.size() / 2) << "too many near-ties to test argmax";
  GenerateOptions go;
  go.max_new_tokens = static_cast<int64_t>(ref["bf16"]["decode_ids"].size());
  auto r = greedy_generate(*lm.model, prompt, go);
  EXPECT_EQ(r.new_ids, ref["bf16"]["decode_ids"].get<std::vector<int64_t>>());
}

// The module tree mirrors transformers': same FQNs in the same order, class names,
// parameters, buffers (incl. non-persistent rotary buffers), no-split classes, tied weights.
TEST_P(TinyModel, ModuleTreeMatchesTransformers) {
  fs::path dir = hs::test::tiny_checkpoint(GetParam());
  json want = json::parse(hs::test::run_oracle("module_tree.py", {"--model", dir.string()}));
  LoadedModel lm = load_model(dir.string());
  auto mods = named_modules(lm.model);
  ASSERT_EQ(mods.size(), want["modules"].size());
  for (size_t i = 0; i < mods.size(); ++i) {
    const auto& w = want["modules"][i];
    const auto& [name, m] = mods[i];
    SCOPED_TRACE(name);
    EXPECT_EQ(name, w["name"].get<std::string>());
    EXPECT_EQ(m->fqn(), name);
    EXPECT_EQ(m->class_name(), w["class"].get<std::string>());
    json params = json::array(), buffers = json::array();
    for (const auto& s : m->local_tensors()) {
      if (s.is_parameter)
        params.push_back({s.name, s.value.sizes().vec()});
      else
        buffers.push_back({s.name, s.value.sizes().vec(), s.persistent});
    }
    EXPECT_EQ(params, w["params"]);
    EXPECT_EQ(buffers, w["buffers"]);
  }
  EXPECT_EQ(json(lm.model->no_split_modules()), want["no_split_modules"]);
  json tied = json::object();
  for (const auto& [a, b] : lm.model->tied_weights()) tied[a] = b;
  EXPECT_EQ(tied, want["tied"]);
  if (!tied.empty()) {
    // Tied means the same tensor, listed once by named_parameters (remove_duplicate).
    EXPECT_TRUE(lm.model->lm_head->get_tensor("weight").is_same(lm.model->model->embed_tokens->get_tensor("weight")));
    auto np = named_parameters(*lm.model);
    EXPECT_EQ(named_parameters(*lm.model, true, false).size(), np.size() + 1);
  }
}

// Loaded weights sit where the CPU allocator (and so any hook copying them to a device) would
// put them: 64-byte aligned, so BLAS takes the same kernel for the reference model and for an
// offloaded copy. The checkpoint itself places tensors only 4-byte aligned; the test checks it
// does, so it keeps meaning something.
TEST_P(TinyModel, LoadedWeightsAreAllocatorAligned) {
  fs::path dir = hs::test::tiny_checkpoint(GetParam());
  Checkpoint ck = Checkpoint::open_dir(dir);
  int misaligned_in_file = 0;
  for (const auto& n : ck.names())
    misaligned_in_file += reinterpret_cast<uintptr_t>(ck.get(n).data_ptr()) % c10::gAlignment != 0;
  EXPECT_GT(misaligned_in_file, 0) << "every tensor of the checkpoint is already 64-byte aligned";
  for (auto dtype : {c10::kFloat, c10::kBFloat16}) {
    LoadOptions o;
    o.dtype = dtype;
    LoadedModel lm = load_model(dir.string(), o);
    for (const auto& [name, t] : named_parameters(*lm.model))
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % c10::gAlignment, 0u) << name << " " << dtype;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TinyModel,
                         ::testing::Values("tiny-llama", "tiny-llama-linear-rope", "tiny-qwen2", "tiny-qwen3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// models::linear_product is nn.Linear's product whichever kernel it takes: within float32 rounding of
// ATen's linear for every input shape the model gives it (2-D, 3-D, a transposed view, an empty
// batch, with and without bias); on a CPU float32 product of a MiB of weight or more without
// autograd it is oneDNN's inner product, bit for bit, and a weight placed anywhere (a hook's
// copy) gives the same bits.
TEST(Linear, OneKernelForEveryPlacementAndNnLinearsResultWithinRounding) {
  torch::manual_seed(7);
  auto w = torch::randn({kOneDnnMinWeight / 64, 64});
  auto b = torch::randn({kOneDnnMinWeight / 64});
  const std::vector<torch::Tensor> inputs = {torch::randn({1, 64}), torch::randn({2, 5, 64}),
                                             torch::randn({5, 2, 64}).transpose(0, 1), torch::randn({1, 0, 64})};
  auto onednn = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
  for (const auto& x : inputs) {
    SCOPED_TRACE(::testing::PrintToString(x.sizes()));
    c10::InferenceMode guard;
    for (bool with_bias : {false, true}) {
      auto got = linear_product(x, w, with_bias ? std::optional<torch::Tensor>(b) : std::nullopt);
      auto want = with_bias ? torch::linear(x, w, b) : torch::linear(x, w);
      ASSERT_EQ(got.sizes(), want.sizes());
      if (got.numel()) {
        EXPECT_LE(max_abs_diff(got, want), 1e-4 * want.abs().max().item<double>());
      }
      EXPECT_TRUE(torch::equal(got, linear_product(x.clone(), w.clone(), with_bias ? std::optional<torch::Tensor>(b.clone())
                                                                          : std::nullopt)))
          << "a copy of the same weight (what a hook puts on the execution device) gives other bits";
      if (onednn && got.numel()) {
        auto direct = onednn->typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                               c10::string_view, c10::List<std::optional<at::Scalar>>,
                                               std::optional<c10::string_view>)>()
                          .call(x, w, with_bias ? std::optional<at::Tensor>(b) : std::nullopt, "none", c10::List<std::optional<at::Scalar>>(), std::nullopt);
        EXPECT_TRUE(torch::equal(got, direct)) << "not oneDNN's inner product";
      }
    }
  }
  // Autograd and other dtypes keep ATen's linear.
  auto wg = w.clone().requires_grad_(true);
  {
    auto y = linear_product(inputs[0], wg, std::nullopt);
    EXPECT_TRUE(y.requires_grad());
    EXPECT_TRUE(torch::equal(y.detach(), torch::linear(inputs[0], wg).detach()));
  }
  auto xd = inputs[1].to(torch::kDouble), wd = w.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(linear_product(xd, wd, std::nullopt), torch::linear(xd, wd)));
  // A weight under a MiB too (waking oneDNN's threads would cost more than it saves).
  auto small = w.slice(0, 0, kOneDnnMinWeight / 64 - 1);
  EXPECT_TRUE(torch::equal(linear_product(inputs[1], small, std::nullopt), torch::linear(inputs[1], small)));
}

TEST(LogitsDiff, UlpsAndMaxAbsDiffInTheComputedDtype) {
  const float one = 1.0f, next = std::nextafter(1.0f, 2.0f), tiny = std::numeric_limits<float>::denorm_min();
  auto d = compare_logits(torch::tensor({one, -2.5f, 0.0f}), torch::tensor({one, -2.5f, -0.0f}), c10::kFloat);
  EXPECT_TRUE(d.identical);  // as torch.equal: -0 == +0
  EXPECT_EQ(d.max_ulp, 0);
  EXPECT_EQ(d.max_abs_diff, 0.0);
  d = compare_logits(torch::tensor({one, 3.0f}), torch::tensor({next, 3.0f}), c10::kFloat);
  EXPECT_FALSE(d.identical);
  EXPECT_EQ(d.max_ulp, 1);
  EXPECT_DOUBLE_EQ(d.max_abs_diff, static_cast<double>(next) - 1.0);
  // Across zero: -denorm_min, (-0 = +0), +denorm_min.
  d = compare_logits(torch::tensor({tiny}), torch::tensor({-tiny}), c10::kFloat);
  EXPECT_EQ(d.max_ulp, 2);
  // bf16 logits kept as float32: ulps of bf16 (1.0 and the next bf16, 1 + 2^-7).
  d = compare_logits(torch::tensor({1.0f, 8.0f}), torch::tensor({1.0078125f, 8.0f}), c10::kBFloat16);
  EXPECT_EQ(d.max_ulp, 1);
  EXPECT_DOUBLE_EQ(d.max_abs_diff, 0.0078125);
  d = compare_logits(torch::tensor({1.0f, NAN}), torch::tensor({1.0f, 0.5f}), c10::kFloat);
  EXPECT_FALSE(d.identical);
  EXPECT_EQ(d.max_ulp, -1);
  EXPECT_THROW(compare_logits(torch::zeros({2}), torch::zeros({3}), c10::kFloat), std::invalid_argument);
  EXPECT_THROW(compare_logits(torch::zeros({2}), torch::zeros({2}), c10::kInt), std::invalid_argument);
}

TEST(Config, ReadsBothTransformersForms) {
  // tiny-qwen2 is written in the 4.x form (rope_theta/torch_dtype), the others in 5.x.
  auto v4 = ModelConfig::from_file(hs::test::tiny_checkpoint("tiny-qwen2") / "config.json");
  EXPECT_EQ(v4.family, Family::Qwen2);
  EXPECT_DOUBLE_EQ(v4.rope.theta, 1000000.0);
  EXPECT_TRUE(v4.attention_bias);
  ASSERT_TRUE(v4.dtype.has_value());
  EXPECT_EQ(*v4.dtype, c10::kFloat);
  auto v5 = ModelConfig::from_file(hs::test::tiny_checkpoint("tiny-llama") / "config.json");
  EXPECT_EQ(v5.rope.type, "llama3");
  EXPECT_DOUBLE_EQ(v5.rope.theta, 500000.0);
  EXPECT_EQ(v5.rope.original_max_position_embeddings, 16);
  auto q3 = ModelConfig::from_file(hs::test::tiny_checkpoint("tiny-qwen3") / "config.json");
  EXPECT_EQ(q3.head_dim, 32);  // explicit, != hidden / heads
  EXPECT_TRUE(q3.tie_word_embeddings);
}

// ------------------------------------------------------------------ bad input

fs::path copy_fixture(const std::string& name, const std::string& scratch) {
  fs::path dst = hs::test::scratch_dir(scratch) / name;
  fs::copy(hs::test::tiny_checkpoint(name), dst, fs::copy_options::recursive);
  return dst;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string load_error(const fs::path& dir) {
  try {
    load_model(dir.string());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(BadInput, MissingConfigNamesTheFile) {
  auto dir = copy_fixture("tiny-qwen3", "bad-missing-config");
  fs::remove(dir / "config.json");
  auto msg = load_error(dir);
  EXPECT_NE(msg.find((dir / "config.json").string()), std::string::npos) << msg;
}

TEST(BadInput, InvalidConfigJsonNamesTheFile) {
  auto dir = copy_fixture("tiny-qwen3", "bad-invalid-config");
  write(dir / "config.json", "{\"architectures\": [\"Qwen3ForCausalLM\"], ");
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
}

TEST(BadInput, ConfigFieldWithWrongTypeNamesTheField) {
  auto dir = copy_fixture("tiny-qwen3", "bad-field-config");
  json cfg = hs::test::read_json(dir / "config.json");
  cfg["hidden_size"] = "sixty-four";
  write(dir / "config.json", cfg.dump());
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  cfg.erase("hidden_size");
  write(dir / "config.json", cfg.dump());
  msg = load_error(dir);
  EXPECT_NE(msg.find("missing required field 'hidden_size'"), std::string::npos) << msg;
}

TEST(BadInput, UnknownArchitectureIsNamed) {
  auto dir = copy_fixture("tiny-qwen3", "bad-arch");
  json cfg = hs::test::read_json(dir / "config.json");
  cfg["architectures"] = {"MambaForCausalLM"};
  cfg["model_type"] = "mamba";
  write(dir / "config.json", cfg.dump());
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("unknown architecture 'MambaForCausalLM'"), std::string::npos) << msg;
}

TEST(BadInput, MissingTensorIsNamed) {
  auto dir = copy_fixture("tiny-llama", "bad-missing-tensor");
  json idx = hs::test::read_json(dir / "model.safetensors.index.json");
  idx["weight_map"].erase("model.layers.1.mlp.up_proj.weight");
  write(dir / "model.safetensors.index.json", idx.dump());
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << msg;
}

TEST(BadInput, ShapeMismatchNamesTensorAndModule) {
  auto dir = copy_fixture("tiny-qwen3", "bad-shape");
  json cfg = hs::test::read_json(dir / "config.json");
  cfg["intermediate_size"] = 96;  // the file holds 128-wide MLP weights
  write(dir / "config.json", cfg.dump());
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expects [96, 64]"), std::string::npos) << msg;
}

// Every config field the models size themselves from is bounded (and named with its file)
// before anything is built: a huge layer count used to allocate until std::bad_alloc, 2^63
// wrapped to a negative, a non-positive epsilon or rope_theta generated garbage.
TEST(BadInput, ConfigFieldsOutOfRangeAreNamed) {
  struct Case {
    std::string field;
    json value;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"num_hidden_layers", 1000000000, "num_hidden_layers"},
      {"num_hidden_layers", 0, "num_hidden_layers"},
      {"hidden_size", json(uint64_t{1} << 63), "9223372036854775808"},
      {"hidden_size", -64, "hidden_size"},
      {"intermediate_size", int64_t{1} << 40, "intermediate_size"},
      {"num_attention_heads", 100000, "num_attention_heads"},
      {"num_key_value_heads", 64, "num_key_value_heads"},
      {"vocab_size", 0, "vocab_size"},
      {"max_position_embeddings", int64_t{1} << 40, "max_position_embeddings"},
      {"head_dim", 3, "head_dim"},
      {"rms_norm_eps", -1, "rms_norm_eps"},
      {"rms_norm_eps", 0, "rms_norm_eps"},
      {"rope_theta", 0, "rope_theta"},
      {"rope_theta", -10000.0, "rope_theta"},
      {"rope_theta", 5.2e134, "rope_theta"},  // float32's rope_theta^x overflows: inv_freq 0 (config_fuzz)
      {"rope_theta", 1e-300, "rope_theta"},   // float32's 0: inv_freq inf
      {"partial_rotary_factor", 0.01, "gives 0 rotary channels"},
  };
  auto dir = copy_fixture("tiny-qwen2", "bad-config-ranges");  // the 4.x form: rope_theta at the top
  const json good = hs::test::read_json(dir / "config.json");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field + " = " + c.value.dump());
    json cfg = good;
    cfg[c.field] = c.value;
    write(dir / "config.json", cfg.dump());
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find((dir / "config.json").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
  // The 5.x form nests rope_theta.
  auto v5 = copy_fixture("tiny-llama", "bad-config-ranges-v5");
  json cfg = hs::test::read_json(v5 / "config.json");
  ASSERT_TRUE(cfg.contains("rope_parameters"));
  cfg["rope_parameters"]["rope_theta"] = -1;
  write(v5 / "config.json", cfg.dump());
  auto msg = load_error(v5);
  EXPECT_NE(msg.find("rope_parameters.rope_theta"), std::string::npos) << msg;
  // config_fuzz's finding: llama3 RoPE with a rope_theta past float32's range validated, then
  // gave inverse frequencies of 0 (transformers' float32 computation too); the factors are
  // bounded for the same reason.
  ASSERT_EQ(cfg["rope_parameters"]["rope_type"], "llama3");
  for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{
           {"rope_theta", 5.2222e134}, {"factor", 1e300}, {"low_freq_factor", 1e-30}, {"high_freq_factor", 1e7}}) {
    SCOPED_TRACE(key);
    json bad = cfg;
    bad["rope_parameters"]["rope_theta"] = 500000.0;
    bad["rope_parameters"][key] = value;
    write(v5 / "config.json", bad.dump());
    msg = load_error(v5);
    EXPECT_NE(msg.find((v5 / "config.json").string() + ": field 'rope_parameters." + key + "' must be a number in ["),
              std::string::npos)
        << msg;
  }
  // A number too large for a double names the file and the field, not only nlohmann's text.
  std::string text = good.dump();
  text.replace(text.find("\"vocab_size\":") + 13, 3, "1" + std::string(400, '0'));
  write(dir / "config.json", text);
  msg = load_error(dir);
  EXPECT_NE(msg.find((dir / "config.json").string() + ": field 'vocab_size': a number past a double's range"),
            std::string::npos)
      << msg;
}

namespace {
/// The ConfigError of ModelConfig::from_file, summarize_config and GenerationConfig::load on
/// `file`, when all three give the same one (else the three, for the failure message).
std::string config_error(const fs::path& file) {
  std::string msgs[3];
  try {
    (void)ModelConfig::from_file(file);
  } catch (const ConfigError& e) {
    msgs[0] = e.what();
  }
  try {
    (void)summarize_config(file);
  } catch (const ConfigError& e) {
    msgs[1] = e.what();
  }
  try {
    (void)GenerationConfig::load(file, ModelConfig{});
  } catch (const ConfigError& e) {
    msgs[2] = e.what();
  }
  if (msgs[0] == msgs[1] && msgs[1] == msgs[2]) return msgs[0];
  return "from_file: " + msgs[0] + " | summarize_config: " + msgs[1] + " | GenerationConfig: " + msgs[2];
}
}  // namespace

// Found by a hostile try-out: a config.json that is not JSON (empty, a NUL byte, trailing
// garbage, NaN, bytes that are not UTF-8) was named with nlohmann's own text ("invalid JSON:
// [json.exception.parse_error.101] parse error at line 1, column 1: ..."). The file, the line
// and column, and the reason in plain words.
TEST(BadInput, ConfigJsonThatIsNotJsonIsNamedInPlainWords) {
  const fs::path file = hs::test::scratch_dir("bad-config-syntax") / "config.json";
  const std::pair<std::string, std::string> cases[] = {
      {"", "invalid JSON at line 1, column 1 (byte 0): the text is empty (no JSON value)"},
      {std::string("{\"vocab_size\": 1\0}", 18),
       "invalid JSON at line 1, column 17 (byte 16): a NUL byte (0x00): JSON text never holds one"},
      {"{\"vocab_size\": 1}\n}garbage",
       "invalid JSON at line 2, column 1 (byte 18): more text after the JSON value, from '}' (0x7D)"},
      {"{\"rope_theta\": NaN}",
       "invalid JSON at line 1, column 16 (byte 15): 'NaN' is not a JSON value (JSON has no NaN or Infinity)"},
      {"{\"model_type\": \"ll\xFF\"}", "invalid JSON at line 1, column 19 (byte 18): a string holds bytes that "
                                     "are not UTF-8"},
      {"{\"vocab_size\": }", "invalid JSON at line 1, column 16 (byte 15): found '}' where a value was expected"},
      {"{\"vocab_size\": 1e999}", "field 'vocab_size': a number past a double's range at line 1, column 16 (byte 15)"},
  };
  for (const auto& [text, says] : cases) {
    SCOPED_TRACE(text);
    write(file, text);
    const std::string msg = config_error(file);
    EXPECT_EQ(msg, file.string() + ": " + says);
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
}

// Found by a hostile try-out: a config.json with a key nested 5,000,000 deep was read (and only
// the 100 MB size cap bounded a string). Nesting past 64 levels and strings past 1 MiB are
// refused before nlohmann builds anything, naming the file and where; error texts stay short.
TEST(BadInput, ConfigJsonNestingAndStringsAreBounded) {
  const fs::path dir = hs::test::scratch_dir("bad-config-bounds");
  const fs::path file = dir / "config.json";
  json cfg = hs::test::read_json(hs::test::tiny_checkpoint("tiny-llama") / "config.json");
  const std::string head = "{\"a\": ";
  write(file, head + std::string(5'000'000, '[') + std::string(5'000'000, ']') + ", " + cfg.dump().substr(1));
  EXPECT_EQ(config_error(file),
            file.string() + ": JSON nested deeper than 64 levels (byte " + std::to_string(head.size() + 63) + ")");

  cfg["note"] = std::string(size_t{1} << 20, 'x');  // 1 MiB: read
  write(file, cfg.dump());
  EXPECT_NO_THROW((void)ModelConfig::from_file(file));
  cfg["note"] = std::string((size_t{1} << 20) + 1, 'x');
  const std::string text = cfg.dump();
  write(file, text);
  const size_t at = text.find("\"xxx");
  EXPECT_EQ(config_error(file), file.string() + ": a string longer than 1 MiB at line 1, column " +
                                    std::to_string(at + 1) + " (byte " + std::to_string(at) +
                                    ") (hookscope reads strings up to that size)");
  // A long string quoted by a message is cut.
  cfg["note"] = "";
  cfg["model_type"] = std::string(500'000, 'm');
  cfg.erase("architectures");
  write(file, cfg.dump());
  std::string msg;
  try {
    (void)ModelConfig::from_file(file);
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("unknown architecture 'mmm"), std::string::npos) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 1000u);
}

// A FIFO or a folder where config.json, generation_config.json or tokenizer.json should be is
// refused at once (it used to block forever on the FIFO's open).
TEST(BadInput, AFifoOrAFolderInPlaceOfAJsonFileIsRefusedAtOnce) {
  for (const char* name : {"config.json", "generation_config.json"})
    for (const bool fifo : {true, false}) {
      SCOPED_TRACE(std::string(name) + (fifo ? " as a FIFO" : " as a folder"));
      auto dir = copy_fixture("tiny-llama", std::string("bad-special-") + (fifo ? "fifo-" : "dir-") + name);
      fs::remove(dir / name);
      if (fifo) ASSERT_EQ(::mkfifo((dir / name).c_str(), 0644), 0);
      else fs::create_directory(dir / name);
      const auto msg = load_error(dir);
      EXPECT_NE(msg.find((dir / name).string() + ": " + (fifo ? "not a regular file" : "a folder, not a file")),
                std::string::npos)
          << msg;
    }
}

// A config that builds fewer layers than the checkpoint holds is refused naming a tensor it
// leaves out (transformers only warns, and the model then computes something else).
TEST(BadInput, CheckpointTensorsTheConfigDoesNotUseAreNamed) {
  auto dir = copy_fixture("tiny-llama", "bad-unused-tensors");
  json cfg = hs::test::read_json(dir / "config.json");
  ASSERT_GE(cfg["num_hidden_layers"].get<int>(), 2);
  cfg["num_hidden_layers"] = 1;
  write(dir / "config.json", cfg.dump());
  const auto msg = load_error(dir);
  EXPECT_NE(msg.find("'model.layers.1."), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_hidden_layers 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir / "config.json").string()), std::string::npos) << msg;
}

// A tied model's checkpoint may carry the tied copy (lm_head.weight); one of another shape than
// the embedding means the checkpoint is not this model's: transformers refuses it as a size
// mismatch, and so does hookscope (it was ignored).
TEST(BadInput, ATiedCopyOfAnotherShapeIsNamed) {
  auto dir = copy_fixture("tiny-qwen3", "bad-tied-shape");
  ASSERT_TRUE(hs::test::read_json(dir / "config.json")["tie_word_embeddings"].get<bool>());
  // model.safetensors becomes shard 1 of 2; shard 2 holds a [10, 64] lm_head.weight.
  fs::rename(dir / "model.safetensors", dir / "model-00001-of-00002.safetensors");
  const std::string first = hs::test::read_file(dir / "model-00001-of-00002.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, first.data(), 8);
  const json first_header = json::parse(first.substr(8, n));
  json map = json::object();
  for (auto it = first_header.begin(); it != first_header.end(); ++it)
    if (it.key() != "__metadata__") map[it.key()] = "model-00001-of-00002.safetensors";
  ASSERT_FALSE(map.contains("lm_head.weight"));
  map["lm_head.weight"] = "model-00002-of-00002.safetensors";
  write(dir / "model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", map}}.dump());
  std::string header = R"({"lm_head.weight":{"dtype":"F32","shape":[10,64],"data_offsets":[0,2560]}})";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string second(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(second.data(), &len, 8);
  write(dir / "model-00002-of-00002.safetensors", second + header + std::string(2560, '\0'));
  const auto msg = load_error(dir);
  EXPECT_NE(msg.find("tensor 'lm_head.weight' in " + (dir / "model-00002-of-00002.safetensors").string() +
                     " has shape [10, 64]"),
            std::string::npos)
      << msg;
}

// A folder with both model.safetensors and model.safetensors.index.json (+ shards), holding
// different weights: hookscope loads what transformers' from_pretrained loads.
TEST(Checkpoint, SingleFileAndIndexTogetherLoadWhatTransformersLoads) {
  const fs::path tiny = hs::test::tiny_checkpoint("tiny-llama");
  const fs::path dir = hs::test::cached_oracle("checkpoint-choice", "checkpoint_choice.py", {"--src", tiny.string()});
  const json ref = hs::test::read_json(dir / "result.json");
  EXPECT_EQ(ref["loaded"], "single") << "transformers' rule changed: follow it";
  LoadedModel lm = load_model((dir / "model").string());
  c10::InferenceMode g;
  auto ids = torch::tensor(ref["prompt_ids"].get<std::vector<int64_t>>(), torch::kInt64).unsqueeze(0);
  auto logits = lm.model->forward(ids, KVCache::dynamic_cache(lm.config.num_hidden_layers))[0][-1];
  EXPECT_LE(max_abs_diff(logits, to_tensor(ref["logits"])), 1e-4);
  EXPECT_GT(max_abs_diff(to_tensor(ref["logits"]), to_tensor(ref["shard_logits"])), 1e-3)
      << "the two weight sets must give different logits for this test to mean anything";
}

// Token ids outside the embedding and static caches longer than the model's positions are
// refused before the forward, naming the limit and the config file.
TEST(BadInput, GenerateChecksTokenIdsAndStaticCacheLength) {
  LoadedModel lm = load_model(hs::test::tiny_checkpoint("tiny-llama").string());
  const std::string cfg = lm.config.path.string();
  auto error_of = [&](const std::vector<int64_t>& ids, const GenerateOptions& go) {
    try {
      greedy_generate(*lm.model, ids, go);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  GenerateOptions go;
  go.max_new_tokens = 2;
  std::string msg = error_of({5, lm.config.vocab_size, 7}, go);
  EXPECT_NE(msg.find("token id " + std::to_string(lm.config.vocab_size) + " (position 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(cfg), std::string::npos) << msg;
  EXPECT_NE(error_of({-3}, go).find("token id -3"), std::string::npos);
  go.static_cache = true;
  go.max_new_tokens = lm.config.max_position_embeddings;
  msg = error_of({5, 6}, go);
  EXPECT_NE(msg.find("max_position_embeddings " + std::to_string(lm.config.max_position_embeddings)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find(cfg), std::string::npos) << msg;
  go.max_new_tokens = lm.config.max_position_embeddings - 2;  // exactly fits
  EXPECT_EQ(error_of({5, 6}, go), "");
}

TEST(BadInput, PickleCheckpointIsRefused) {
  auto dir = hs::test::scratch_dir("bad-pickle");
  fs::copy(hs::test::tiny_checkpoint("tiny-qwen3") / "config.json", dir / "config.json");
  write(dir / "pytorch_model.bin", "not really a pickle");
  auto msg = load_error(dir);
  EXPECT_NE(msg.find("refusing to load pickle checkpoint"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pytorch_model.bin"), std::string::npos) << msg;
}

TEST(BadInput, UnknownModelIdSaysWhereItLooked) {
  std::string msg;
  try {
    resolve_model_path("no-such-org/no-such-model");
  } catch (const std::exception& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("offline HF cache"), std::string::npos) << msg;
}

TEST(ModelResolution, FindsAModelIdInTheOfflineHfCache) {
  auto hub = hs::test::scratch_dir("hf-hub");
  fs::path snap = hub / "models--tiny-org--tiny-qwen3" / "snapshots" / "0123abcd";
  fs::create_directories(snap);
  fs::create_directories(hub / "models--tiny-org--tiny-qwen3" / "refs");
  write(hub / "models--tiny-org--tiny-qwen3" / "refs" / "main", "0123abcd");
  for (const auto& e : fs::directory_iterator(hs::test::tiny_checkpoint("tiny-qwen3")))
    fs::copy(e.path(), snap / e.path().filename());
  setenv("HF_HUB_CACHE", hub.c_str(), 1);
  EXPECT_EQ(resolve_model_path("tiny-org/tiny-qwen3"), snap);
  LoadedModel lm = load_model("tiny-org/tiny-qwen3");
  EXPECT_EQ(lm.config.family, Family::Qwen3);
  // A refs/main that would lead out of snapshots/ is refused, naming the file.
  // Empty, several lines or too long: refused too, never a guess at another snapshot.
  for (const std::string& bad :
       std::vector<std::string>{"../../../../tmp", "..", "0123abcd/../../x", std::string("01\0../x", 7), "",
                                "0123abcd\njunk", std::string(300, 'a')}) {
    write(hub / "models--tiny-org--tiny-qwen3" / "refs" / "main", bad);
    try {
      resolve_model_path("tiny-org/tiny-qwen3");
      ADD_FAILURE() << "refs/main '" << bad << "' was followed";
    } catch (const hs::models::ModelLoadError& e) {
      EXPECT_NE(std::string(e.what()).find("refs/main holds"), std::string::npos) << e.what();
    }
  }
  // A refs/main naming a snapshot that is not there: refused, never another snapshot instead.
  write(hub / "models--tiny-org--tiny-qwen3" / "refs" / "main", "ccc333");
  try {
    resolve_model_path("tiny-org/tiny-qwen3");
    ADD_FAILURE() << "a missing snapshot was replaced by another";
  } catch (const hs::models::ModelLoadError& e) {
    EXPECT_NE(std::string(e.what()).find("names snapshot ccc333"), std::string::npos) << e.what();
  }
  unsetenv("HF_HUB_CACHE");
}

}  // namespace

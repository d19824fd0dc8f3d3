#include "models/config.h"

#include "models/regular_file.h"
#include "storage/bounded_json.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

namespace hs::models {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const fs::path& origin, const std::string& msg) {
  throw ConfigError(origin.string() + ": " + msg);
}

/// A string of the file, cut for a message (a string may be up to 1 MiB).
std::string cut(const std::string& s) { return s.size() > 80 ? s.substr(0, 77) + "..." : s; }

const json* field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

// The largest values accepted, far above any released checkpoint (Llama 3.1 405B: hidden 16384,
// intermediate 53248, 126 layers, 128 heads; vocabularies up to ~256k; contexts up to ~10M), so
// that a corrupt config is refused before the module tree (or a cache) is sized from it.
constexpr int64_t kMaxHidden = int64_t{1} << 20;
/// config.json / generation_config.json: a few KB in every real checkpoint.
constexpr uint64_t kMaxConfigBytes = 100'000'000;
/// Their JSON: real files nest a few levels (rope_scaling, text_config) and hold short strings.
constexpr storage::JsonLimits kConfigJsonLimits{
    .max_depth = 64, .max_bytes = kMaxConfigBytes, .max_string_bytes = size_t{1} << 20};
constexpr int64_t kMaxIntermediate = int64_t{1} << 22;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = int64_t{1} << 16;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 30;

[[noreturn]] void out_of_range(const fs::path& origin, const std::string& name, const std::string& got, int64_t min,
                               int64_t max) {
  fail(origin, "field '" + name + "' must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                   "], got " + got);
}

// An integer field within [min, max]; JSON integers beyond int64 are named as written.
int64_t int_in_range(const json& v, const std::string& name, const fs::path& origin, int64_t min, int64_t max) {
  if (!v.is_number_integer()) fail(origin, "field '" + name + "' must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))
    out_of_range(origin, name, std::to_string(v.get<uint64_t>()), min, max);
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) out_of_range(origin, name, std::to_string(x), min, max);
  return x;
}

int64_t req_int(const json& j, const char* name, const fs::path& origin, int64_t min, int64_t max) {
  const json* v = field(j, name);
  if (!v) fail(origin, std::string("missing required field '") + name + "'");
  return int_in_range(*v, name, origin, min, max);
}

std::optional<int64_t> opt_int(const json& j, const char* name, const fs::path& origin,
                               int64_t min = std::numeric_limits<int64_t>::min(),
                               int64_t max = std::numeric_limits<int64_t>::max()) {
  const json* v = field(j, name);
  if (!v) return std::nullopt;
  return int_in_range(*v, name, origin, min, max);
}

double opt_num(const json& j, const char* name, double dflt, const fs::path& origin) {
  const json* v = field(j, name);
  if (!v) return dflt;
  if (!v->is_number()) fail(origin, std::string("field '") + name + "' must be a number");
  return v->get<double>();
}

// A number that must be finite and > 0 (`max`: inclusive upper bound).
double positive_num(const json& j, const char* name, double dflt, const fs::path& origin, const std::string& shown,
                    double max = std::numeric_limits<double>::max()) {
  const double x = opt_num(j, name, dflt, origin);
  if (!std::isfinite(x) || x <= 0 || x > max) {
    std::ostringstream o;
    o << "field '" << shown << "' must be a number > 0" << (max < std::numeric_limits<double>::max() ? " and <= " : "");
    if (max < std::numeric_limits<double>::max()) o << max;
    o << ", got " << x;
    fail(origin, o.str());
  }
  return x;
}

// A number that must be finite and in [lo, hi].
double bounded_num(const json& j, const char* name, double dflt, const fs::path& origin, const std::string& shown,
                   double lo, double hi) {
  const double x = opt_num(j, name, dflt, origin);
  if (!(x >= lo && x <= hi)) {  // NaN fails too
    std::ostringstream o;
    o << "field '" << shown << "' must be a number in [" << lo << ", " << hi << "], got " << x;
    fail(origin, o.str());
  }
  return x;
}

// The rotary embedding's inverse frequencies are computed in float32 (as transformers does):
// rope_theta^(-2i/dim) / factor stays a normal float > 0 for any theta and factors in these
// ranges (the largest released rope_theta is around 1e8; llama3's factors are 1 to 32).
constexpr double kMinRopeTheta = 1, kMaxRopeTheta = 1e18;
constexpr double kMinRopeFactor = 1e-3, kMaxRopeFactor = 1e6;

bool opt_bool(const json& j, const char* name, bool dflt, const fs::path& origin) {
  const json* v = field(j, name);
  if (!v) return dflt;
  if (!v->is_boolean()) fail(origin, std::string("field '") + name + "' must be true or false");
  return v->get<bool>();
}

std::vector<int64_t> int_or_list(const json* v, const char* name, const fs::path& origin) {
  std::vector<int64_t> out;
  if (!v) return out;
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (v->is_number_integer()) {
    out.push_back(int_in_range(*v, name, origin, lo, hi));
  } else if (v->is_array()) {
    for (const auto& e : *v) {
      if (!e.is_number_integer()) fail(origin, std::string("field '") + name + "' must hold integers");
      out.push_back(int_in_range(e, name, origin, lo, hi));
    }
  } else {
    fail(origin, std::string("field '") + name + "' must be an integer or a list of integers");
  }
  return out;
}

json read_json_file(const fs::path& file) {
  std::string text;
  try {
    text = read_regular_file(file, kMaxConfigBytes);  // a FIFO or a folder there: refused, not waited on
  } catch (const RegularFileError& e) {
    throw ConfigError(e.what());
  }
  // Size, nesting, string length and NUL bytes checked before nlohmann builds anything
  // (storage/bounded_json.h): a key nested 5,000,000 deep parsed, then overflowed the stack.
  try {
    storage::check_json_bounds(text, file.string(), kConfigJsonLimits);
  } catch (const storage::JsonError& e) {
    if (e.kind() == storage::JsonError::Kind::Invalid)  // a NUL byte: worded as the parse errors below
      throw ConfigError(file.string() + ": invalid JSON " + e.invalid_at());
    throw ConfigError(e.what());
  }
  std::string key;  // the field being read, for a number nlohmann cannot hold
  const json::parser_callback_t note_key = [&key](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) key = parsed.get<std::string>();
    return true;
  };
  try {
    return json::parse(text, note_key);
  } catch (const json::exception&) {  // parse errors, and numbers past a double's range (out_of_range.406)
    const std::optional<storage::JsonSyntaxError> e = storage::find_json_syntax_error(text);
    if (!e) throw ConfigError(file.string() + ": invalid JSON");
    if (e->number_overflow)
      throw ConfigError(file.string() + ": " + (key.empty() ? "" : "field '" + key + "': ") +
                        "a number past a double's range at " + storage::json_position(text, e->byte));
    throw ConfigError(file.string() + ": invalid JSON " + storage::describe_json_error(text, *e));
  }
}

void parse_rope(const json& j, ModelConfig& c, const fs::path& origin) {
  // 4.x: rope_theta + rope_scaling; 5.x: rope_parameters (takes precedence).
  c.rope.theta = bounded_num(j, "rope_theta", 10000.0, origin, "rope_theta", kMinRopeTheta, kMaxRopeTheta);
  c.rope.partial_rotary_factor = opt_num(j, "partial_rotary_factor", 1.0, origin);
  const json* scaling = field(j, "rope_parameters");
  const char* scaling_name = "rope_parameters";
  if (scaling) {
    if (!scaling->is_object()) fail(origin, "field 'rope_parameters' must be an object");
    // A 5.x config may nest per-layer-type parameters; these families use one set.
    if (!scaling->contains("rope_theta") && !scaling->contains("rope_type") &&
        scaling->contains("full_attention"))
      scaling = &(*scaling)["full_attention"];
    c.rope.theta = bounded_num(*scaling, "rope_theta", c.rope.theta, origin, "rope_parameters.rope_theta", kMinRopeTheta,
                               kMaxRopeTheta);
    c.rope.partial_rotary_factor =
        opt_num(*scaling, "partial_rotary_factor", c.rope.partial_rotary_factor, origin);
  } else {
    scaling = field(j, "rope_scaling");
    scaling_name = "rope_scaling";
    if (scaling && !scaling->is_object()) fail(origin, "field 'rope_scaling' must be an object or null");
  }
  if (!scaling) return;
  std::string type = "default";
  if (const json* t = field(*scaling, "rope_type"); t && t->is_string()) type = t->get<std::string>();
  else if (const json* t2 = field(*scaling, "type"); t2 && t2->is_string()) type = t2->get<std::string>();
  c.rope.type = type;
  if (type == "default") return;
  if (type == "linear") {
    c.rope.factor = bounded_num(*scaling, "factor", 1.0, origin, std::string(scaling_name) + ".factor", kMinRopeFactor,
                                kMaxRopeFactor);
    return;
  }
  if (type == "llama3") {
    const json& s = *scaling;
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!field(s, k)) fail(origin, std::string("field '") + scaling_name + "." + k + "' is required for rope_type llama3");
    const std::string sn = scaling_name;
    for (auto [name, to] : {std::pair{"factor", &c.rope.factor}, std::pair{"low_freq_factor", &c.rope.low_freq_factor},
                            std::pair{"high_freq_factor", &c.rope.high_freq_factor}})
      *to = bounded_num(s, name, 1.0, origin, sn + "." + name, kMinRopeFactor, kMaxRopeFactor);
    c.rope.original_max_position_embeddings = static_cast<int64_t>(positive_num(
        s, "original_max_position_embeddings", 0, origin, sn + ".original_max_position_embeddings",
        static_cast<double>(kMaxPositions)));
    if (c.rope.high_freq_factor == c.rope.low_freq_factor)
      fail(origin, std::string("field '") + scaling_name + "': high_freq_factor must differ from low_freq_factor");
    return;
  }
  fail(origin, std::string("field '") + scaling_name + ".rope_type' is '" + cut(type) +
                   "', which hookscope does not support (supported: default, linear, llama3)");
}

// The architectures the port has: transformers' class name and config model_type of each.
struct FamilyName {
  Family family;
  const char* architecture;
  const char* model_type;
};
constexpr FamilyName kFamilies[] = {{Family::Llama, "LlamaForCausalLM", "llama"},
                                    {Family::Qwen2, "Qwen2ForCausalLM", "qwen2"},
                                    {Family::Qwen3, "Qwen3ForCausalLM", "qwen3"}};

// The family `architecture` names, or without one the family of `model_type`; null for neither.
const FamilyName* family_of(const std::string& architecture, const std::string& model_type) {
  for (const FamilyName& f : kFamilies)
    if (architecture.empty() ? model_type == f.model_type : architecture == f.architecture) return &f;
  return nullptr;
}

// `architectures[0]` and `model_type` when they are strings ("" otherwise).
std::pair<std::string, std::string> names_of(const json& j) {
  std::pair<std::string, std::string> n;
  const json* archs = field(j, "architectures");
  if (archs && archs->is_array() && !archs->empty() && (*archs)[0].is_string()) n.first = (*archs)[0].get<std::string>();
  if (const json* mt = field(j, "model_type"); mt && mt->is_string()) n.second = mt->get<std::string>();
  return n;
}

}  // namespace

std::string ported_architectures() {
  std::string out;
  for (const FamilyName& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.architecture);
  return out;
}

ConfigSummary summarize_config(const fs::path& file) {
  const json j = read_json_file(file);
  if (!j.is_object()) fail(file, "config must be a JSON object");
  const auto [architecture, model_type] = names_of(j);
  ConfigSummary s;
  s.architecture = architecture.empty() ? model_type : architecture;
  s.ported = !s.architecture.empty() && family_of(architecture, model_type) != nullptr;
  s.vocab_size = opt_int(j, "vocab_size", file, 1, kMaxVocab);
  if (const json* text = field(j, "text_config"); !s.vocab_size && text && text->is_object())
    s.vocab_size = opt_int(*text, "vocab_size", file, 1, kMaxVocab);
  return s;
}

c10::ScalarType parse_dtype(const std::string& name, const std::string& what) {
  std::string n = name;
  if (n.rfind("torch.", 0) == 0) n = n.substr(6);
  if (n == "float32" || n == "f32" || n == "fp32" || n == "float") return c10::kFloat;
  if (n == "bfloat16" || n == "bf16") return c10::kBFloat16;
  if (n == "float16" || n == "f16" || n == "fp16" || n == "half") return c10::kHalf;
  throw ConfigError(what + ": unsupported dtype '" + cut(name) + "' (supported: float32, bfloat16, float16)");
}

std::string dtype_short_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "f32";
    case c10::kBFloat16: return "bf16";
    case c10::kHalf: return "f16";
    default: return c10::toString(t);
  }
}

ModelConfig ModelConfig::from_file(const fs::path& file) { return from_json(read_json_file(file), file); }

ModelConfig ModelConfig::from_json(const json& j, const fs::path& origin) {
  if (!j.is_object()) fail(origin, "config must be a JSON object");
  ModelConfig c;
  c.path = origin;
  std::tie(c.architecture, c.model_type) = names_of(j);
  if (c.architecture.empty() && c.model_type.empty())
    fail(origin, "missing 'architectures' and 'model_type': cannot tell which model this is");
  const FamilyName* family = family_of(c.architecture, c.model_type);
  if (!family)
    fail(origin, "unknown architecture '" + cut(c.architecture.empty() ? c.model_type : c.architecture) +
                     "' in field 'architectures' (supported: " + ported_architectures() +
                     "; `hookscope capture --engine torch` runs any architecture transformers' "
                     "AutoModelForCausalLM loads)");
  c.family = family->family;
  c.architecture = family->architecture;
  c.hidden_size = req_int(j, "hidden_size", origin, 1, kMaxHidden);
  c.intermediate_size = req_int(j, "intermediate_size", origin, 1, kMaxIntermediate);
  c.num_hidden_layers = req_int(j, "num_hidden_layers", origin, 1, kMaxLayers);
  c.num_attention_heads = req_int(j, "num_attention_heads", origin, 1, kMaxHeads);
  c.num_key_value_heads =
      opt_int(j, "num_key_value_heads", origin, 1, c.num_attention_heads).value_or(c.num_attention_heads);
  if (c.num_key_value_heads < 1 || c.num_attention_heads % c.num_key_value_heads != 0)
    fail(origin, "field 'num_key_value_heads' (" + std::to_string(c.num_key_value_heads) +
                     ") must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  auto hd = opt_int(j, "head_dim", origin, 2, kMaxHeadDim);
  if (hd) {
    if (*hd % 2) fail(origin, "field 'head_dim' must be a positive even integer");
    c.head_dim = *hd;
  } else {
    if (c.hidden_size % c.num_attention_heads)
      fail(origin, "hidden_size is not divisible by num_attention_heads and no 'head_dim' is given");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2) fail(origin, "hidden_size / num_attention_heads (the head size) must be even for rotary embeddings");
  c.vocab_size = req_int(j, "vocab_size", origin, 1, kMaxVocab);
  c.max_position_embeddings = opt_int(j, "max_position_embeddings", origin, 1, kMaxPositions).value_or(2048);
  c.rms_norm_eps = positive_num(j, "rms_norm_eps", 1e-6, origin, "rms_norm_eps", 1.0);
  if (const json* act = field(j, "hidden_act")) {
    if (!act->is_string()) fail(origin, "field 'hidden_act' must be a string");
    c.hidden_act = act->get<std::string>();
  }
  if (c.hidden_act != "silu")
    fail(origin, "field 'hidden_act' is '" + c.hidden_act + "'; hookscope supports 'silu'");
  // LlamaConfig, Qwen2Config and Qwen3Config all default tie_word_embeddings to false.
  c.tie_word_embeddings = opt_bool(j, "tie_word_embeddings", false, origin);
  c.attention_bias = c.family == Family::Qwen2 ? true : opt_bool(j, "attention_bias", false, origin);
  c.mlp_bias = c.family == Family::Llama ? opt_bool(j, "mlp_bias", false, origin) : false;
  if (c.family == Family::Qwen2 || c.family == Family::Qwen3) {
    if (opt_bool(j, "use_sliding_window", false, origin))
      fail(origin, "field 'use_sliding_window' is true; sliding-window attention is not supported");
  }
  parse_rope(j, c, origin);
  if (c.rope.partial_rotary_factor <= 0 || c.rope.partial_rotary_factor > 1)
    fail(origin, "field 'partial_rotary_factor' must be in (0, 1]");
  if (const auto rotary = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rope.partial_rotary_factor);
      rotary < 2 || rotary % 2)
    fail(origin, "field 'partial_rotary_factor': head_dim " + std::to_string(c.head_dim) + " x " +
                     std::to_string(c.rope.partial_rotary_factor) + " gives " + std::to_string(rotary) +
                     " rotary channels; rotary embeddings need an even number, at least 2");
  const json* dt = field(j, "dtype");
  if (!dt) dt = field(j, "torch_dtype");
  if (dt) {
    if (!dt->is_string()) fail(origin, "field 'dtype' must be a string");
    try {
      c.dtype = parse_dtype(dt->get<std::string>(), origin.string() + ": field 'dtype'");
    } catch (const ConfigError&) {
      c.dtype = std::nullopt;  // e.g. "float64": not a load dtype; the caller picks one
    }
  }
  c.bos_token_id = opt_int(j, "bos_token_id", origin);
  c.eos_token_ids = int_or_list(field(j, "eos_token_id"), "eos_token_id", origin);
  c.pad_token_id = opt_int(j, "pad_token_id", origin);
  return c;
}

GenerationConfig GenerationConfig::load(const fs::path& file, const ModelConfig& fallback) {
  GenerationConfig g;
  g.eos_token_ids = fallback.eos_token_ids;
  g.bos_token_id = fallback.bos_token_id;
  g.pad_token_id = fallback.pad_token_id;
  if (!fs::exists(file)) return g;
  json j = read_json_file(file);
  if (!j.is_object()) fail(file, "generation config must be a JSON object");
  if (const json* e = field(j, "eos_token_id")) g.eos_token_ids = int_or_list(e, "eos_token_id", file);
  if (auto b = opt_int(j, "bos_token_id", file)) g.bos_token_id = b;
  if (auto p = opt_int(j, "pad_token_id", file)) g.pad_token_id = p;
  return g;
}

}  // namespace hs::models

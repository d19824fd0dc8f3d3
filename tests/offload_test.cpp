// Disk-offload store (hooks/offload.h) against the real accelerate 1.15 (tests/oracles/
// offload_oracle.py): folders written by Python are read here bit-exactly, folders written here
// are read by accelerate and compared byte for byte with what accelerate writes itself, plus
// transformers' safetensors-backed index entries, the weight-map semantics
// (OffloadedWeightsLoader, PrefixedDataset) and case 77, and the errors for bad input.
#include "hooks/offload.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <thread>

#include "models/safetensors.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace hs::hooks;

namespace {

std::string hex_of(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::vector<std::string> json_strings(const json& j) { return j.get<std::vector<std::string>>(); }

std::string tiny() { return hs::test::tiny_checkpoint("tiny-qwen3").string(); }

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

std::string read_text(const fs::path& p) { return hs::test::read_file(p); }

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Runs `fn` and returns the OffloadError message; fails the test if nothing (or something else)
/// is thrown.
template <typename F>
std::string offload_error(F&& fn) {
  try {
    fn();
  } catch (const OffloadError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected OffloadError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected OffloadError, nothing was thrown";
  return "";
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

/// A .dat folder written here with one entry, for the bad-input tests.
fs::path one_entry_folder(const std::string& name, const torch::Tensor& t, const std::string& key = "w") {
  fs::path dir = hs::test::scratch_dir(name);
  offload_state_dict(dir, {{key, t}});
  return dir;
}

void compare_report(const json& rep, const std::string& what) {
  SCOPED_TRACE(what + ": " + rep.dump());
  EXPECT_TRUE(rep["index_text_identical"].get<bool>());
  EXPECT_TRUE(rep["index_equal"].get<bool>());
  EXPECT_TRUE(rep["index_order_equal"].get<bool>());
  EXPECT_TRUE(rep["files_equal"].get<bool>());
  EXPECT_TRUE(rep["dat_mismatch"].empty());
  EXPECT_TRUE(rep["value_mismatch"].empty());
  EXPECT_TRUE(rep["loader_keys_equal"].get<bool>());
  EXPECT_GT(rep["count"].get<int>(), 0);
}

}  // namespace

// ---- interop: Python writes, C++ reads ---------------------------------------------------------

TEST(OffloadInterop, ReadsWhatAccelerateWritesBitExactly) {
  fs::path dir = hs::test::scratch_dir("offload_py_write");
  json out = json::parse(hs::test::run_oracle("offload_oracle.py", {"write", dir.string(), tiny()}));
  ASSERT_TRUE(out.contains("basic") && out.contains("tiny") && out.contains("single_bfloat16"));
  size_t checked = 0;
  for (const auto& [set, d] : out.items()) {
    SCOPED_TRACE(set);
    const fs::path folder = dir / set;
    OffloadIndex idx = read_offload_index(folder);
    EXPECT_EQ(idx.keys(), json_strings(d["order"]));
    OffloadedWeightsLoader loader(std::nullopt, folder);
    EXPECT_EQ(loader.keys(), json_strings(d["order"]));
    for (const auto& [name, t] : d["tensors"].items()) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(loader.contains(name));
      torch::Tensor v = loader.get(name);
      EXPECT_TRUE(v.device().is_cpu());
      EXPECT_EQ(idx.at(name).dtype, t["dtype"].get<std::string>());
      EXPECT_EQ(offload_dtype_name(v.scalar_type()), t["dtype"].get<std::string>());
      EXPECT_EQ(v.sizes().vec(), t["shape"].get<std::vector<int64_t>>());
      EXPECT_EQ(hex_of(v), t["hex"].get<std::string>());
      torch::Tensor again = load_offloaded_weight(folder / (name + ".dat"), idx.at(name));
      EXPECT_EQ(hex_of(again), hex_of(v));
      if (v.numel() > 0) {
        EXPECT_NE(again.data_ptr(), v.data_ptr()) << "every load is fresh storage";
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 50u);
  // Spot checks against worked examples computed by hand.
  EXPECT_EQ(out["basic"]["tensors"]["scalar_bf16"]["hex"], "6040");
  OffloadIndex basic = read_offload_index(dir / "basic");
  EXPECT_EQ(basic.at("scalar_bf16").shape, std::vector<int64_t>{});
  EXPECT_EQ(fs::file_size(dir / "basic" / "scalar_bf16.dat"), 2u);
  EXPECT_EQ(fs::file_size(dir / "basic" / "i64.dat"), 48u);
  EXPECT_EQ(fs::file_size(dir / "basic" / "empty_f32.dat"), 1u);  // what np.memmap leaves
  OffloadedWeightsLoader loader(std::nullopt, dir / "basic");
  torch::Tensor s = loader.get("scalar_bf16");
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(s.item<float>(), 3.5f);
  EXPECT_EQ(loader.get("empty_f32").sizes().vec(), (std::vector<int64_t>{0, 3}));
}

// ---- interop: C++ writes, Python reads and compares with its own writing -----------------------

TEST(OffloadInterop, AccelerateReadsWhatWeWriteAndBytesMatch) {
  fs::path dir = hs::test::scratch_dir("offload_cpp_write");
  const fs::path py = dir / "py";
  json out = json::parse(hs::test::run_oracle("offload_oracle.py", {"write", py.string(), tiny()}));
  std::vector<std::string> compare_args{"compare"}, sets;
  for (const auto& [set, d] : out.items()) {
    SCOPED_TRACE(set);
    OffloadedWeightsLoader src(std::nullopt, py / set);
    NamedTensors tensors;
    for (const auto& key : src.keys()) {
      torch::Tensor t = src.get(key);
      // Written from a non-contiguous tensor, as Python's was (arange(12).reshape(3,4).t()).
      if (key == "transposed") {
        t = torch::arange(12, torch::kFloat).reshape({3, 4}).t();
        ASSERT_FALSE(t.is_contiguous());
      }
      tensors.emplace_back(key, t);
    }
    const fs::path cpp = dir / "cpp" / set;
    if (set.starts_with("single_")) {
      // offload_weight + save_offload_index, as spec case 77.
      fs::create_directories(cpp);
      OffloadIndex index;
      offload_weight(tensors.at(0).second, "weight", cpp, index);
      ASSERT_EQ(index.size(), 1u);
      EXPECT_EQ(index.at("weight").shape, (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(index.at("weight").dtype, set.substr(7));
      save_offload_index(index, cpp);
    } else {
      OffloadIndex index = offload_state_dict(cpp, tensors);
      EXPECT_EQ(index, read_offload_index(cpp));
    }
    compare_args.push_back((py / set).string());
    compare_args.push_back(cpp.string());
    sets.push_back(set);
  }
  json reps = json::parse(hs::test::run_oracle("offload_oracle.py", compare_args));
  ASSERT_EQ(reps.size(), sets.size());
  for (size_t i = 0; i < sets.size(); ++i) compare_report(reps[i], sets[i]);
}

TEST(OffloadInterop, TinyCheckpointWrittenHereMatchesAccelerate) {
  fs::path dir = hs::test::scratch_dir("offload_ckpt");
  auto ckpt = hs::models::Checkpoint::open_dir(tiny());
  NamedTensors sd;
  for (const auto& name : ckpt.names()) sd.emplace_back(name, ckpt.get(name));
  ASSERT_GT(sd.size(), 10u);
  offload_state_dict(dir / "cpp", sd);
  json rep = json::parse(hs::test::run_oracle(
      "offload_oracle.py", {"ckpt", tiny(), (dir / "cpp").string(), (dir / "py").string()}));
  compare_report(rep, "tiny checkpoint");
  EXPECT_TRUE(rep["source_mismatch"].empty()) << rep.dump();
  EXPECT_EQ(rep["source_count"].get<size_t>(), sd.size());
}

TEST(OffloadInterop, SaveOffloadIndexMergesLikeAccelerate) {
  // An existing index.json in a different layout, with fields accelerate does not know, a
  // safetensors entry and a non-ASCII key: both merges must produce the same text.
  fs::path dir = hs::test::scratch_dir("offload_merge");
  const std::string existing =
      R"({"keep": {"dtype": "float16", "shape": [2], "extra": [1, 2.5, null, true, "x\u00e9/"]},)"
      R"( "over": {"dtype": "int8", "shape": [9]}, "caf\u00e9.w": {"dtype": "bool", "shape": []},)"
      R"( "st": {"safetensors_file": "/x/y.safetensors", "weight_name": "w", "dtype": "bfloat16"}})";
  for (const char* side : {"cpp", "py"}) {
    fs::create_directories(dir / side);
    write_text(dir / side / "index.json", existing);
  }
  OffloadIndex add;
  add.insert_or_assign("new.b", {"float32", {3, 1}, std::nullopt, std::nullopt});
  add.insert_or_assign("over", {"bfloat16", {}, std::nullopt, std::nullopt});
  add.insert_or_assign("new.a", {"float16", {}, std::string("/m/model.safetensors"), std::string("src")});
  add.insert_or_assign("new.c", {"", {}, std::string("/m/model.safetensors"), std::nullopt});
  save_offload_index(add, dir / "cpp");
  // The same entries as accelerate/transformers spell them.
  write_text(dir / "new.json",
             R"({"new.b": {"dtype": "float32", "shape": [3, 1]}, "over": {"dtype": "bfloat16", "shape": []},)"
             R"( "new.a": {"safetensors_file": "/m/model.safetensors", "weight_name": "src", "dtype": "float16"},)"
             R"( "new.c": {"safetensors_file": "/m/model.safetensors"}})");
  hs::test::run_oracle("offload_oracle.py", {"merge", (dir / "py").string(), (dir / "new.json").string()});
  EXPECT_EQ(read_text(dir / "cpp" / "index.json"), read_text(dir / "py" / "index.json"));
  // Our reader keeps the merged order and entries.
  OffloadIndex merged = read_offload_index(dir / "cpp");
  EXPECT_EQ(merged.keys(), (std::vector<std::string>{"keep", "over", "caf\xc3\xa9.w", "st", "new.b", "new.a", "new.c"}));
  EXPECT_EQ(merged.at("over").dtype, "bfloat16");
  EXPECT_EQ(*merged.at("st").weight_name, "w");
  // An empty index writes nothing.
  fs::path empty = dir / "empty";
  fs::create_directories(empty);
  save_offload_index(OffloadIndex{}, empty);
  EXPECT_FALSE(fs::exists(empty / "index.json"));
}

// ---- safetensors-backed entries ----------------------------------------------------------------

TEST(OffloadSafetensors, EntriesLoadWithDtypeCastLikeAccelerate) {
  fs::path dir = hs::test::scratch_dir("offload_st");
  // ordered_json: the oracle prints the loader's keys in its iteration order.
  auto want = nlohmann::ordered_json::parse(hs::test::run_oracle("offload_oracle.py", {"safetensors", dir.string()}));
  OffloadedWeightsLoader loader(std::nullopt, dir, std::nullopt, torch::Device(torch::kCPU));
  std::vector<std::string> keys;
  for (const auto& [k, v] : want.items()) keys.push_back(k);
  EXPECT_EQ(loader.keys(), keys);
  for (const auto& [k, v] : want.items()) {
    SCOPED_TRACE(k);
    torch::Tensor t = loader.get(k);
    EXPECT_EQ(offload_dtype_name(t.scalar_type()), v["dtype"].get<std::string>());
    EXPECT_EQ(t.sizes().vec(), v["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(hex_of(t), v["hex"].get<std::string>());
    // Fresh storage each time, never a view of the shared mapping.
    torch::Tensor again = loader.get(k);
    EXPECT_NE(again.data_ptr(), t.data_ptr());
    t.zero_();
    EXPECT_EQ(hex_of(loader.get(k)), v["hex"].get<std::string>());
    // check_entry_matches accepts the loaded shape/dtype and refuses another dtype.
    const OffloadIndexEntry& e = loader.index().at(k);
    EXPECT_NO_THROW(check_entry_matches(k, e, torch::empty(t.sizes(), t.options().device(torch::kMeta)), dir));
    EXPECT_NO_THROW(loader.check_matches(k, t));
    auto other = t.scalar_type() == torch::kFloat ? torch::kHalf : torch::kFloat;
    std::string msg = offload_error([&] { check_entry_matches(k, e, torch::empty(t.sizes(), other), dir); });
    EXPECT_HAS(msg, k);
    EXPECT_HAS(msg, "data.safetensors");
  }
  // Without a loader-level device the entries load on the CPU as well.
  OffloadedWeightsLoader plain(std::nullopt, dir);
  EXPECT_TRUE(plain.get("model.b.weight").device().is_cpu());
  EXPECT_EQ(plain.get("model.b.weight").scalar_type(), torch::kBFloat16);
}

TEST(OffloadSafetensors, TransformersDiskOffloadIndex) {
  // from_pretrained(device_map with "disk", dtype=bfloat16): transformers hands dispatch_model an
  // index of safetensors entries pointing into the checkpoint, cast fp32 -> bf16 on load.
  fs::path dir = hs::test::scratch_dir("offload_transformers");
  json out = json::parse(hs::test::run_oracle("offload_oracle.py", {"transformers", tiny(), dir.string()}));
  OffloadIndex index = read_offload_index(dir / "index");
  ASSERT_FALSE(index.empty());
  for (const auto& [k, e] : index) {
    EXPECT_TRUE(e.is_safetensors()) << k;
    EXPECT_EQ(e.dtype, "bfloat16") << k;
  }
  OffloadedWeightsLoader loader(std::nullopt, std::nullopt, index);
  size_t n = 0;
  for (const auto& [k, v] : out["values"].items()) {
    SCOPED_TRACE(k);
    torch::Tensor t = loader.get(k);
    EXPECT_EQ(t.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(t.sizes().vec(), v["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(hex_of(t), v["hex"].get<std::string>());
    EXPECT_NO_THROW(check_entry_matches(k, index.at(k), torch::empty(t.sizes(), torch::dtype(torch::kBFloat16).device(torch::kMeta)), dir));
    ++n;
  }
  EXPECT_EQ(n, index.size());
}

// ---- semantics (case 77) ---------------------------------------------------------------

TEST(OffloadSemantics, LoaderPrefixedDatasetAndExtractMatchAccelerate) {
  fs::path dir = hs::test::scratch_dir("offload_semantics");
  json py = json::parse(hs::test::run_oracle("offload_oracle.py", {"semantics", (dir / "py").string()}));
  // ModelForTest's state dict: Linear(3,4), BatchNorm1d(4), Linear(4,5).
  torch::manual_seed(0);
  NamedTensors sd = {
      {"linear1.weight", torch::randn({4, 3})},  {"linear1.bias", torch::randn({4})},
      {"batchnorm.weight", torch::ones({4})},    {"batchnorm.bias", torch::zeros({4})},
      {"batchnorm.running_mean", torch::zeros({4})}, {"batchnorm.running_var", torch::ones({4})},
      {"batchnorm.num_batches_tracked", torch::tensor(int64_t{0})},
      {"linear2.weight", torch::randn({5, 4})},  {"linear2.bias", torch::randn({5})}};
  std::vector<std::string> sd_keys;
  for (const auto& [k, t] : sd) sd_keys.push_back(k);
  EXPECT_EQ(sd_keys, json_strings(py["state_dict_keys"]));
  NamedTensors cpu_part, disk_part;
  for (const auto& kv : sd) (kv.first.find("linear2") == std::string::npos ? cpu_part : disk_part).push_back(kv);
  const fs::path folder = dir / "cpp";
  offload_state_dict(folder, disk_part);
  EXPECT_EQ(list_dir(folder), json_strings(py["written_files"]));

  auto l1 = std::make_shared<OffloadedWeightsLoader>(cpu_part, folder);
  EXPECT_EQ(l1->keys(), json_strings(py["mixed_keys"]));
  EXPECT_EQ(l1->size(), py["mixed_len"].get<size_t>());
  for (const auto& [k, t] : sd) EXPECT_TRUE(torch::equal(l1->get(k), t)) << k;

  OffloadedWeightsLoader l2(sd, folder);  // duplicates removed, state dict wins
  EXPECT_EQ(l2.keys(), json_strings(py["dup_keys"]));
  EXPECT_EQ(l2.size(), py["dup_len"].get<size_t>());
  EXPECT_TRUE(py["dup_same_object"].get<bool>());
  EXPECT_TRUE(l2.get("linear2.weight").is_same(sd[7].second));

  OffloadedWeightsLoader l3(NamedTensors{{"zzz", torch::zeros({1})}, {"linear2.bias", torch::ones({5})}}, folder);
  EXPECT_EQ(l3.keys(), json_strings(py["order_keys"]));
  EXPECT_EQ(OffloadedWeightsLoader(std::nullopt, folder).keys(), json_strings(py["index_only_keys"]));
  EXPECT_TRUE(py["fresh_pointer"].get<bool>());
  EXPECT_NE(l1->get("linear2.weight").data_ptr(), l1->get("linear2.weight").data_ptr());

  // PrefixedDataset: spec example.
  auto abc = std::make_shared<StateDictMap>(NamedTensors{
      {"a.x", torch::tensor(1)}, {"a.y", torch::tensor(2)}, {"b.z", torch::tensor(3)}});
  PrefixedDataset pd(abc, "a.");
  EXPECT_EQ(pd.keys(), json_strings(py["pd_list"]));
  EXPECT_EQ(pd.size(), py["pd_len"].get<size_t>());
  EXPECT_EQ(pd.contains("x"), py["pd_contains_x"].get<bool>());
  EXPECT_EQ(pd.contains("z"), py["pd_contains_z"].get<bool>());
  EXPECT_EQ(pd.get("x").item<int64_t>(), py["pd_get_x"].get<int64_t>());
  EXPECT_FALSE(pd.get_or_none("z").has_value());
  EXPECT_THROW(pd.get("z"), std::out_of_range);
  PrefixedDataset pl(l1, "linear2.");
  EXPECT_EQ(pl.keys(), json_strings(py["pd_loader_list"]));
  EXPECT_EQ(pl.size(), py["pd_loader_len"].get<size_t>());
  EXPECT_EQ(pl.contains("weight"), py["pd_loader_contains_weight"].get<bool>());
  EXPECT_TRUE(torch::equal(pl.get("weight"), sd[7].second));
  // Nested prefixes compose like nested Python PrefixedDatasets.
  PrefixedDataset nested(std::make_shared<PrefixedDataset>(l1, "linear2."), "");
  EXPECT_TRUE(torch::equal(nested.get("bias"), sd[8].second));

  // extract_submodules_state_dict, case 77 and more.
  auto extract = [](std::vector<std::string> keys, std::vector<std::string> modules) {
    NamedTensors in;
    for (size_t i = 0; i < keys.size(); ++i) in.emplace_back(keys[i], torch::tensor(static_cast<int64_t>(i)));
    json got = json::array();
    for (const auto& [k, t] : extract_submodules_state_dict(in, modules)) got.push_back({k, t.item<int64_t>()});
    return got;
  };
  EXPECT_EQ(extract({"a.1", "a.10", "a.2"}, {"a.1", "a.2"}), py["extract_1"]);
  EXPECT_EQ(extract({"a.1.a", "a.10.a", "a.2.a"}, {"a.1", "a.2"}), py["extract_2"]);
  EXPECT_EQ(extract({"a.b.c", "a.d", "a.b"}, {"a.b", "a"}), py["extract_overlap"]);
  EXPECT_EQ(extract({"a", "b.c"}, {""}), py["extract_root"]);
  NamedTensors picked = extract_submodules_state_dict(sd, {"linear2"});
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_TRUE(picked[0].second.is_same(sd[7].second)) << "references, not copies";

  // Errors.
  EXPECT_EQ(offload_error([] { OffloadedWeightsLoader(std::nullopt, std::nullopt); }),
            py["none_error"].get<std::string>());
  std::string msg = offload_error([&] { OffloadedWeightsLoader(std::nullopt, dir / "missing"); });
  EXPECT_EQ(py["missing_index_error"], "FileNotFoundError");
  EXPECT_HAS(msg, (dir / "missing" / "index.json").string());
  EXPECT_HAS(msg, "No such file");
  EXPECT_EQ(py["missing_key_error"], "KeyError");
  try {
    l1->get("nope");
    ADD_FAILURE() << "no throw";
  } catch (const std::out_of_range& e) {
    EXPECT_HAS(std::string(e.what()), "'nope'");
  }
  EXPECT_FALSE(l1->get_or_none("nope").has_value());
  EXPECT_TRUE(l1->get_or_none("linear2.bias").has_value());
}

TEST(OffloadSemantics, StateDictMapAndIndexOrder) {
  torch::Tensor a = torch::ones({2}), b = torch::zeros({3}), c = torch::full({1}, 5.0);
  StateDictMap m({{"a", a}, {"b", b}, {"a", c}});  // dict: first position, last value
  EXPECT_EQ(m.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(m.get("a").is_same(c));
  EXPECT_TRUE(m.get("b").is_same(b));
  OffloadIndex idx;
  idx.insert_or_assign("z", {"float32", {1}, std::nullopt, std::nullopt});
  idx.insert_or_assign("a", {"float32", {2}, std::nullopt, std::nullopt});
  idx.insert_or_assign("z", {"int8", {3}, std::nullopt, std::nullopt});
  EXPECT_EQ(idx.keys(), (std::vector<std::string>{"z", "a"}));
  EXPECT_EQ(idx.at("z").dtype, "int8");
  EXPECT_THROW(idx.at("q"), std::out_of_range);
}

// ---- writing details -------------------------------------------------------------------------

TEST(OffloadWrite, FormatAtomicityAndRefusals) {
  fs::path dir = hs::test::scratch_dir("offload_write");
  OffloadIndex index;
  offload_weight(torch::tensor(3.5, torch::kBFloat16), "s", dir, index);
  EXPECT_EQ(read_text(dir / "s.dat"), std::string("\x60\x40", 2));
  EXPECT_EQ(index.at("s").dtype, "bfloat16");
  EXPECT_TRUE(index.at("s").shape.empty());
  offload_weight(torch::arange(6).reshape({2, 3}), "i", dir, index);
  EXPECT_EQ(fs::file_size(dir / "i.dat"), 48u);
  offload_weight(torch::ones({2}, torch::kHalf), "h", dir, index);
  EXPECT_EQ(fs::file_size(dir / "h.dat"), 4u);
  offload_weight(torch::zeros({0, 3}), "e", dir, index);
  EXPECT_EQ(read_text(dir / "e.dat"), std::string("\0", 1));
  EXPECT_EQ(load_offloaded_weight(dir / "e.dat", index.at("e")).sizes().vec(), (std::vector<int64_t>{0, 3}));
  // A parameter that requires grad is written (upstream's .numpy() would refuse it).
  offload_weight(torch::ones({2}).requires_grad_(), "g", dir, index);
  EXPECT_EQ(fs::file_size(dir / "g.dat"), 8u);
  // Overwriting an existing file replaces it.
  offload_weight(torch::zeros({4}), "h", dir, index);
  EXPECT_EQ(fs::file_size(dir / "h.dat"), 16u);
  EXPECT_EQ(index.at("h").dtype, "float32");
  EXPECT_EQ(index.keys(), (std::vector<std::string>{"s", "i", "h", "e", "g"}));
  // A symlink at the target is replaced, never written through.
  write_text(dir / "outside", "keep");
  fs::create_symlink(dir / "outside", dir / "l.dat");
  offload_weight(torch::ones({3}), "l", dir, index);
  EXPECT_EQ(read_text(dir / "outside"), "keep");
  EXPECT_FALSE(fs::is_symlink(dir / "l.dat"));
  EXPECT_EQ(fs::file_size(dir / "l.dat"), 12u);
  // No temporary files are left behind.
  for (const auto& f : list_dir(dir)) EXPECT_FALSE(f.starts_with(".hs-offload")) << f;

  // Refusals, each naming the tensor.
  std::string msg = offload_error([&] { offload_weight(torch::empty({2}, torch::kMeta), "m.w", dir, index); });
  EXPECT_HAS(msg, "Cannot copy out of meta tensor");
  EXPECT_HAS(msg, "'m.w'");
  msg = offload_error([&] { offload_weight(torch::zeros({2}, torch::kComplexHalf), "c", dir, index); });
  EXPECT_HAS(msg, "'c'");
  EXPECT_HAS(msg, "NumPy");
  msg = offload_error([&] { offload_weight(torch::zeros({2}), "../evil", dir, index); });
  EXPECT_HAS(msg, "'../evil'");
  msg = offload_error([&] { offload_weight(torch::zeros({2}), "a..b", dir, index); });
  EXPECT_HAS(msg, "'a..b'");
  msg = offload_error([&] { offload_weight(torch::zeros({2}), "x", dir / "nope", index); });
  EXPECT_HAS(msg, (dir / "nope").string());
  EXPECT_FALSE(index.contains("c") || index.contains("x") || index.contains("m.w"));
  EXPECT_FALSE(fs::exists(dir.parent_path() / "evil.dat"));
}

// The temporary file's name comes from the process and the writing thread (no counter is kept
// anywhere; ConcurrentWritersIntoOneFolder has threads writing at once): a stray temporary that a
// crashed writer left under this thread's name is stepped past and left alone.
TEST(OffloadWrite, AStrayTemporaryWithThisThreadsNameIsSteppedPast) {
  fs::path dir = hs::test::scratch_dir("offload_tmp_names");
  std::string stray = ".hs-offload-";
  stray += std::to_string(::getpid());
  stray += '-';
  stray += std::to_string(::gettid());
  stray += ".tmp";
  write_text(dir / stray, "left by a crash");
  OffloadIndex index;
  offload_weight(torch::ones({3}), "a", dir, index);
  offload_weight(torch::ones({2}), "b", dir, index);
  EXPECT_EQ(fs::file_size(dir / "a.dat"), 12u);
  EXPECT_EQ(fs::file_size(dir / "b.dat"), 8u);
  EXPECT_EQ(read_text(dir / stray), "left by a crash");
  EXPECT_EQ(list_dir(dir).size(), 3u) << "a.dat, b.dat and the stray: no other temporary is left";
}

TEST(OffloadWrite, ConcurrentWritersIntoOneFolder) {
  const auto key_of = [](int i, int j) {
    std::string k = std::to_string(i);
    k.insert(k.begin(), 't');
    k += '.';
    k += std::to_string(j);
    return k;
  };
  fs::path dir = hs::test::scratch_dir("offload_threads");
  std::vector<std::thread> threads;
  std::vector<OffloadIndex> indexes(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int j = 0; j < 20; ++j)
        offload_weight(torch::full({16}, static_cast<float>(i * 100 + j)), key_of(i, j), dir, indexes[i]);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 20; ++j) {
      const std::string k = key_of(i, j);
      EXPECT_EQ(load_offloaded_weight(dir / (k + ".dat"), indexes[i].at(k))[3].item<float>(), i * 100 + j);
    }
  EXPECT_EQ(list_dir(dir).size(), 80u);
}

// ---- bad input ---------------------------------------------------------------------------------

TEST(OffloadBadInput, MissingTruncatedAndOversizedDat) {
  fs::path dir = one_entry_folder("offload_bad_dat", torch::ones({2, 3}), "layer.w");
  OffloadedWeightsLoader loader(std::nullopt, dir);
  const std::string dat = (dir / "layer.w.dat").string();
  fs::resize_file(dat, 20);
  std::string msg = offload_error([&] { loader.get("layer.w"); });
  EXPECT_HAS(msg, dat);
  EXPECT_HAS(msg, "has 20 bytes");
  EXPECT_HAS(msg, "needs 24 bytes");
  fs::resize_file(dat, 28);
  msg = offload_error([&] { loader.get("layer.w"); });
  EXPECT_HAS(msg, "has 28 bytes");
  fs::remove(dat);
  msg = offload_error([&] { loader.get("layer.w"); });
  EXPECT_HAS(msg, dat);
  EXPECT_HAS(msg, "No such file");
  fs::create_directory(dat);
  msg = offload_error([&] { loader.get("layer.w"); });
  EXPECT_HAS(msg, "not a regular file");
  // The index still lists the key: contains() is true without touching the file.
  EXPECT_TRUE(loader.contains("layer.w"));
}

TEST(OffloadBadInput, BoolBytesMustBeZeroOrOne) {
  fs::path dir = one_entry_folder("offload_bad_bool", torch::tensor({true, false, true}), "b");
  write_text(dir / "b.dat", std::string("\x01\x02\x00", 3));
  std::string msg = offload_error([&] { OffloadedWeightsLoader(std::nullopt, dir).get("b"); });
  EXPECT_HAS(msg, "b.dat");
  EXPECT_HAS(msg, "bool");
}

TEST(OffloadBadInput, InvalidIndexJson) {
  struct Case {
    const char* name;
    std::string text;
    std::vector<std::string> expect;  // parts of the message
  };
  const std::vector<Case> cases = {
      {"not_json", "{\"w\": {\"dtype\": ", {"not valid JSON"}},
      {"not_object", "[1, 2]", {"not a JSON object"}},
      {"bad_dtype", R"({"w": {"dtype": "float33", "shape": [2]}})", {"'w'", "float33"}},
      {"numpy_alias", R"({"w": {"dtype": "f4", "shape": [2]}})", {"'w'", "'f4'"}},
      {"negative", R"({"w": {"dtype": "float32", "shape": [2, -3]}})", {"'w'", "negative dimension -3"}},
      {"float_dim", R"({"w": {"dtype": "float32", "shape": [2.5]}})", {"'w'", "not an integer"}},
      {"overflow", R"({"w": {"dtype": "float32", "shape": [4294967296, 4294967296]}})", {"'w'", "overflows"}},
      {"huge_dim", R"({"w": {"dtype": "float32", "shape": [18446744073709551615]}})", {"'w'", "too large"}},
      {"no_dtype", R"({"w": {"shape": [2]}})", {"'w'", "no \"dtype\""}},
      {"no_shape", R"({"w": {"dtype": "float32"}})", {"'w'", "no \"shape\""}},
      {"entry_not_object", R"({"w": 3})", {"'w'", "not a JSON object"}},
      {"escape", R"({"../evil": {"dtype": "float32", "shape": [2]}})", {"'../evil'", "'/'"}},
      {"dotdot", R"({"..": {"dtype": "float32", "shape": [2]}})", {"'..'", "\"..\""}},
      {"empty_key", R"({"": {"dtype": "float32", "shape": [2]}})", {"''", "empty"}},
      {"nul_key", R"({"a\u0000b": {"dtype": "float32", "shape": [2]}})", {"'a\\x00b'", "NUL"}},
      {"st_not_string", R"({"w": {"safetensors_file": 3}})", {"'w'", "safetensors_file"}},
      {"st_bad_dtype", R"({"w": {"safetensors_file": "/x.safetensors", "dtype": "float33"}})", {"'w'", "float33"}},
      {"deep", std::string(40, '[') + std::string(40, ']'), {"deeper than"}},
  };
  fs::path root = hs::test::scratch_dir("offload_bad_index");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    fs::path dir = root / c.name;
    fs::create_directories(dir);
    write_text(dir / "index.json", c.text);
    std::string msg = offload_error([&] { read_offload_index(dir); });
    EXPECT_HAS(msg, (dir / "index.json").string());
    for (const auto& part : c.expect) EXPECT_HAS(msg, part);
    // The loader validates everything up front as well.
    EXPECT_THROW(OffloadedWeightsLoader(std::nullopt, dir), OffloadError);
  }
  // Missing index.json.
  fs::path none = root / "none";
  fs::create_directories(none);
  std::string msg = offload_error([&] { read_offload_index(none); });
  EXPECT_HAS(msg, (none / "index.json").string());
  EXPECT_HAS(msg, "No such file");
  // A duplicated key keeps its first position and last value (Python's json.load).
  fs::path dup = root / "dup";
  fs::create_directories(dup);
  write_text(dup / "index.json",
             R"({"a": {"dtype": "int8", "shape": [1]}, "b": {"dtype": "int8", "shape": [1]}, "a": {"dtype": "int16", "shape": [1]}})");
  OffloadIndex idx = read_offload_index(dup);
  EXPECT_EQ(idx.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(idx.at("a").dtype, "int16");
  // null safetensors_file means a .dat entry; unknown fields are ignored.
  write_text(dup / "index.json", R"({"a": {"safetensors_file": null, "dtype": "int8", "shape": [1], "x": {}}})");
  EXPECT_FALSE(read_offload_index(dup).at("a").is_safetensors());
}

// Found by a hostile try-out: the offload index's JSON errors were nlohmann's own text. They are
// in plain words with the line and column; nesting past 16 levels and strings past 1 MiB are
// refused before nlohmann builds anything; a shape of 100,000 dims is cut in the message.
TEST(OffloadBadInput, IndexJsonErrorsAreInPlainWordsAndBounded) {
  const fs::path dir = hs::test::scratch_dir("offload_index_words");
  const std::string file = (dir / "index.json").string();
  auto index_error = [&](const std::string& text) {
    write_text(dir / "index.json", text);
    return offload_error([&] { read_offload_index(dir); });
  };
  EXPECT_EQ(index_error(""), "offload index " + file +
                                 " is not valid JSON at line 1, column 1 (byte 0): the text is empty (no JSON value)");
  EXPECT_EQ(index_error("{\"w\": {\"dtype\": "),
            "offload index " + file +
                " is not valid JSON at line 1, column 17 (byte 16): the text ends before the JSON value is complete");
  EXPECT_EQ(index_error("{\"w\": {\"dtype\": \"float32\", \"shape\": [NaN]}}"),
            "offload index " + file +
                " is not valid JSON at line 1, column 38 (byte 37): 'NaN' is not a JSON value (JSON has no NaN or "
                "Infinity)");
  const std::string head = "{\"w\": {\"dtype\": \"float32\", \"shape\": ";
  EXPECT_EQ(index_error(head + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}}"),
            "offload index " + file + ": JSON nested deeper than 16 levels (byte " + std::to_string(head.size() + 14) +
                ")");
  const std::string dtype_head = "{\"w\": {\"dtype\": ";
  EXPECT_EQ(index_error(dtype_head + "\"" + std::string((size_t{1} << 20) + 1, 'f') + "\", \"shape\": [1]}}"),
            "offload index " + file + ": a string longer than 1 MiB at line 1, column " +
                std::to_string(dtype_head.size() + 1) + " (byte " + std::to_string(dtype_head.size()) +
                ") (hookscope reads strings up to that size)");
  std::string dims = "1";
  for (int i = 1; i < 100'000; ++i) dims += ", 1";
  const std::string msg = index_error(head + "[" + dims + ", -3]}}");
  EXPECT_HAS(msg, "negative dimension -3 in shape [1, 1, 1, 1, 1, 1, 1, 1, ...] (100001 dims)");
  EXPECT_LT(msg.size(), 1000u) << msg.substr(0, 1000);
}

TEST(OffloadBadInput, GivenIndexAndSafetensorsProblems) {
  fs::path dir = hs::test::scratch_dir("offload_bad_given");
  // An in-memory index is validated by the loader too.
  OffloadIndex bad;
  bad.insert_or_assign("a/b", {"float32", {2}, std::nullopt, std::nullopt});
  std::string msg = offload_error([&] { OffloadedWeightsLoader(std::nullopt, dir, bad); });
  EXPECT_HAS(msg, "'a/b'");
  OffloadIndex neg;
  neg.insert_or_assign("w", {"float32", {-1}, std::nullopt, std::nullopt});
  EXPECT_THROW(OffloadedWeightsLoader(std::nullopt, dir, neg), OffloadError);
  // A .dat entry without a save_folder.
  OffloadIndex dat;
  dat.insert_or_assign("w", {"float32", {2}, std::nullopt, std::nullopt});
  msg = offload_error([&] { OffloadedWeightsLoader(std::nullopt, std::nullopt, dat).get("w"); });
  EXPECT_HAS(msg, "'w'");
  EXPECT_HAS(msg, "save_folder");
  // Safetensors entries: missing file, missing tensor.
  OffloadIndex st;
  st.insert_or_assign("k1", {"", {}, (dir / "missing.safetensors").string(), std::nullopt});
  OffloadedWeightsLoader loader(std::nullopt, std::nullopt, st);
  msg = offload_error([&] { loader.get("k1"); });
  EXPECT_HAS(msg, "missing.safetensors");
  msg = offload_error([&] { check_entry_matches("k1", st.at("k1"), torch::zeros({2}), dir); });
  EXPECT_HAS(msg, "'k1'");
  EXPECT_HAS(msg, "missing.safetensors");
  // A real file (written by accelerate's oracle) without that tensor name.
  json want = json::parse(hs::test::run_oracle("offload_oracle.py", {"safetensors", dir.string()}));
  OffloadIndex st2;
  st2.insert_or_assign("k2", {"", {}, (dir / "data.safetensors").string(), std::string("no_such")});
  OffloadedWeightsLoader loader2(std::nullopt, std::nullopt, st2);
  msg = offload_error([&] { loader2.get("k2"); });
  EXPECT_HAS(msg, "'k2'");
  EXPECT_HAS(msg, "no_such");
  msg = offload_error([&] { loader2.check_matches("k2", torch::zeros({2})); });
  EXPECT_HAS(msg, "no_such");
}

TEST(OffloadBadInput, CheckEntryMatches) {
  fs::path dir = one_entry_folder("offload_check", torch::ones({2, 3}), "m.w");
  OffloadIndex idx = read_offload_index(dir);
  const OffloadIndexEntry& e = idx.at("m.w");
  const auto meta = [](std::vector<int64_t> s, c10::ScalarType t) {
    return torch::empty(s, torch::dtype(t).device(torch::kMeta));
  };
  EXPECT_NO_THROW(check_entry_matches("m.w", e, meta({2, 3}, torch::kFloat), dir));
  std::string msg = offload_error([&] { check_entry_matches("m.w", e, meta({3, 2}, torch::kFloat), dir); });
  EXPECT_HAS(msg, "'m.w'");
  EXPECT_HAS(msg, (dir / "m.w.dat").string());
  EXPECT_HAS(msg, "shape [2, 3] dtype float32");
  EXPECT_HAS(msg, "shape [3, 2] dtype float32");
  msg = offload_error([&] { check_entry_matches("m.w", e, meta({2, 3}, torch::kBFloat16), dir); });
  EXPECT_HAS(msg, "dtype bfloat16");
  // A truncated file is caught before anything is loaded.
  fs::resize_file(dir / "m.w.dat", 4);
  msg = offload_error([&] { check_entry_matches("m.w", e, meta({2, 3}, torch::kFloat), dir); });
  EXPECT_HAS(msg, "has 4 bytes");
  EXPECT_HAS(msg, "needs 24 bytes");
  fs::remove(dir / "m.w.dat");
  msg = offload_error([&] { check_entry_matches("m.w", e, meta({2, 3}, torch::kFloat), dir); });
  EXPECT_HAS(msg, "does not exist");
  // Through the loader: state-dict entries are compared directly.
  OffloadedWeightsLoader loader(NamedTensors{{"sd", torch::zeros({4})}}, std::nullopt, OffloadIndex{});
  EXPECT_NO_THROW(loader.check_matches("sd", meta({4}, torch::kFloat)));
  msg = offload_error([&] { loader.check_matches("sd", meta({5}, torch::kFloat)); });
  EXPECT_HAS(msg, "'sd'");
  EXPECT_THROW(loader.check_matches("other", meta({4}, torch::kFloat)), std::out_of_range);
}

TEST(OffloadRead, DtypeNamesRoundTrip) {
  for (auto t : {torch::kFloat, torch::kHalf, torch::kBFloat16, torch::kDouble, torch::kLong, torch::kInt,
                 torch::kShort, torch::kChar, torch::kByte, torch::kBool, torch::kUInt16, torch::kUInt32,
                 torch::kUInt64, torch::kComplexFloat, torch::kComplexDouble, torch::kFloat8_e4m3fn,
                 torch::kFloat8_e5m2, torch::kFloat8_e4m3fnuz, torch::kFloat8_e5m2fnuz, torch::kFloat8_e8m0fnu}) {
    EXPECT_EQ(dat_scalar_type(offload_dtype_name(t)), t);
    EXPECT_EQ(torch_scalar_type(offload_dtype_name(t)), t);
  }
  EXPECT_EQ(torch_scalar_type("complex32"), torch::kComplexHalf);
  EXPECT_THROW(dat_scalar_type("complex32"), OffloadError);
  EXPECT_THROW(offload_dtype_name(torch::kQInt8), OffloadError);
  EXPECT_EQ(dat_file_bytes({"float32", {0, 5}, std::nullopt, std::nullopt}), 1u);
  EXPECT_EQ(dat_file_bytes({"bfloat16", {}, std::nullopt, std::nullopt}), 2u);
  EXPECT_EQ(dat_file_bytes({"complex128", {3}, std::nullopt, std::nullopt}), 48u);
}

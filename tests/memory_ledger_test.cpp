// MemoryLedger (hooks/memory.h): bytes resident per logical device, exact on a small
// cpu-offloaded model whose every tensor size is known.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "hooks/big_modeling.h"
#include "hooks/memory.h"
#include "hooks/runtime.h"
#include "tests/test_modules.h"
#include "tracer/events.h"

namespace {

using hs::hooks::DeviceId;
using hs::hooks::MemoryLedger;
using hs::hooks::Runtime;
using hs::hooks::RuntimeOptions;
using hs::hooks::RuntimeScope;

struct CounterSink : hs::events::EventSink {
  std::vector<std::pair<std::string, int64_t>> samples;
  void memory_counter(const hs::events::MemoryCounter& c) override { samples.emplace_back(std::string(c.device), c.bytes); }
};

// ModelForTest: linear1 (3x4 + 4), batchnorm (4 + 4 params; 4 + 4 float + 1 int64 buffers),
// linear2 (4x5 + 5), float32.
constexpr int64_t kParamBytes = (12 + 4 + 4 + 4 + 20 + 5) * 4;  // 196
constexpr int64_t kBufferBytes = (4 + 4) * 4 + 8;              // 40
constexpr int64_t kLinear2Bytes = (20 + 5) * 4;                // 100

class MemoryLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model = std::make_shared<hs::test::ModelForTest>();
    hs::models::assign_fqns(*model);
    hs::hooks::cpu_offload(model, DeviceId::accelerator(0));  // buffers stay on 0, params in a CPU state dict
    runtime.set_sink(&sink);
  }
  void TearDown() override {
    if (runtime.ledger().active()) runtime.ledger().end();
    runtime.set_sink(nullptr);
  }
  std::map<std::string, int64_t> resident() {
    std::map<std::string, int64_t> out;
    for (const auto& [d, b] : runtime.ledger().resident()) out[d.str()] = b;
    return out;
  }
  CounterSink sink;
  Runtime runtime{RuntimeOptions{.accelerators = 2, .prefer_real = false}};  // a fresh one per test
  RuntimeScope installed{runtime};
  std::shared_ptr<hs::test::ModelForTest> model;
};

TEST_F(MemoryLedgerTest, BeginCountsWeightsWhereTheyLiveAndReportsEveryDevice) {
  runtime.ledger().begin(*model);
  EXPECT_EQ(resident(), (std::map<std::string, int64_t>{{"0", kBufferBytes}, {"1", 0}, {"cpu", kParamBytes}}));
  // The first sample reports every device, 0 bytes included.
  EXPECT_EQ(sink.samples.size(), 3u);
}

TEST_F(MemoryLedgerTest, OnloadedWeightsCountUntilOffloadedAndActivationsUntilFreed) {
  MemoryLedger& ledger = runtime.ledger();
  ledger.begin(*model);
  c10::InferenceMode g;
  torch::Tensor y = model->call_tensor({{torch::ones({2, 3})}, {}});
  ledger.sample();
  // Every onloaded weight went back to meta, every intermediate activation was freed; the
  // output came back to the caller's device (io_same_device) and is held here.
  EXPECT_EQ(resident(), (std::map<std::string, int64_t>{
                            {"0", kBufferBytes}, {"1", 0}, {"cpu", kParamBytes + static_cast<int64_t>(y.nbytes())}}));
  const auto peaks = ledger.peaks();
  EXPECT_GE(peaks.at(DeviceId::accelerator(0)), kBufferBytes + kLinear2Bytes) << "linear2's weights were onloaded";
  EXPECT_LT(peaks.at(DeviceId::accelerator(0)), kBufferBytes + kParamBytes) << "never the whole model at once";
  EXPECT_EQ(peaks.at(DeviceId::accelerator(1)), 0);
  y = torch::Tensor();
  ledger.sample();
  EXPECT_EQ(resident().at("cpu"), kParamBytes);
  // Reports only on change: no device repeats its previous value.
  std::map<std::string, int64_t> last;
  for (const auto& [d, b] : sink.samples) {
    if (last.count(d)) {
      EXPECT_NE(last[d], b) << d;
    }
    last[d] = b;
  }
  EXPECT_EQ(last, resident());
  const auto final_peaks = ledger.end();
  EXPECT_EQ(final_peaks, peaks);
  int64_t max0 = 0;
  for (const auto& [d, b] : sink.samples)
    if (d == "0") max0 = std::max(max0, b);
  EXPECT_EQ(max0, final_peaks.at(DeviceId::accelerator(0))) << "the peak is the largest reported sample";
}

TEST_F(MemoryLedgerTest, AStorageCountsOnceAndOnlyWhileActive) {
  MemoryLedger& ledger = runtime.ledger();
  auto t = torch::zeros({256});  // 1 KiB
  ledger.track(t, DeviceId::accelerator(1));  // inactive: ignored
  ledger.begin(*model);
  ledger.track(t, DeviceId::accelerator(1));
  ledger.track(t.slice(0, 0, 16), DeviceId::accelerator(1));  // a view: the same storage
  ledger.sample_recent();
  EXPECT_EQ(resident().at("1"), 1024);
  ledger.track(t, DeviceId::accelerator(0));  // re-tagged: it moves, it does not double
  ledger.sample_recent();
  EXPECT_EQ(resident().at("1"), 0);
  EXPECT_EQ(resident().at("0"), kBufferBytes + 1024);
  ledger.track(t, DeviceId::disk());  // not a place memory is resident: ignored
  ledger.end();
  EXPECT_FALSE(ledger.active());
  const size_t reported = sink.samples.size();
  ledger.track(torch::zeros({8}), DeviceId::accelerator(1));
  ledger.sample();
  EXPECT_EQ(sink.samples.size(), reported) << "nothing after end()";
}

TEST_F(MemoryLedgerTest, HookSamplesRecheckRecentStoragesAndStepSamplesAll) {
  MemoryLedger& ledger = runtime.ledger();
  ledger.begin(*model);
  auto older = torch::zeros({256}), recent = torch::zeros({128});
  ledger.track(older, DeviceId::accelerator(1));
  ledger.sample();  // a step boundary: `older` is old from now on
  ledger.track(recent, DeviceId::accelerator(1));
  ledger.sample_recent();
  EXPECT_EQ(resident().at("1"), 1024 + 512);
  recent = torch::Tensor();
  older = torch::Tensor();
  ledger.sample_recent();
  EXPECT_EQ(resident().at("1"), 1024) << "a hook sample sees the recent storage freed, not the old one";
  ledger.sample();
  EXPECT_EQ(resident().at("1"), 0);
  EXPECT_EQ(ledger.peaks().at(DeviceId::accelerator(1)), 1024 + 512);
}

}  // namespace

// The runtime (hooks/runtime.h): installed per thread by RuntimeScope, and the one place the
// hooks' work is published — each copy once, to every subscriber, and from there to the event
// sink — on accelerate's ModelForTest, cpu-offloaded to one emulated accelerator.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hooks/big_modeling.h"
#include "hooks/event_adapter.h"
#include "hooks/runtime.h"
#include "tests/test_modules.h"
#include "tracer/events.h"

namespace {

using namespace hs::hooks;
namespace events = hs::events;

RuntimeOptions one_emulated() { return RuntimeOptions{.accelerators = 1, .prefer_real = false}; }

struct MoveLog : RuntimeSubscriber {
  struct Entry {
    DeviceId src, dst;
    int64_t bytes;
    bool weight_onload;
    bool tensor_on_dst;
  };
  std::vector<Entry> moves;
  int hook_begins = 0, hook_ends = 0;
  void on_move(const Move& m) override {
    moves.push_back({m.src, m.dst, m.bytes, m.weight_onload,
                     Runtime::current().devices().device_of(m.tensor) == m.dst});
  }
  void on_hook_begin(const HookCall&) override { ++hook_begins; }
  void on_hook_end(const HookCall& c) override { hook_ends += c.completed; }
};

struct CountingSink : events::EventSink {
  int transfers = 0, onloads = 0, offloads = 0, spans = 0, computes = 0;
  std::vector<std::string> compute_devices, transfer_modules;
  void transfer(const events::Transfer& t) override {
    ++transfers;
    transfer_modules.emplace_back(t.module);
  }
  void weight_swap(const events::WeightSwap& w) override { ++(w.onload ? onloads : offloads); }
  void hook_span(const events::HookSpan&) override { ++spans; }
  void module_compute(const events::ModuleCompute& c) override {
    ++computes;
    compute_devices.emplace_back(c.device);
  }
};

// Every text of every event the adapter sends, in order, and whether it was a view this sink
// pinned (EventSink::pin: copies of its own, at addresses that stay put).
struct PinningSink : events::EventSink {
  bool pins = true;  // false: pin() pins nothing, as the default sink
  std::deque<std::string> owned;
  std::set<const char*> pinned;
  int pin_calls = 0;
  std::vector<std::string> texts;
  std::vector<std::string> unpinned;  // texts of views this sink did not pin (null views aside)
  std::string_view pin(std::string_view t) noexcept override {
    ++pin_calls;
    if (!pins) return t;
    owned.emplace_back(t);
    pinned.insert(owned.back().data());
    return owned.back();
  }
  void note(std::string_view t) {
    texts.emplace_back(t);
    if (t.data() && !pinned.count(t.data())) unpinned.emplace_back(t);
  }
  void hook_span(const events::HookSpan& h) override {
    note(h.hook);
    note(h.module);
    note(h.module_class);
  }
  void weight_swap(const events::WeightSwap& w) override {
    note(w.module);
    texts.emplace_back(w.tensor);  // the hook's own tensor names: not pinned
    note(w.dtype);
    note(w.device);
  }
  void transfer(const events::Transfer& t) override {
    note(t.src);
    note(t.dst);
    note(t.module);
  }
  void module_compute(const events::ModuleCompute& c) override {
    note(c.module);
    note(c.module_class);
    note(c.device);
  }
  void disabled_scope(const events::DisabledScope& d) override {
    note(d.function);
    note(d.module);
  }
};

struct Wrapper : hs::models::HookableModule {
  explicit Wrapper(std::shared_ptr<hs::models::HookableModule> m) : HookableModule("Wrapper") {
    inner = add_child("inner", std::move(m));
  }
  c10::IValue forward_impl(hs::models::CallArgs& call) override { return inner->call(call); }
  std::shared_ptr<hs::models::HookableModule> inner;
};

std::shared_ptr<hs::test::ModelForTest> offloaded_model() {
  auto m = std::make_shared<hs::test::ModelForTest>();
  hs::models::assign_fqns(*m);
  cpu_offload(m, DeviceId::accelerator(0));
  return m;
}

}  // namespace

TEST(RuntimeScope, CurrentIsTheInstalledRuntimeScopesNestAndThreadsHaveTheirOwn) {
  EXPECT_EQ(Runtime::current_or_null(), nullptr);
  EXPECT_THROW(Runtime::current(), std::logic_error);
  Runtime outer(one_emulated());
  Runtime inner(RuntimeOptions{.accelerators = 3, .prefer_real = false});
  {
    RuntimeScope a(outer);
    EXPECT_EQ(&Runtime::current(), &outer);
    {
      RuntimeScope b(inner);
      EXPECT_EQ(Runtime::current().devices().num_accelerators(), 3);
      std::thread other([] { EXPECT_EQ(Runtime::current_or_null(), nullptr); });
      other.join();
    }
    EXPECT_EQ(&Runtime::current(), &outer);
  }
  EXPECT_EQ(Runtime::current_or_null(), nullptr);
  EXPECT_THROW({ Runtime bad(RuntimeOptions{.accelerators = -1}); }, std::invalid_argument);
}

TEST(RuntimeMoves, EachCopyIsPublishedOnceWeightOnloadsMarked) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto model = offloaded_model();
  MoveLog log;
  auto subscription = runtime.subscribe(log);
  c10::InferenceMode g;
  torch::Tensor y = model->call_tensor({{torch::ones({2, 3})}, {}});
  // Six parameters onloaded cpu -> 0; the input moved cpu -> 0 by linear1's hook and the output
  // back 0 -> cpu by the root's io_same_device hook. Nothing else is copied.
  int onloads = 0, activations = 0;
  for (const auto& m : log.moves) {
    EXPECT_TRUE(m.tensor_on_dst);
    if (m.weight_onload) {
      ++onloads;
      EXPECT_EQ(m.src, DeviceId::cpu());
      EXPECT_EQ(m.dst, DeviceId::accelerator(0));
    } else {
      ++activations;
    }
  }
  EXPECT_EQ(onloads, 6);
  EXPECT_EQ(activations, 2);
  EXPECT_EQ(log.moves.front().bytes, 4 * 4 * 3) << "linear1.weight, 4x3 float32";
  // Root + 3 children, pre_forward and post_forward each: begun and completed.
  EXPECT_EQ(log.hook_begins, 8);
  EXPECT_EQ(log.hook_ends, 8);
  EXPECT_FALSE(runtime.devices().current_execution().has_value()) << "every push was popped";
  subscription.reset();
  model->call_tensor({{torch::ones({2, 3})}, {}});
  EXPECT_EQ(log.moves.size(), 8u) << "an ended subscription hears nothing";
}

TEST(RuntimeMoves, TheSinkAdapterRecordsOnloadsAsSwapsNotTransfers) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto model = offloaded_model();
  CountingSink sink;
  runtime.set_sink(&sink);
  c10::InferenceMode g;
  model->call_tensor({{torch::ones({2, 3})}, {}});
  runtime.set_sink(nullptr);
  EXPECT_EQ(sink.onloads, 6);
  EXPECT_EQ(sink.offloads, 6);
  EXPECT_EQ(sink.transfers, 2);
  EXPECT_EQ(sink.transfer_modules, (std::vector<std::string>{"linear1", ""})) << "the module whose hook moved it";
  EXPECT_EQ(sink.spans, 8);
  // The three children compute on accelerator 0; the root's hook has no execution device.
  EXPECT_EQ(sink.compute_devices, (std::vector<std::string>{"0", "0", "0", "cpu"}));
  model->call_tensor({{torch::ones({2, 3})}, {}});
  EXPECT_EQ(sink.spans, 8) << "no sink, no events";
}

// Unrecorded, a hooked call reads no clock: its times are 0 unless a subscriber wants them
// (the memory ledger, always subscribed, does not). A span begun before recording started is not
// recorded half-timed.
namespace {
struct TimeLog : RuntimeSubscriber {
  bool want = true;
  std::vector<int64_t> starts, ends, swap_starts;
  bool wants_times() const override { return want; }
  void on_hook_end(const HookCall& c) override {
    starts.push_back(c.start_ns);
    ends.push_back(c.end_ns);
  }
  void on_weight_swap(const WeightSwapRecord& w) override { swap_starts.push_back(w.start_ns); }
};

// Installs `sink` from inside the first hook method it hears begin.
struct SinkInstaller : RuntimeSubscriber {
  Runtime* rt = nullptr;
  events::EventSink* sink = nullptr;
  bool wants_times() const override { return false; }
  void on_hook_begin(const HookCall&) override {
    if (!rt->sink()) rt->set_sink(sink);
  }
};
}  // namespace

TEST(RuntimeTimes, TakenOnlyWhenASubscriberOrTheSinkWantsThem) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto model = offloaded_model();
  c10::InferenceMode g;
  EXPECT_FALSE(runtime.timed()) << "the memory ledger does not want times";
  TimeLog untimed;
  untimed.want = false;
  {
    auto sub = runtime.subscribe(untimed);
    EXPECT_FALSE(runtime.timed());
    model->call_tensor({{torch::ones({2, 3})}, {}});
  }
  ASSERT_EQ(untimed.starts.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(untimed.starts[i] + untimed.ends[i], 0) << i;
  ASSERT_EQ(untimed.swap_starts.size(), 12u);
  for (int64_t t : untimed.swap_starts) EXPECT_EQ(t, 0);

  TimeLog timed;
  {
    auto sub = runtime.subscribe(timed);
    EXPECT_TRUE(runtime.timed());
    model->call_tensor({{torch::ones({2, 3})}, {}});
  }
  EXPECT_FALSE(runtime.timed()) << "the subscription ended";
  ASSERT_EQ(timed.starts.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_GT(timed.starts[i], 0) << i;
    EXPECT_GE(timed.ends[i], timed.starts[i]) << i;
  }
  for (int64_t t : timed.swap_starts) EXPECT_GT(t, 0);
}

TEST(RuntimeTimes, ASpanBegunBeforeTheSinkIsLeftOutTheRestRecordedWhole) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto model = offloaded_model();
  c10::InferenceMode g;
  CountingSink sink;
  SinkInstaller installer;
  installer.rt = &runtime;
  installer.sink = &sink;
  auto sub = runtime.subscribe(installer);
  model->call_tensor({{torch::ones({2, 3})}, {}});
  runtime.set_sink(nullptr);
  EXPECT_EQ(sink.spans, 7) << "the root's pre_forward began before the sink: 8 - 1";
  EXPECT_EQ(sink.onloads, 6);
}

// The hot path's shortcuts keep accelerate's results: an argument already on the execution
// device reaches forward as the same tensor; an offloaded module's weights go back to meta
// after every call, to one placeholder per weight, and each call still onloads them all.
TEST(RuntimeMoves, TheHotPathMovesNothingTwiceAndEveryOffloadEndsOnMeta) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto model = offloaded_model();
  MoveLog log;
  auto subscription = runtime.subscribe(log);
  c10::InferenceMode g;
  const torch::Tensor w_meta = model->linear1->get_tensor("weight");
  ASSERT_TRUE(w_meta.is_meta()) << "cpu_offload leaves the weights on meta";
  torch::Tensor first;
  for (int call = 0; call < 3; ++call) {
    torch::Tensor y = model->call_tensor({{torch::ones({2, 3})}, {}});
    if (call == 0) first = y.clone();
    EXPECT_TRUE(torch::equal(y, first)) << "call " << call;
    const torch::Tensor& w = model->linear1->get_tensor("weight");
    EXPECT_TRUE(w.is_meta()) << "call " << call;
    EXPECT_EQ(w.sizes(), (std::vector<int64_t>{4, 3}));
    EXPECT_TRUE(w.is_same(w_meta)) << "call " << call << ": the offload put back the placeholder init_hook made";
  }
  int onloads = 0;
  for (const auto& m : log.moves) onloads += m.weight_onload;
  EXPECT_EQ(onloads, 3 * 6) << "six parameters onloaded on every call";

  // A tensor already on the execution device is not copied (not even by reference): hooked
  // without offload, the module's forward sees the caller's tensor itself.
  struct Echo : hs::models::HookableModule {
    Echo() : HookableModule("Echo") {}
    torch::Tensor seen;
    c10::IValue forward_impl(hs::models::CallArgs& call) override {
      seen = call.args.at(0).toTensor();
      return seen;
    }
  };
  auto echo = std::make_shared<Echo>();
  hs::models::assign_fqns(*echo);
  auto h = std::make_shared<AlignDevicesHook>();
  h->execution_device = DeviceId::cpu();
  add_hook_to_module(*echo, h);
  const torch::Tensor x = torch::ones({2});
  const size_t moves_before = log.moves.size();
  echo->call_tensor({{x}, {}});
  EXPECT_TRUE(echo->seen.is_same(x));
  EXPECT_EQ(log.moves.size(), moves_before);
  // On another device it is moved, once.
  h->execution_device = DeviceId::accelerator(0);
  echo->call_tensor({{x}, {}});
  EXPECT_FALSE(echo->seen.is_same(x));
  EXPECT_EQ(runtime.devices().device_of(echo->seen), DeviceId::accelerator(0));
  EXPECT_EQ(log.moves.size(), moves_before + 1);
}

// Two AlignDevicesHooks on one module (add_hook_to_module with append: a SequentialHook) end
// their forwards in the order they began, not nested: each still records its compute span,
// every call (the adapter's bookkeeping is one entry per hook, not a strict stack).
TEST(RuntimeMoves, EverySequentialAlignHookRecordsItsComputeSpan) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto m = std::make_shared<hs::models::Linear>(3, 4, true, torch::TensorOptions());
  hs::models::assign_fqns(*m);
  auto io = std::make_shared<AlignDevicesHook>();
  io->io_same_device = true;
  auto exec = std::make_shared<AlignDevicesHook>();
  exec->execution_device = DeviceId::accelerator(0);
  add_hook_to_module(*m, io);
  add_hook_to_module(*m, exec, /*append=*/true);
  CountingSink sink;
  runtime.set_sink(&sink);
  c10::InferenceMode g;
  for (int call = 0; call < 3; ++call) m->call_tensor({{torch::ones({2, 3})}, {}});
  runtime.set_sink(nullptr);
  EXPECT_EQ(sink.computes, 6) << "both hooks, three calls";
  int on_accelerator = 0;
  for (const auto& d : sink.compute_devices) on_accelerator += d == "0";
  EXPECT_EQ(on_accelerator, 3) << "the execution hook's span every call";
}

// The adapter pins each module's names, hook class, device and dtype name once per sink and
// sends those views from then on: the texts are the ones a sink that pins nothing gets, a
// renamed module sends its new name, and a new sink gets views of its own.
TEST(RuntimeMoves, TheSinkAdapterSendsTextsItsSinkPinnedOnce) {
  Runtime runtime(one_emulated());
  RuntimeScope installed(runtime);
  auto model = offloaded_model();
  c10::InferenceMode g;
  auto forward = [&](PinningSink& sink) {
    runtime.set_sink(&sink);
    model->call_tensor({{torch::ones({2, 3})}, {}});
    runtime.set_sink(nullptr);
  };
  PinningSink plain;
  plain.pins = false;
  forward(plain);
  const std::vector<std::string> reference = plain.texts;  // one forward's texts
  {  // a sink that pins nothing is asked once per text, not once per event
    runtime.set_sink(&plain);
    model->call_tensor({{torch::ones({2, 3})}, {}});
    const int before = plain.pin_calls;
    model->call_tensor({{torch::ones({2, 3})}, {}});
    EXPECT_EQ(plain.pin_calls, before);
    runtime.set_sink(nullptr);
  }
  PinningSink pinning;
  forward(pinning);
  EXPECT_EQ(pinning.texts, reference);
  EXPECT_TRUE(pinning.unpinned.empty()) << pinning.unpinned.front();
  for (const char* text : {"float32", "AlignDevicesHook.pre_forward", "linear1", "Linear"})
    EXPECT_NE(std::find(pinning.texts.begin(), pinning.texts.end(), text), pinning.texts.end()) << text;
  const int pins = pinning.pin_calls;
  pinning.texts.clear();
  forward(pinning);  // set_sink again: pinned again, once
  EXPECT_EQ(pinning.texts, reference);
  EXPECT_EQ(pinning.pin_calls, 2 * pins);
  {
    runtime.set_sink(&pinning);
    model->call_tensor({{torch::ones({2, 3})}, {}});
    const int before = pinning.pin_calls;
    model->call_tensor({{torch::ones({2, 3})}, {}});
    EXPECT_EQ(pinning.pin_calls, before) << "the same sink: nothing pinned again";
    runtime.set_sink(nullptr);
  }

  // Renamed while the sink records: the modules' new names, not the ones pinned before.
  PinningSink renamed;
  runtime.set_sink(&renamed);
  model->call_tensor({{torch::ones({2, 3})}, {}});
  auto wrapper = std::make_shared<Wrapper>(model);
  hs::models::assign_fqns(*wrapper);  // model -> "inner", linear1 -> "inner.linear1", ...
  renamed.texts.clear();
  model->call_tensor({{torch::ones({2, 3})}, {}});
  runtime.set_sink(nullptr);
  EXPECT_TRUE(renamed.unpinned.empty()) << renamed.unpinned.front();
  EXPECT_NE(std::find(renamed.texts.begin(), renamed.texts.end(), "inner.linear1"), renamed.texts.end());
  EXPECT_EQ(std::find(renamed.texts.begin(), renamed.texts.end(), "linear1"), renamed.texts.end());
}

// Two modules in one slot of the adapter's cache (their names serials 4096 apart): the first keeps
// its pinned names, the second sends its own, unpinned — never the first one's.
TEST(RuntimeMoves, ModulesSharingACacheSlotEachSendTheirOwnNames) {
  struct Named : hs::models::HookableModule {
    explicit Named(std::string cls) : HookableModule(std::move(cls)) {}
    c10::IValue forward_impl(hs::models::CallArgs&) override { return {}; }
  };
  Runtime runtime(one_emulated());
  EventSinkAdapter adapter(runtime);
  PinningSink sink;
  adapter.sink_changed();
  Named first("FirstClass");
  std::vector<std::unique_ptr<Named>> between;
  for (int i = 0; i < 4095; ++i) between.push_back(std::make_unique<Named>("Between"));
  Named second("SecondClass");
  ASSERT_EQ(second.names_serial() - first.names_serial(), 4096u) << "the slot is names_serial % 4096";
  EXPECT_EQ(adapter.module_texts(sink, first).class_name, "FirstClass");
  const auto texts = adapter.module_texts(sink, second);
  EXPECT_EQ(texts.class_name, "SecondClass");
  EXPECT_EQ(texts.class_name.data(), second.class_name().data()) << "unpinned: the module's own string";
  const auto again = adapter.module_texts(sink, first);
  EXPECT_EQ(again.class_name, "FirstClass");
  EXPECT_TRUE(sink.pinned.count(again.class_name.data())) << "the first keeps its pinned names";
}

#include "hooks/runtime.h"

#include <algorithm>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <utility>

#include "hooks/event_adapter.h"
#include "hooks/hooks.h"

namespace hs::hooks {

RuntimeOptions RuntimeOptions::cuda_devices() {
  RuntimeOptions o;
  o.accelerators = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  return o;
}

Runtime::Runtime(RuntimeOptions options) {
  scopes_.policy = options.compile_policy;
  log_ = std::move(options.log);
  devices_ = std::make_unique<DeviceManager>(*this, options);
  ledger_ = std::make_unique<MemoryLedger>(*this);
  adapter_ = std::make_unique<EventSinkAdapter>(*this);
  subscribers_.push_back(ledger_.get());
}

Runtime::~Runtime() = default;

Runtime* Runtime::current_or_null() {
  // Runtime is the only CallContext: contexts are installed by RuntimeScope alone.
  return static_cast<Runtime*>(models::CallContext::current());
}

Runtime& Runtime::current() {
  Runtime* r = current_or_null();
  if (!r)
    throw std::logic_error(
        "no hooks::Runtime is installed on this thread: build one and install it with hooks::RuntimeScope "
        "(hooks/runtime.h)");
  return *r;
}

// ------------------------------------------------------------------ sink and subscribers

void Runtime::set_sink(events::EventSink* sink) {
  sink_ = sink;
  adapter_->sink_changed();  // what the previous sink pinned is not this one's
  if (sink && !adapter_subscription_.runtime_)
    adapter_subscription_ = subscribe(*adapter_);
  else if (!sink)
    adapter_subscription_.reset();
}

Runtime::Subscription::Subscription(Subscription&& o) noexcept
    : runtime_(std::exchange(o.runtime_, nullptr)), subscriber_(std::exchange(o.subscriber_, nullptr)) {}

Runtime::Subscription& Runtime::Subscription::operator=(Subscription&& o) noexcept {
  if (this != &o) {
    reset();
    runtime_ = std::exchange(o.runtime_, nullptr);
    subscriber_ = std::exchange(o.subscriber_, nullptr);
  }
  return *this;
}

void Runtime::Subscription::reset() {
  if (runtime_) runtime_->unsubscribe(subscriber_);
  runtime_ = nullptr;
  subscriber_ = nullptr;
}

Runtime::Subscription Runtime::subscribe(RuntimeSubscriber& s) {
  subscribers_.push_back(&s);
  if (s.wants_times()) ++timed_subscribers_;
  return Subscription(this, &s);
}

void Runtime::unsubscribe(RuntimeSubscriber* s) {
  auto it = std::find(subscribers_.begin(), subscribers_.end(), s);
  if (it == subscribers_.end()) return;
  if (s->wants_times()) --timed_subscribers_;
  subscribers_.erase(it);
}

void Runtime::publish(const Move& m) {
  for (RuntimeSubscriber* s : subscribers_) s->on_move(m);
}

void Runtime::publish(const WeightSwapRecord& w) {
  for (RuntimeSubscriber* s : subscribers_) s->on_weight_swap(w);
}

void Runtime::hook_begin(HookCall& call) {
  const bool timed = this->timed();
  if (timed) call.called_ns = events::now_ns();
  call.id = ++last_external_id_;
  if (call.phase == events::HookPhase::PostForward && call.align && call.align->execution_device) {
    // Everything the module computed lives on its execution device.
    const DeviceId& exec = *call.align->execution_device;
    if (exec.is_accelerator() && call.output)
      for_each_tensor(*call.output, [&](const torch::Tensor& t) { devices_->tag(t, exec); });
    devices_->pop_execution();
  }
  for (RuntimeSubscriber* s : subscribers_) s->on_hook_begin(call);
  if (timed) call.start_ns = events::now_ns();
}

void Runtime::hook_end(HookCall& call) {
  if (timed()) call.end_ns = events::now_ns();
  if (call.completed && call.phase == events::HookPhase::PreForward && call.align) {
    call.compute_id = ++last_external_id_;
    if (call.align->execution_device) devices_->push_execution(*call.align->execution_device);
  }
  for (RuntimeSubscriber* s : subscribers_) s->on_hook_end(call);
}

// ------------------------------------------------------------------ logging, move guards

void Runtime::log(const std::string& level, const std::string& message) const {
  LogFn fn;
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    fn = log_;
  }
  if (fn)
    fn(level, message);
  else
    std::cerr << "[accelerate " << level << "] " << message << "\n";
}

void Runtime::set_logger(LogFn fn) {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_ = std::move(fn);
}

void Runtime::set_move_guard(const models::HookableModule& module, bool on) {
  std::lock_guard<std::mutex> lock(guard_mu_);
  if (on)
    move_guards_.insert(&module);
  else
    move_guards_.erase(&module);
}

bool Runtime::has_move_guard(const models::HookableModule& module) const {
  std::lock_guard<std::mutex> lock(guard_mu_);
  return move_guards_.count(&module) > 0;
}

// ------------------------------------------------------------------ scopes

RuntimeScope::RuntimeScope(Runtime& runtime) : previous_(Runtime::exchange_current(&runtime)) {}

RuntimeScope::~RuntimeScope() { Runtime::exchange_current(previous_); }

WeightSwapScope::WeightSwapScope(Kind kind, const AlignDevicesHook& hook, const models::HookableModule& module,
                                 const std::string& tensor, const DeviceId& device)
    : runtime_(Runtime::current()),
      kind_(kind),
      hook_(hook),
      module_(module),
      tensor_(tensor),
      device_(device),
      start_ns_(runtime_.timed() ? events::now_ns() : 0),
      uncaught_(std::uncaught_exceptions()) {
  if (kind_ == Kind::Onload) ++runtime_.devices().weight_onload_depth_;
}

WeightSwapScope::~WeightSwapScope() {
  if (kind_ == Kind::Onload) --runtime_.devices().weight_onload_depth_;
  if (!value_.defined() || std::uncaught_exceptions() != uncaught_) return;
  const int64_t end = start_ns_ ? events::now_ns() : 0;
  runtime_.publish(WeightSwapRecord{kind_ == Kind::Onload, hook_, module_, tensor_, value_, device_, start_ns_, end});
}

void log(const std::string& level, const std::string& message) {
  if (const Runtime* r = Runtime::current_or_null())
    r->log(level, message);
  else
    std::cerr << "[accelerate " << level << "] " << message << "\n";
}

}  // namespace hs::hooks

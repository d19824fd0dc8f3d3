#include "tests/synthetic.h"

#include <algorithm>
#include <iterator>
#include <span>
#include <string_view>
#include <vector>

#include "tracer/host_tracer.h"

namespace hs::storage {

void add_synthetic_devices(Store& store, int devices) {
  for (int d = 0; d < devices; ++d) {
    DeviceInfo di;
    di.name = std::to_string(d);
    di.kind = DeviceKind::Emulated;
    di.backing = "cpu";
    di.label = "emulated accelerator " + di.name + " (CPU memory)";
    di.max_memory = int64_t{256} << 20;
    store.add_device(di);
  }
  DeviceInfo cpu;
  cpu.name = "cpu";
  cpu.backing = "cpu";
  cpu.label = "host memory";
  store.add_device(cpu);
  store.add_diagnostic(std::nullopt, Severity::Info, "devices",
                       "accelerators are emulated in host memory: CPU capture does not fuse or speed anything up");
}

namespace {

/// A decoder layer's weights in the order accelerate onloads them; "mlp.up_proj.weight" alone
/// for one.
std::vector<std::string> tensor_names(int n) {
  static constexpr std::string_view kLayer[] = {
      "self_attn.q_proj.weight", "self_attn.k_proj.weight",  "self_attn.v_proj.weight",
      "self_attn.o_proj.weight", "mlp.gate_proj.weight",     "mlp.up_proj.weight",
      "mlp.down_proj.weight",    "input_layernorm.weight", "post_attention_layernorm.weight"};
  if (n <= 1) return {"mlp.up_proj.weight"};
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k)
    out.push_back(std::string(kLayer[k % std::size(kLayer)]) + (k >= static_cast<int>(std::size(kLayer)) ? std::to_string(k) : ""));
  return out;
}

}  // namespace

SyntheticResult write_synthetic_run(Store& store, const SyntheticRun& s) {
  using C = SyntheticClock;
  SyntheticResult res;
  const bool whole_hook = s.policy == "whole-hook";
  std::vector<std::string> layer(s.layers), attn(s.layers), mlp(s.layers), dev(s.layers);
  nlohmann::json device_map = nlohmann::json::object();
  for (int l = 0; l < s.layers; ++l) {
    layer[l] = "model.layers." + std::to_string(l);
    attn[l] = layer[l] + ".self_attn";
    mlp[l] = layer[l] + ".mlp";
    dev[l] = std::to_string(l * s.devices / std::max(s.layers, 1));
    device_map[layer[l]] = s.offload ? nlohmann::json(s.disk ? "disk" : "cpu") : nlohmann::json(std::stoi(dev[l]));
  }
  tracer::RunInfo info;
  info.scenario = s.scenario;
  info.policy = s.policy;
  info.mode = s.mode;
  info.fullgraph = s.fullgraph;
  info.model = "synthetic";
  info.device_map_json = device_map.dump();
  info.start_ns = s.start_ns;
  tracer::TracerOptions to;
  to.chunks = 256;
  tracer::HostTracer tr(store, to);
  res.run_id = tr.begin_run(info);

  int64_t t = s.start_ns;
  int64_t events = 0, region = 0, flushed_at = 0;
  std::vector<int64_t> resident(s.devices, 0);
  const int64_t weight_bytes = int64_t{4} << 20, act_bytes = 4096;
  const std::vector<std::string> tensors = tensor_names(s.tensors_per_layer);
  auto forward = [&](int64_t step, bool as_step) {
    const int64_t step_start = t;
    int64_t region_start = t;
    std::string prev_dev = "cpu";
    for (int l = 0; l < s.layers; ++l) {
      // pre_forward: the hook (disabled whole under whole-hook, only the onload under offload-only)
      const int64_t h0 = t;
      if (whole_hook || s.offload) {
        const char* fn = whole_hook ? "AlignDevicesHook.pre_forward" : "AlignDevicesHook._onload_weights";
        if (!s.fullgraph || l == 0) {
          tr.region({static_cast<int>(region++), 10, "eager", "", region_start, t});
          tr.graph_break({"Skip calling `torch.compiler.disable()`d function", fn, layer[l],
                          "model > " + layer[l], t});
          events += 2;
          ++res.graph_breaks;
        }
      }
      if (dev[l] != prev_dev) {
        tr.transfer({prev_dev, dev[l], act_bytes, true, layer[l], t + 100, t + 100 + C::kTransfer});
        ++events;
        ++res.transfers;
        res.transfer_bytes += act_bytes;
        t += C::kTransfer + 200;
      }
      for (size_t k = 0; s.offload && k < tensors.size(); ++k) {
        tr.weight_swap({true, layer[l], tensors[k], weight_bytes, "float32",
                        s.disk ? events::WeightSource::Disk : events::WeightSource::Cpu, dev[l], false, t, t + C::kOnload});
        ++events;
        ++res.onloads;
        res.onload_bytes += weight_bytes;
        resident[std::stoi(dev[l])] += weight_bytes;
        tr.memory_counter({dev[l], resident[std::stoi(dev[l])], t + C::kOnload});
        ++events;
        t += C::kOnload;
      }
      t += C::kHook;
      const int64_t hook_end = t;
      tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, layer[l], "LlamaDecoderLayer", 0, h0, hook_end});
      if (whole_hook || s.offload)
        tr.disabled_scope({whole_hook ? "AlignDevicesHook.pre_forward" : "AlignDevicesHook._onload_weights", layer[l], 1,
                           h0, hook_end});
      events += 2;
      region_start = t;
      // compute: layer > self_attn, mlp
      const int64_t c0 = t + C::kGap;
      tr.module_compute({attn[l], "LlamaAttention", dev[l], 0, c0, c0 + C::kSub});
      tr.module_compute({mlp[l], "LlamaMLP", dev[l], 0, c0 + C::kSub + C::kGap, c0 + 2 * C::kSub + C::kGap});
      tr.module_compute({layer[l], "LlamaDecoderLayer", dev[l], 0, t, c0 + 2 * C::kSub + 2 * C::kGap});
      events += 3;
      t = c0 + 2 * C::kSub + 2 * C::kGap;
      // post_forward
      const int64_t p0 = t;
      for (size_t k = 0; s.offload && k < tensors.size(); ++k) {
        tr.weight_swap({false, layer[l], tensors[k], weight_bytes, "float32", events::WeightSource::Device, s.offload_to, false,
                        t, t + C::kOffload});
        resident[std::stoi(dev[l])] -= weight_bytes;
        tr.memory_counter({dev[l], resident[std::stoi(dev[l])], t + C::kOffload});
        events += 2;
        t += C::kOffload;
      }
      t += C::kHook;
      tr.hook_span({"AlignDevicesHook", events::HookPhase::PostForward, layer[l], "LlamaDecoderLayer", 0, p0, t});
      ++events;
      prev_dev = dev[l];
      t += C::kGap;
    }
    tr.region({static_cast<int>(region++), 10, "eager", "", region_start, t});
    tr.transfer({prev_dev, "cpu", act_bytes, true, "lm_head", t, t + C::kTransfer});
    res.transfers++;
    res.transfer_bytes += act_bytes;
    t += C::kTransfer;
    if (as_step) tr.generation_step({s.steps_per_generate > 0 ? step % s.steps_per_generate : step, 1000 + step, step_start, t});
    events += as_step ? 3 : 2;
    res.end_ns = t;  // the last event's end
    t += 10 * C::kGap;
    if (events - flushed_at > 100'000) {  // keep the writer ahead of the tracer's chunk pool
      tr.flush();
      flushed_at = events;
    }
  };
  if (s.check_forward) forward(0, false);
  int64_t step = 0;
  for (; step < s.tokens || events < s.min_events; ++step) forward(step, true);
  tr.end_run(tracer::RunStatus::Complete);
  res.events = events;
  const double ms = static_cast<double>(res.end_ns - s.start_ns) / 1e6 / static_cast<double>(step);
  nlohmann::json r{{"status", s.fullgraph && whole_hook ? "error" : "ok"},
                   {"graph_break_count", s.fullgraph ? nlohmann::json(nullptr) : nlohmann::json(res.graph_breaks)},
                   {"decode_ms_per_token",
                    {{"median", ms}, {"min", ms * 0.95}, {"max", ms * 1.1}, {"q1", ms * 0.97}, {"q3", ms * 1.05}, {"n", 1}}},
                   {"argmax_match", true},
                   {"logits_identical", s.offload ? nlohmann::json(true) : nlohmann::json(nullptr)},
                   {"params_on_meta_after", s.offload ? nlohmann::json(true) : nlohmann::json(nullptr)}};
  if (s.fullgraph && whole_hook) {
    r["error"] = "Unsupported: Skip calling `torch.compiler.disable()`d function AlignDevicesHook.pre_forward in module "
                 "model.layers.0";
    r["decode_ms_per_token"] = nullptr;
    r["argmax_match"] = nullptr;
  }
  store.set_run_result(res.run_id, r);
  return res;
}

namespace {

tracer::CpuOpActivity cpu_op(int64_t tid, std::string_view name, std::string_view cat, int64_t a, int64_t b) {
  tracer::CpuOpActivity op;
  op.os_tid = tid;
  op.name = name;
  op.category = cat;
  op.args = cat == "cpu_op" ? std::string_view(R"({"Input Dims": [[1, 6, 64], [64, 64]]})") : std::string_view();
  op.start_ns = SyntheticTrace::kTraceBase + a;
  op.end_ns = SyntheticTrace::kTraceBase + b;
  return op;
}

template <class Api>
Api api_call(int64_t tid, std::string_view name, uint32_t correlation, int64_t a, int64_t b) {
  Api c{};
  c.os_tid = tid;
  c.correlation_id = correlation;
  c.name = name;
  c.start_ns = SyntheticTrace::kTraceBase + a;
  c.end_ns = SyntheticTrace::kTraceBase + b;
  return c;
}

tracer::KernelActivity kernel(uint32_t stream, std::string_view name, uint32_t correlation, int64_t a, int64_t b) {
  tracer::KernelActivity k{};
  k.device_id = 0;
  k.context_id = 1;
  k.stream_id = stream;
  k.correlation_id = correlation;
  k.demangled_name = name;
  k.short_name = name;
  k.grid_x = 64, k.grid_y = k.grid_z = 1;
  k.block_x = 128, k.block_y = k.block_z = 1;
  k.start_ns = SyntheticTrace::kTraceBase + a;
  k.end_ns = SyntheticTrace::kTraceBase + b;
  return k;
}

/// hookscope's rows the importer makes of the driver's ranges, on tracer thread 0 (tid 4243).
int64_t write_trace_host_rows(Store& store, int64_t run) {
  const int64_t t0 = SyntheticTrace::kTraceBase;
  const tracer::StringDef strings[] = {{0, "AlignDevicesHook"}, {1, "model.layers.0"}, {2, ""},      {3, "0/1"},
                                       {4, "weight"},           {5, "float32"},        {6, "cuda:0"}};
  const tracer::ThreadDef threads[] = {{0, 4243}};
  tracer::rec::HookSpan h{};
  h.hook = 0, h.phase = events::HookPhase::PreForward, h.module = 1, h.module_class = 2;
  h.start_ns = t0 + 1000, h.end_ns = t0 + 9000;
  tracer::rec::WeightSwap w{};
  w.onload = true, w.module = 1, w.tensor = 4, w.bytes = 1 << 20, w.dtype = 5;
  w.source = events::WeightSource::Cpu, w.device = 6;
  w.start_ns = t0 + 3000, w.end_ns = t0 + 4000;
  tracer::rec::Region r{};
  r.index = 0, r.op_count = 3, r.backend = 2, r.compile_id = 3;
  r.start_ns = t0 + 50000, r.end_ns = t0 + 80000;
  const tracer::Record records[] = {tracer::Record::of(h, 0), tracer::Record::of(w, 0), tracer::Record::of(r, 0)};
  tracer::RecordBatch b;
  b.run_id = run;
  b.strings = strings;
  b.threads = threads;
  b.records = records;
  store.write_batch(b);
  return static_cast<int64_t>(std::size(records));
}

}  // namespace

SyntheticTrace write_synthetic_trace_run(Store& store, const std::string& label) {
  SyntheticTrace res;
  GpuInfo gpu;
  gpu.id = 0;
  gpu.name = "NVIDIA H200";
  gpu.total_memory = int64_t{141} << 30;
  store.add_gpu(gpu);
  tracer::RunInfo info;
  info.scenario = "imported";
  info.engine = "import";
  info.label = label;
  info.start_ns = SyntheticTrace::kTraceBase;
  res.run_id = store.add_run(info);
  res.rows += write_trace_host_rows(store, res.run_id);

  const tracer::CpuOpActivity ops[] = {
      cpu_op(4243, "hookscope::generate cell=c0 repeat=0", "user_annotation", 0, 100000),
      cpu_op(4243, "model.py(12): forward", "python_function", 5000, 90000),
      cpu_op(4243, "aten::linear", "cpu_op", 10000, 40000),
      cpu_op(4243, "aten::mm", "cpu_op", 15000, 35000),
      cpu_op(4243, "Torch-Compiled Region: 0/1", "cpu_op", 50000, 80000),
      cpu_op(4300, "aten::add", "cpu_op", 20000, 30000)};
  const tracer::RuntimeActivity runtime[] = {
      api_call<tracer::RuntimeActivity>(4243, "cudaLaunchKernel", 101, 16000, 18000),
      api_call<tracer::RuntimeActivity>(4243, "cudaMemcpyAsync", 102, 20000, 21000),
      api_call<tracer::RuntimeActivity>(4300, "cudaLaunchKernel", 103, 22000, 23000),
      api_call<tracer::RuntimeActivity>(4243, "cudaLaunchKernel", 105, 54000, 57000)};
  const tracer::DriverActivity driver[] = {api_call<tracer::DriverActivity>(4243, "cuLaunchKernel", 104, 55000, 56000)};
  const tracer::KernelActivity kernels[] = {kernel(7, "gemm", 101, 60000, 70000),
                                            kernel(7, "triton_poi_fused_add_0", 104, 71000, 72000),
                                            kernel(13, "add_kernel", 103, 30000, 31000),
                                            kernel(13, "late_kernel", 0, 99000, 100500)};
  tracer::MemcpyActivity copy{};
  copy.device_id = 0, copy.context_id = 1, copy.stream_id = 7, copy.correlation_id = 102;
  copy.bytes = 1 << 20, copy.copy_kind = tracer::MemcpyKind::HtoD, copy.dst_device_id = 0;
  copy.start_ns = SyntheticTrace::kTraceBase + 25000, copy.end_ns = SyntheticTrace::kTraceBase + 26000;
  tracer::MemsetActivity set{};
  set.device_id = 0, set.context_id = 1, set.stream_id = 13, set.bytes = 4096;
  set.start_ns = SyntheticTrace::kTraceBase + 40000, set.end_ns = SyntheticTrace::kTraceBase + 40500;
  tracer::SyncActivity sync{};
  sync.device_id = 0, sync.context_id = 1, sync.stream_id = 13, sync.event_id = 9;
  sync.sync_type = tracer::SyncType::StreamWaitEvent;
  sync.start_ns = SyntheticTrace::kTraceBase + 45000, sync.end_ns = SyntheticTrace::kTraceBase + 46000;
  tracer::ActivityBatch host;
  host.run_id = res.run_id;
  host.pid = 4242;
  host.cpu_ops = ops;
  host.runtime_calls = runtime;
  host.driver_calls = driver;
  host.kernels = kernels;
  host.memcpys = std::span(&copy, 1);
  host.memsets = std::span(&set, 1);
  host.syncs = std::span(&sync, 1);
  store.write_activity(host);
  // Kineto writes a gpu_user_annotation with the GPU as pid and the stream as tid.
  const tracer::CpuOpActivity annotation = cpu_op(7, "my_range", "gpu_user_annotation", 59000, 75000);
  tracer::ActivityBatch gpu_side;
  gpu_side.run_id = res.run_id;
  gpu_side.pid = 0;
  gpu_side.cpu_ops = std::span(&annotation, 1);
  store.write_activity(gpu_side);
  res.rows += static_cast<int64_t>(std::size(ops) + std::size(runtime) + std::size(driver) + std::size(kernels) + 4);
  store.end_run(res.run_id, tracer::RunStatus::Complete, {}, SyntheticTrace::kTraceBase + 100500);
  return res;
}

SyntheticTrace write_large_trace_run(Store& store, int64_t launches) {
  SyntheticTrace res;
  tracer::RunInfo info;
  info.scenario = "imported";
  info.engine = "import";
  info.label = "large-trace.json";
  info.start_ns = SyntheticTrace::kTraceBase;
  res.run_id = store.add_run(info);
  constexpr int64_t kBatch = 10000, kPeriod = 2000;
  std::vector<tracer::CpuOpActivity> ops;
  std::vector<tracer::RuntimeActivity> calls;
  std::vector<tracer::KernelActivity> kernels;
  for (int64_t first = 0; first < launches; first += kBatch) {
    ops.clear();
    calls.clear();
    kernels.clear();
    for (int64_t i = first; i < std::min(launches, first + kBatch); ++i) {
      const int64_t t = i * kPeriod;
      const auto corr = static_cast<uint32_t>(i + 1);
      ops.push_back(cpu_op(4243, "aten::mm", "cpu_op", t, t + 1500));
      calls.push_back(api_call<tracer::RuntimeActivity>(4243, "cudaLaunchKernel", corr, t + 100, t + 600));
      kernels.push_back(kernel(7, "gemm", corr, t + 800, t + 1700));
    }
    tracer::ActivityBatch b;
    b.run_id = res.run_id;
    b.pid = 4242;
    b.cpu_ops = ops;
    b.runtime_calls = calls;
    b.kernels = kernels;
    store.write_activity(b);
    res.rows += static_cast<int64_t>(ops.size() + calls.size() + kernels.size());
  }
  store.end_run(res.run_id, tracer::RunStatus::Complete, {}, SyntheticTrace::kTraceBase + launches * kPeriod);
  return res;
}

}  // namespace hs::storage

namespace hs::storage {

void set_torch_generate_times(Store& store, int64_t run, double profiled_ms, const std::vector<double>& measured_ms) {
  store.set_run_engine(run, "torch");
  store.set_run_result(run, {{"profiled_run", {{"generate_ms", profiled_ms}}}, {"generate_ms", measured_ms}});
}

void write_dynamo_breaks(Store& store, int64_t run) {
  tracer::DynamoGraphBreak b[2]{};
  for (auto& r : b) {
    r.compile_id = "1/0";
    r.gb_code = "GB0098";
    r.gb_type = "Skip calling `torch.compiler.disable()`d function";
    r.reason = "Skip calling `torch.compiler.disable()`d function\n  Explanation: Skip calling function "
               "`<function AlignDevicesHook.pre_forward at 0x7f0000000000>` since it was wrapped with "
               "`torch.compiler.disable`";
    r.user_frame = "/site-packages/accelerate/hooks.py:50";
  }
  b[0].time_ns = SyntheticTrace::kTraceBase - kDynamoBreakBefore;
  b[0].log_line = 61;
  b[1].compile_id = "2/1";
  b[1].time_ns = SyntheticTrace::kTraceBase + kDynamoBreakAt;
  b[1].log_line = 935;
  tracer::ActivityBatch batch;
  batch.run_id = run;
  batch.dynamo_graph_breaks = b;
  store.write_activity(batch);
}

}  // namespace hs::storage

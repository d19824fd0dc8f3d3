#include "tests/synthetic.h"

#include <algorithm>
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
  auto forward = [&](int64_t step) {
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
      if (s.offload) {
        tr.weight_swap({true, layer[l], "mlp.up_proj.weight", weight_bytes, "float32",
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
      tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, layer[l], "LlamaDecoderLayer", h0, hook_end});
      if (whole_hook || s.offload)
        tr.disabled_scope({whole_hook ? "AlignDevicesHook.pre_forward" : "AlignDevicesHook._onload_weights", layer[l], 1,
                           h0, hook_end});
      events += 2;
      region_start = t;
      // compute: layer > self_attn, mlp
      const int64_t c0 = t + C::kGap;
      tr.module_compute({attn[l], "LlamaAttention", dev[l], c0, c0 + C::kSub});
      tr.module_compute({mlp[l], "LlamaMLP", dev[l], c0 + C::kSub + C::kGap, c0 + 2 * C::kSub + C::kGap});
      tr.module_compute({layer[l], "LlamaDecoderLayer", dev[l], t, c0 + 2 * C::kSub + 2 * C::kGap});
      events += 3;
      t = c0 + 2 * C::kSub + 2 * C::kGap;
      // post_forward
      const int64_t p0 = t;
      if (s.offload) {
        tr.weight_swap({false, layer[l], "mlp.up_proj.weight", weight_bytes, "float32", events::WeightSource::Device,
                        "meta", false, t, t + C::kOffload});
        resident[std::stoi(dev[l])] -= weight_bytes;
        tr.memory_counter({dev[l], resident[std::stoi(dev[l])], t + C::kOffload});
        events += 2;
        t += C::kOffload;
      }
      t += C::kHook;
      tr.hook_span({"AlignDevicesHook", events::HookPhase::PostForward, layer[l], "LlamaDecoderLayer", p0, t});
      ++events;
      prev_dev = dev[l];
      t += C::kGap;
    }
    tr.region({static_cast<int>(region++), 10, "eager", "", region_start, t});
    tr.transfer({prev_dev, "cpu", act_bytes, true, "lm_head", t, t + C::kTransfer});
    res.transfers++;
    res.transfer_bytes += act_bytes;
    t += C::kTransfer;
    tr.generation_step({step, 1000 + step, step_start, t});
    events += 3;
    res.end_ns = t;  // the last event's end
    t += 10 * C::kGap;
    if (events - flushed_at > 100'000) {  // keep the writer ahead of the tracer's chunk pool
      tr.flush();
      flushed_at = events;
    }
  };
  int64_t step = 0;
  for (; step < s.tokens || events < s.min_events; ++step) forward(step);
  tr.end_run(tracer::RunStatus::Complete);
  res.events = events;
  const double ms = static_cast<double>(res.end_ns - s.start_ns) / 1e6 / static_cast<double>(step);
  nlohmann::json r{{"status", s.fullgraph && whole_hook ? "error" : "ok"},
                   {"graph_break_count", s.fullgraph ? nlohmann::json(nullptr) : nlohmann::json(res.graph_breaks)},
                   {"latency_ms", {{"median", ms}, {"min", ms * 0.95}, {"max", ms * 1.1}, {"n", 1}}},
                   {"argmax_match", true},
                   {"logits_identical", s.offload ? nlohmann::json(true) : nlohmann::json(nullptr)},
                   {"params_on_meta_after", s.offload ? nlohmann::json(true) : nlohmann::json(nullptr)}};
  if (s.fullgraph && whole_hook) {
    r["error"] = "Unsupported: Skip calling `torch.compiler.disable()`d function AlignDevicesHook.pre_forward in module "
                 "model.layers.0";
    r["latency_ms"] = nullptr;
    r["argmax_match"] = nullptr;
  }
  store.set_run_result(res.run_id, r);
  return res;
}

}  // namespace hs::storage

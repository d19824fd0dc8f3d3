// Region backends: what runs a captured region (docs/architecture.md).
//
// The engine (compile/compile.h) cuts every compiled call into regions at graph breaks and
// tells the cache entry's backend when each region begins and ends. Two backends are named:
//
//  - `eager` (implemented: EagerRegionBackend). Regions run as the plain ATen calls they are;
//    the engine records their structure (breaks, op counts) and host timing. This mirrors
//    Dynamo's `backend="eager"` (Dynamo captures, then runs the captured graph unoptimised).
//    LibTorch builds have no CPU fuser, so on CPU nothing is fused and nothing gets faster:
//    the eager backend never claims a speed-up (see kEagerBackendNote).
//
//  - `cudagraphs` (NOT implemented here: this header is its seam). On a GPU each region would
//    be recorded once with `at::cuda::CUDAGraph` and replayed afterwards, with the disabled
//    scopes replayed eagerly between graphs and inputs copied into static buffers (Inductor's
//    cudagraph trees for `mode="reduce-overhead"`). A GPU build hands its implementation to
//    each compiled function that should use it (`CompileOptions::cudagraphs_backend`, a
//    factory: nothing is registered process-wide); whether replay can skip the region's host
//    code is that implementation's design question. Without one, or whenever a region's
//    inputs live on the CPU (emulated accelerators included), the engine falls back to the
//    eager backend and records why, with Inductor's words:
//        skipping cudagraphs due to cpu device (args[0])
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <torch/torch.h>

namespace hs::compile {

struct RegionRecord;  // compile/compile.h

/// The seam between the engine and whatever runs a region.
/// Calls come from the thread running the compiled call, in order:
/// begin_region(0), end_region(r0), begin_region(1), end_region(r1), ...
/// Implementations must not throw from end_region (it may run while an exception unwinds).
class RegionBackend {
 public:
  virtual ~RegionBackend() = default;
  /// "eager", "cudagraphs": the name stored with every region and event.
  virtual std::string_view name() const = 0;
  /// Region `index` (0-based within one call) starts now.
  virtual void begin_region(int index) = 0;
  /// The region described by `region` ended (at a graph break or at the end of the call).
  virtual void end_region(const RegionRecord& region) noexcept = 0;
};

/// Runs regions as they are: nothing to set up or tear down per region; structure and timing
/// are the engine's. Counts what it saw so tests and reports can check the seam is driven.
class EagerRegionBackend final : public RegionBackend {
 public:
  std::string_view name() const override { return "eager"; }
  void begin_region(int) override { ++regions_begun_; }
  void end_region(const RegionRecord&) noexcept override { ++regions_ended_; }
  int64_t regions_begun() const { return regions_begun_; }
  int64_t regions_ended() const { return regions_ended_; }

 private:
  int64_t regions_begun_ = 0, regions_ended_ = 0;
};

/// What every eager-backend result says about itself.
inline constexpr std::string_view kEagerBackendNote =
    "backend 'eager': regions run as plain ATen calls; capture records graph structure and timing only "
    "- nothing is fused or sped up (LibTorch has no CPU fuser)";

/// The GPU implementation of `cudagraphs`: builds a CUDA-graph region backend for a new cache
/// entry whose tensor inputs are `inputs` (or returns null to decline them). Called on the
/// thread of the compiled call that creates the entry.
using CudaGraphsBackendFactory =
    std::function<std::unique_ptr<RegionBackend>(const std::vector<c10::IValue>& inputs)>;

/// The backend for a new cache entry. `requested` is "eager" or "cudagraphs" (anything else
/// throws std::invalid_argument naming it). For "cudagraphs" with a tensor input on the CPU
/// the result is the eager backend plus the diagnostic
/// "skipping cudagraphs due to cpu device (<arg>)" (`cudagraphs` is then never called); with
/// no GPU implementation given (`cudagraphs` empty), or one that declines the inputs, it is the
/// eager backend plus a diagnostic saying so.
struct BackendChoice {
  std::shared_ptr<RegionBackend> backend;
  std::vector<std::string> diagnostics;
};
BackendChoice select_backend(const std::string& requested, const std::vector<c10::IValue>& inputs,
                             const CudaGraphsBackendFactory& cudagraphs = {});

}  // namespace hs::compile

#include "compile/backend.h"

#include <stdexcept>

#include "compile/guards.h"

namespace hs::compile {

BackendChoice select_backend(const std::string& requested, const std::vector<c10::IValue>& inputs,
                             const CudaGraphsBackendFactory& cudagraphs) {
  BackendChoice out;
  if (requested == "eager") {
    out.backend = std::make_shared<EagerRegionBackend>();
    return out;
  }
  if (requested != "cudagraphs")
    throw std::invalid_argument("unknown compile backend '" + requested + "' (expected eager or cudagraphs)");

  // Inductor's cudagraph check: any CPU tensor among the graph inputs skips cudagraphs.
  // Emulated accelerators are backed by CPU memory, so their tensors count as CPU tensors.
  const InputSignature sig = signature_of(inputs);
  bool any_tensor = false;
  for (const auto& g : sig.items) {
    if (g.kind != GuardItem::Kind::Tensor) continue;
    any_tensor = true;
    if (!g.torch_device.is_cuda()) {
      out.diagnostics.push_back("skipping cudagraphs due to cpu device (" + g.name + ")");
      break;
    }
  }
  if (out.diagnostics.empty() && !any_tensor && !torch::cuda::is_available())
    out.diagnostics.push_back("skipping cudagraphs due to cpu device (no CUDA device in this process)");
  if (out.diagnostics.empty()) {
    if (cudagraphs) {
      if (auto backend = cudagraphs(inputs)) {
        out.backend = std::shared_ptr<RegionBackend>(std::move(backend));
        return out;
      }
      out.diagnostics.push_back("skipping cudagraphs: the given CUDA-graph backend declined these inputs");
    } else {
      out.diagnostics.push_back(
          "skipping cudagraphs: no CUDA-graph region backend was given "
          "(hs::compile::CompileOptions::cudagraphs_backend); regions run on the eager backend");
    }
  }
  out.backend = std::make_shared<EagerRegionBackend>();
  return out;
}

}  // namespace hs::compile

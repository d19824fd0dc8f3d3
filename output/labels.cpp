#include "output/labels.h"

namespace hs::output {

std::pair<std::string, std::string> capture_labels(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::string la = a.stem().string(), lb = b.stem().string();
  if (la == lb) {
    la = (a.parent_path().filename() / a.stem()).string();
    lb = (b.parent_path().filename() / b.stem()).string();
  }
  if (la == lb) la += " (A)", lb += " (B)";
  return {la, lb};
}

}  // namespace hs::output

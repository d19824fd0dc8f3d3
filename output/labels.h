// The names hookscope gives two captures shown side by side (`report A B`, `view A --other B`).
#pragma once

#include <filesystem>
#include <string>
#include <utility>

namespace hs::output {

/// The captures' file stems ("main", "pr"); with their folders ("x/demo", "y/demo") when the
/// stems are equal; with " (A)" / " (B)" added when those are equal too.
std::pair<std::string, std::string> capture_labels(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace hs::output

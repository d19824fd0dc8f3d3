#include "storage/bounded_json.h"

namespace hs::storage {

namespace {

std::string mib(size_t bytes) {
  return bytes % (size_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

template <class Json>
Json parse_bounded(std::string_view text, std::string_view what, const JsonLimits& limits) {
  const std::string name(what);
  if (text.size() > limits.max_bytes)
    throw JsonError(JsonError::Kind::TooLarge, name + ": JSON text of " + std::to_string(text.size()) +
                                                   " bytes, more than the " + mib(limits.max_bytes) +
                                                   " hookscope reads in one value");
  if (const size_t at = json_depth_exceeded_at(text, limits.max_depth); at != std::string_view::npos)
    throw JsonError(JsonError::Kind::TooDeep,
                    name + ": " + json_too_deep(limits.max_depth) + " (byte " + std::to_string(at) + ")");
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers past a double
    std::string why = e.what();
    if (const size_t p = why.find("] "); why.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
      why = why.substr(p + 2);
    throw JsonError(JsonError::Kind::Invalid, name + ": not valid JSON: " + why);
  }
}

}  // namespace

std::string json_too_deep(size_t max_depth) {
  return "JSON nested deeper than " + std::to_string(max_depth) + " levels";
}

size_t json_depth_exceeded_at(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, const JsonLimits& limits) {
  return parse_bounded<nlohmann::json>(text, what, limits);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what,
                                                  const JsonLimits& limits) {
  return parse_bounded<nlohmann::ordered_json>(text, what, limits);
}

}  // namespace hs::storage

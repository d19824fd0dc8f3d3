// Parsing JSON that hookscope did not just write itself — a capture's JSON columns, the torch
// driver's reply lines, values of imported files — with a bound on its nesting and its size.
//
// nlohmann's parser is iterative, but copying, comparing, dumping and merging a value recurse
// once per level: a value nested 100,000 deep parses and then overflows the stack wherever it
// is used. So every reader of untrusted JSON parses through parse_json_bounded, which checks the
// text's bracket nesting and its size in one pass before nlohmann builds anything.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hs::storage {

/// The deepest nesting of arrays and objects hookscope reads in one untrusted JSON value
/// (hookscope writes at most a handful of levels).
inline constexpr size_t kMaxJsonDepth = 512;
/// The largest JSON text hookscope parses as one untrusted value (a run's results, one driver
/// reply line): 64 MiB.
inline constexpr size_t kMaxJsonBytes = size_t{64} << 20;

struct JsonLimits {
  size_t max_depth = kMaxJsonDepth;
  size_t max_bytes = kMaxJsonBytes;
};

/// Why a JSON text was refused. what() reads "WHAT: MESSAGE", WHAT as the caller named the value.
class JsonError : public std::runtime_error {
 public:
  enum class Kind {
    Invalid,   ///< not JSON (or a number past a double)
    TooDeep,   ///< arrays / objects nested deeper than JsonLimits::max_depth
    TooLarge,  ///< longer than JsonLimits::max_bytes
  };
  JsonError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

/// "JSON nested deeper than N levels": the one wording of a depth refusal, for parsers that
/// stream (the Kineto importer's SAX handler) as for parse_json_bounded.
std::string json_too_deep(size_t max_depth);

/// The byte offset in `text` of the bracket that opens level max_depth + 1 (arrays and objects
/// outside strings), or std::string_view::npos when the text nests no deeper than max_depth.
/// One pass, no allocation; the text need not be valid JSON.
size_t json_depth_exceeded_at(std::string_view text, size_t max_depth);

/// Parses `text` as one JSON value. Before nlohmann sees it, a text longer than
/// `limits.max_bytes` or nested deeper than `limits.max_depth` is refused, so no value that
/// would recurse past the limit is ever built. `what` names the value in every error, e.g.
/// "capture FILE: run 3: RUNS.results". Throws JsonError: "WHAT: JSON nested deeper than 512
/// levels (byte 1234)", "WHAT: JSON text of N bytes, more than the 64 MiB hookscope reads in one
/// value", "WHAT: not valid JSON: <nlohmann's message>".
nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, const JsonLimits& limits = {});
/// The same, keeping the objects' keys in text order.
nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what,
                                                  const JsonLimits& limits = {});

}  // namespace hs::storage

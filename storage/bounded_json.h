// Parsing JSON that hookscope did not just write itself — a capture's JSON columns, the torch
// driver's reply lines, values of imported files, a checkpoint's config.json, tokenizer.json,
// safetensors header and index, an offload folder's index.json — with a bound on its nesting,
// its size and (for the model files) the length of any one string.
//
// nlohmann's parser is iterative, but copying, comparing, dumping and merging a value recurse
// once per level: a value nested 100,000 deep parses and then overflows the stack wherever it
// is used. So every reader of untrusted JSON parses through parse_json_bounded (or, for a
// reader with its own parse, check_json_bounds first), which checks the text's bracket nesting,
// size and strings in one pass before nlohmann builds anything.
//
// A library of its own (hookscope_bounded_json, nlohmann only), below models/ and storage/:
// both link it.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
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
  /// The longest string (key or value, counted in bytes of its text between the quotes).
  size_t max_string_bytes = std::numeric_limits<size_t>::max();
};

/// Why a JSON text was refused. what() reads "WHAT: DETAIL", WHAT as the caller named the value.
class JsonError : public std::runtime_error {
 public:
  enum class Kind {
    Invalid,        ///< not JSON (or a number past a double, or a NUL byte)
    TooDeep,        ///< arrays / objects nested deeper than JsonLimits::max_depth
    TooLarge,       ///< longer than JsonLimits::max_bytes
    StringTooLong,  ///< a string longer than JsonLimits::max_string_bytes
  };
  JsonError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind), detail_(what) {}
  JsonError(Kind kind, std::string_view name, const std::string& detail)
      : std::runtime_error(std::string(name) + ": " + detail), kind_(kind), detail_(detail) {}
  Kind kind() const { return kind_; }
  /// what() without "WHAT: ": "not valid JSON at line 1, column 6 (byte 5): the text ends before
  /// the JSON value is complete", "JSON nested deeper than 64 levels (byte 12)", ...
  const std::string& detail() const { return detail_; }
  /// For Invalid, detail() without its "not valid JSON " ("at line 1, column 6 (byte 5): the
  /// text ends ..."), for a reader that words the refusal its own way; else detail().
  std::string invalid_at() const {
    const std::string_view not_valid = "not valid JSON ";
    if (kind_ == Kind::Invalid && detail_.rfind(not_valid, 0) == 0) return detail_.substr(not_valid.size());
    return detail_;
  }

 private:
  Kind kind_;
  std::string detail_;
};

/// "JSON nested deeper than N levels": the one wording of a depth refusal, for parsers that
/// stream (the Kineto importer's SAX handler) as for parse_json_bounded.
std::string json_too_deep(size_t max_depth);

/// The byte offset in `text` of the bracket that opens level max_depth + 1 (arrays and objects
/// outside strings), or std::string_view::npos when the text nests no deeper than max_depth.
/// One pass, no allocation; the text need not be valid JSON.
size_t json_depth_exceeded_at(std::string_view text, size_t max_depth);

/// Where a byte of a JSON text is, for a message: "line L, column C (byte B)", lines and columns
/// from 1 (columns in bytes), B from 0.
std::string json_position(std::string_view text, size_t byte);

/// The first syntax error of a JSON text, in plain words.
struct JsonSyntaxError {
  size_t byte = 0;     ///< where, from 0 (text.size(): at its end)
  std::string reason;  ///< "the text ends before the JSON value is complete", "'NaN' is not a JSON value ..."
  bool number_overflow = false;  ///< a number past a double's range (nlohmann's out_of_range.406)
};

/// The first syntax error nlohmann's parser meets in `text` (one SAX pass, builds nothing), in
/// plain words without nlohmann's exception names; nullopt when `text` is one valid JSON value.
std::optional<JsonSyntaxError> find_json_syntax_error(std::string_view text);

/// Words a syntax error nlohmann's SAX parser reported (its parse_error callback's arguments)
/// as find_json_syntax_error does. `complete`: a whole JSON value had been read before it.
JsonSyntaxError json_syntax_error(std::string_view text, size_t position, const std::string& last_token,
                                  const nlohmann::json::exception& e, bool complete);

/// "at line L, column C (byte B): REASON".
std::string describe_json_error(std::string_view text, const JsonSyntaxError& e);

/// The checks parse_json_bounded makes before nlohmann sees the text, for a reader that parses
/// it itself: size, nesting, string length, and no NUL byte (JSON never holds one; nlohmann
/// takes it for the end of the text). Throws JsonError (TooLarge, TooDeep, StringTooLong,
/// Invalid): "WHAT: a string longer than 1 MiB at line 3, column 9 (byte 40) (hookscope reads
/// strings up to that size)", "WHAT: not valid JSON at line 1, column 3 (byte 2): a NUL byte
/// (0x00): JSON text never holds one".
void check_json_bounds(std::string_view text, std::string_view what, const JsonLimits& limits = {});

/// Parses `text` as one JSON value. Before nlohmann sees it, the text passes check_json_bounds,
/// so no value that would recurse past the limit is ever built. `what` names the value in every
/// error, e.g. "capture FILE: run 3: RUNS.results". Throws JsonError: "WHAT: JSON nested deeper
/// than 512 levels (byte 1234)", "WHAT: JSON text of N bytes, more than the 64 MiB hookscope
/// reads in one value", "WHAT: not valid JSON at line 1, column 6 (byte 5): the text ends before
/// the JSON value is complete".
nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, const JsonLimits& limits = {});
/// The same, keeping the objects' keys in text order.
nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what,
                                                  const JsonLimits& limits = {});

}  // namespace hs::storage

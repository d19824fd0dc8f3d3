#include "importers/dynamo_text.h"

#include <cctype>

namespace hs::importers {

namespace {

constexpr std::string_view kChain = "*** While handling this graph break, another graph break occurred: ***";
constexpr std::string_view kUserFrame = "Graph break in user code at ";
constexpr std::string_view kInstruction = "Graph Break Reason: ";
constexpr std::string_view kUserStack = "User code traceback:";
constexpr std::string_view kTraceback = "Traceback (most recent call last):";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// The lines of `s` (split at '\n'; a final empty piece after a trailing '\n' is dropped).
std::vector<std::string_view> lines_of(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

/// Appends a field's continuation line (indented by four spaces) to `field`.
void continue_field(std::string& field, std::string_view line) {
  field += '\n';
  field += trim(line);
}

GraphBreakMessage parse_message(std::string_view text) {
  GraphBreakMessage m;
  const std::vector<std::string_view> lines = lines_of(trim(text));
  if (lines.empty()) return m;
  m.gb_type = std::string(trim(lines[0]));
  std::string* field = nullptr;  // the field a four-space continuation line extends
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (starts_with(line, "  Explanation: ")) {
      m.explanation = std::string(trim(line.substr(15)));
      field = &m.explanation;
    } else if (starts_with(line, "  Hint: ")) {
      m.hints.emplace_back(trim(line.substr(8)));
      field = &m.hints.back();
    } else if (starts_with(line, "  Developer debug context: ")) {
      m.context = std::string(trim(line.substr(27)));
      field = &m.context;
    } else if (starts_with(line, "    ") && field) {
      continue_field(*field, line);
    } else {
      field = nullptr;
    }
  }
  const std::vector<std::string> codes = graph_break_codes(text);
  if (!codes.empty()) m.gb_code = codes.front();
  return m;
}

/// The user frames of a "User code traceback:" section: lines up to the first blank line.
std::string user_stack_after(std::string_view rest) {
  std::string out;
  for (std::string_view line : lines_of(rest)) {
    if (trim(line).empty()) break;
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

}  // namespace

std::vector<std::string> graph_break_codes(std::string_view text) {
  std::vector<std::string> out;
  constexpr std::string_view kLink = "/gb/gb";
  for (size_t at = text.find(kLink); at != std::string_view::npos; at = text.find(kLink, at + 1)) {
    size_t end = at + kLink.size();
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end > at + kLink.size()) out.push_back("GB" + std::string(text.substr(at + kLink.size(), end - at - kLink.size())));
  }
  return out;
}

std::vector<GraphBreakMessage> parse_graph_break_messages(std::string_view reason) {
  std::vector<GraphBreakMessage> out;
  while (true) {
    const size_t chain = reason.find(kChain);
    out.push_back(parse_message(reason.substr(0, chain)));
    if (chain == std::string_view::npos) break;
    reason.remove_prefix(chain + kChain.size());
  }
  return out;
}

GraphBreakReport parse_graph_break_report(std::string_view payload) {
  GraphBreakReport r;
  std::string_view rest = payload;
  if (starts_with(rest, kUserFrame)) {
    const size_t nl = rest.find('\n');
    r.user_frame = std::string(trim(rest.substr(kUserFrame.size(), nl - kUserFrame.size())));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  if (starts_with(rest, kInstruction)) {
    const size_t nl = rest.find('\n');
    r.instruction = std::string(trim(rest.substr(kInstruction.size(), nl - kInstruction.size())));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  // The reason runs up to the user traceback (or the Python traceback, or the end).
  size_t end = rest.find("\n" + std::string(kUserStack));
  if (end == std::string_view::npos) end = rest.find("\n" + std::string(kTraceback));
  const std::string_view reason = rest.substr(0, end);
  r.reason = std::string(trim(reason));
  r.messages = parse_graph_break_messages(reason);
  if (const size_t stack = rest.find("\n" + std::string(kUserStack)); stack != std::string_view::npos) {
    std::string_view after = rest.substr(stack + 1 + kUserStack.size());
    if (!after.empty() && after.front() == '\n') after.remove_prefix(1);
    r.user_stack = user_stack_after(after);
  }
  // "Failed to handle graph break gracefully. Skipping the function and falling back to eager",
  // or a chained break whose explanation says so ("graph break in loop", GB7000).
  constexpr std::string_view kEager = "falling back to eager";
  r.frame_skipped = r.instruction.find(kEager) != std::string::npos;
  for (size_t i = 1; i < r.messages.size(); ++i)
    r.frame_skipped = r.frame_skipped || r.messages[i].gb_code == "GB7000" ||
                      r.messages[i].explanation.find(kEager) != std::string::npos;
  return r;
}

RecompileReason parse_recompile_reason(std::string_view reason) {
  RecompileReason r;
  std::string_view first = reason.substr(0, reason.find('\n'));
  if (const size_t colon = first.find(": "); colon != std::string_view::npos && colon > 0 &&
                                             first.substr(0, colon).find(' ') == std::string_view::npos) {
    r.guard_compile_id = std::string(first.substr(0, colon));
    first.remove_prefix(colon + 2);
  }
  r.guard = std::string(trim(first.substr(0, first.find("  #"))));
  return r;
}

bool is_recompile_limit(std::string_view fail_gb_code, std::string_view fail_reason) {
  for (std::string_view needle : {"recompile limit", "recompile_limit", "cache_size_limit"})
    if (fail_reason.find(needle) != std::string_view::npos) return true;
  return fail_gb_code == "GB0039";
}

std::string without_addresses(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '0' && i + 2 < text.size() && text[i + 1] == 'x' &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += "0x\u2026";
      i += 2;
      while (i < text.size() && std::isxdigit(static_cast<unsigned char>(text[i]))) ++i;
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace hs::importers

namespace hs::importers {

namespace {
struct StackFrame {
  std::string_view file, line, function, source;
};

/// The frames of a traceback text: `  File "F", line N, in FN` then, indented deeper, its source.
std::vector<StackFrame> stack_frames(std::string_view text) {
  std::vector<StackFrame> frames;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view l = text.substr(at, nl - at);
    at = nl + 1;
    const size_t lead = l.find_first_not_of(' ');
    if (lead == std::string_view::npos) continue;
    l.remove_prefix(lead);
    if (l.rfind("File \"", 0) == 0) {
      const size_t q = l.find("\", line ", 6);
      if (q == std::string_view::npos) continue;
      StackFrame f;
      f.file = l.substr(6, q - 6);
      const size_t in = l.find(", in ", q + 8);
      f.line = l.substr(q + 8, (in == std::string_view::npos ? l.size() : in) - (q + 8));
      if (in != std::string_view::npos) f.function = l.substr(in + 5);
      frames.push_back(f);
    } else if (!frames.empty() && frames.back().source.empty()) {
      frames.back().source = l;
    }
  }
  return frames;
}

/// "decoder_layer" of "hidden_states = decoder_layer(", "self" of "return self(**inputs)".
std::string_view trimmed(std::string_view s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string_view::npos ? std::string_view() : s.substr(a, b - a + 1);
}

// The module called on a source line: the called expression of its one call
// ("self.embed_tokens" in `x: T = self.embed_tokens(ids)`); on a line of several calls, where the
// stack cannot tell which one was the module's, the whole call expression
// ("torch.relu(l(x))"), not a guess.
std::string_view callee_of(std::string_view source) {
  // A compound statement on one line ("for x in xs: y = m(x)", "def f(s, x): return s.fc(x)"):
  // its body.
  for (std::string_view head : {"for ", "while ", "if ", "elif ", "else:", "with ", "def ", "try:"})
    if (source.substr(0, head.size()) == head)
      if (const size_t colon = source.find(": "); colon != std::string_view::npos) {
        source.remove_prefix(colon + 2);
        break;
      }
  const size_t paren = source.find('(');
  std::string_view head = source.substr(0, paren == std::string_view::npos ? source.size() : paren);
  size_t from = 0;
  if (const size_t eq = head.rfind('='); eq != std::string_view::npos) from = eq + 1;
  if (const size_t r = head.find("return ", from); r != std::string_view::npos) from = r + 7;
  if (paren != std::string_view::npos && source.find('(', paren + 1) != std::string_view::npos)
    return trimmed(source.substr(from));
  return trimmed(head.substr(from));
}
}  // namespace

std::string named_function(std::string_view reason) {
  const size_t at = reason.find("<function ");
  if (at == std::string_view::npos) return "";
  const size_t start = at + 10, stop = reason.find_first_of(" >", start);
  return std::string(reason.substr(start, stop == std::string_view::npos ? std::string_view::npos : stop - start));
}

std::string break_label(std::string_view gb_code, std::string_view gb_type, std::string_view reason) {
  std::string what = named_function(reason);
  if (what.empty()) what = std::string(gb_type);
  return gb_code.empty() ? what : std::string(gb_code) + " " + what;
}

ModuleCall module_call(std::string_view user_stack) {
  const std::vector<StackFrame> frames = stack_frames(user_stack);
  auto in_module_py = [](std::string_view file) {
    return file.ends_with("torch/nn/modules/module.py");
  };
  for (size_t i = frames.size(); i-- > 1;) {
    if (!in_module_py(frames[i].file) || in_module_py(frames[i - 1].file)) continue;
    const StackFrame& f = frames[i - 1];
    const size_t slash = f.file.find_last_of('/');
    ModuleCall c;
    c.callee = std::string(callee_of(f.source));
    c.site = std::string(slash == std::string_view::npos ? f.file : f.file.substr(slash + 1)) + ":" +
             std::string(f.line) + (f.function.empty() ? "" : " in " + std::string(f.function));
    return c;
  }
  return {};
}

}  // namespace hs::importers

// Dynamo's texts, read as torch writes them (torch/_dynamo/exc.py, symbolic_convert.py,
// guards.py): a graph break's `dynamo_graph_break_reason` payload, a failure or restart reason,
// a recompile reason. Used by the TORCH_TRACE importer (importers/torch_trace_log.h); pure
// functions over strings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hs::importers {

/// One graph break message as Dynamo formats it (`format_graph_break_message`):
///   <gb_type>
///     Explanation: <explanation>
///     Hint: <hint>            (zero or more)
///
///     Developer debug context: <context>
///
///    For more details about this graph break, please visit: .../gb/gb0098.html
/// Continuation lines of a field are indented by four spaces. A message that is not in this
/// shape (an older torch, another exception) keeps its first line as `gb_type` and nothing else.
struct GraphBreakMessage {
  std::string gb_type;
  std::string explanation;
  std::vector<std::string> hints;
  std::string context;
  std::string gb_code;  ///< "GB0098" from the documentation link; "" without one
};

/// A `dynamo_graph_break_reason` payload:
///   Graph break in user code at FILE:LINE
///   Graph Break Reason: <instruction>
///
///   <message>            (then, for a break raised while handling it,
///                         "*** While handling this graph break, another graph break occurred: ***"
///                         and the next message)
///
///   User code traceback:
///     File "...", line N, in fn
///       code
///
///   <Python traceback of the exception>
struct GraphBreakReport {
  std::string user_frame;    ///< "FILE:LINE"; "" when the payload has no such line
  std::string instruction;   ///< the text after "Graph Break Reason: "
  std::string reason;        ///< every message, as torch._dynamo.explain prints the break's reason
  std::vector<GraphBreakMessage> messages;  ///< the first, then the chained ones (GB7000, ...)
  std::string user_stack;    ///< the "User code traceback:" frames, without that title
  /// True when Dynamo gave up on the frame: "Skipping the function and falling back to eager",
  /// or a chained "graph break in loop" (GB7000).
  bool frame_skipped = false;
};

/// Parses a `dynamo_graph_break_reason` payload. Never throws: text it does not recognise
/// becomes `reason` (and the first line `messages[0].gb_type`).
GraphBreakReport parse_graph_break_report(std::string_view payload);

/// Splits a reason text (a failure, a restart, the reason part of a report) into its messages.
std::vector<GraphBreakMessage> parse_graph_break_messages(std::string_view reason);

/// The graph-break codes in a text ("GB0098" for each ".../gb/gb0098.html"), in order.
std::vector<std::string> graph_break_codes(std::string_view text);

/// The module call a graph break happened under: the innermost frame of a break's user stack
/// (GraphBreakReport::user_stack) whose next frame is torch.nn.Module's call machinery
/// (torch/nn/modules/module.py) — for a hook's break, the call of the hooked module.
struct ModuleCall {
  std::string callee;  ///< the called expression of its source line: "decoder_layer", "self.mlp", "self"
  std::string site;    ///< "modeling_llama.py:393 in forward" (the file's base name)
  bool empty() const { return callee.empty() && site.empty(); }
};
/// Never throws; an empty ModuleCall when the stack calls no module.
ModuleCall module_call(std::string_view user_stack);

/// The function a break's reason names: "AlignDevicesHook.pre_forward" of "Skip calling function
/// `<function AlignDevicesHook.pre_forward at 0x7f...>`"; "" when it names none.
std::string named_function(std::string_view reason);

/// A break as one short line: its code and the function its reason names, else its type
/// ("GB0098 AlignDevicesHook.pre_forward").
std::string break_label(std::string_view gb_code, std::string_view gb_type, std::string_view reason);

/// One recompile reason as Dynamo logs it (`recompile_reasons` artifact): "0/7: <guard>  #
/// <source line>  # <file:line> in <fn> ...\nUser stack trace: ...". `guard_compile_id` is the
/// cached compile whose guard failed; `guard` the guard expression up to its "  # " comment or
/// the end of its first line.
struct RecompileReason {
  std::string guard_compile_id;
  std::string guard;
};
RecompileReason parse_recompile_reason(std::string_view reason);

/// True for a compile that failed on Dynamo's recompile limit: code GB0039, or a failure reason
/// naming the limit ("recompile limit", or `cache_size_limit` in older torch).
bool is_recompile_limit(std::string_view fail_gb_code, std::string_view fail_reason);

/// `text` with every hexadecimal address ("0x7f486a616020") written "0x…": reasons that differ
/// only in the address of a function object group together.
std::string without_addresses(std::string_view text);

}  // namespace hs::importers

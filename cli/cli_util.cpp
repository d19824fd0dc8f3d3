#include "cli/cli_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <system_error>

#include "output/paths.h"
#include "output/text.h"

namespace hs::cli {

using output::join;

CLI::Validator list_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        const auto items = output::split_list(value);
        if (items.empty()) return "needs at least one of " + output::join(allowed, ", ");
        for (size_t i = 0; i < items.size(); ++i) {
          if (std::find(allowed.begin(), allowed.end(), items[i]) == allowed.end())
            return "'" + items[i] + "' is not one of " + output::join(allowed, ", ");
          if (std::find(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i), items[i]) !=
              items.begin() + static_cast<std::ptrdiff_t>(i))
            return "'" + items[i] + "' is given twice";
        }
        return "";
      },
      "{" + output::join(allowed, ",") + "},...");
}

CLI::Validator one_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return "";
        return "'" + value + "' is not one of " + output::join(allowed, ", ");
      },
      "{" + output::join(allowed, ",") + "}");
}

namespace {

// "INT", "UINT", "FLOAT", ... : an option's CLI11 type, without its validators' descriptions.
std::string value_type(const CLI::Option& o) {
  const std::string t = o.get_type_name();
  return t.substr(0, t.find(':'));
}

bool whole_number_text(const std::string& s) {
  const size_t start = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
}

// The value as an error message shows it: quoted, its control characters escaped.
std::string shown_value(const std::string& value) { return "'" + output::terminal_text(value, false) + "'"; }

// A whole number in decimal digits (an optional sign, no spaces, no 0x) that fits `T`;
// otherwise why not.
// `range`: the option's own range as its help gives it ("[0 - 1048576]"), "" for none.
template <class T>
CLI::Validator whole_number(std::string range) {
  if (range.empty()) range = "[" + std::to_string(std::numeric_limits<T>::min()) + " - " +
                             std::to_string(std::numeric_limits<T>::max()) + "]";
  return CLI::Validator(
      [range](std::string& value) -> std::string {
        if (!whole_number_text(value)) return shown_value(value) + " is not a whole number";
        const char* first = value.data() + (value[0] == '+' ? 1 : 0);
        T v = 0;
        if (std::from_chars(first, value.data() + value.size(), v).ec != std::errc())  // too large, or < 0 for unsigned
          return shown_value(value) + " is out of range " + range;
        return "";  // a range of the option's own comes next
      },
      "");
}

// The range an option's validators give in its type name ("INT:INT in [0 - 1048576]" →
// "[0 - 1048576]"), "" for none.
std::string declared_range(const CLI::Option& o) {
  const std::string t = o.get_type_name();
  const size_t in = t.find(" in [");
  if (in == std::string::npos) return "";
  const size_t end = t.find(']', in);
  return end == std::string::npos ? "" : t.substr(in + 4, end - in - 3);
}

}  // namespace

void check_numbers(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size_max() == 0) continue;  // a flag
    const std::string type = value_type(*o);
    if (type == "INT")
      o->transform(whole_number<std::int64_t>(declared_range(*o)).non_modifying());
    else if (type == "UINT")
      o->transform(whole_number<std::uint64_t>(declared_range(*o)).non_modifying());
    else if (type == "FLOAT")
      o->transform(CLI::Validator(
                       [](std::string& value) -> std::string {
                         long double v = 0;
                         if (!CLI::detail::lexical_cast(value, v)) return shown_value(value) + " is not a number";
                         if (!std::isfinite(v)) return shown_value(value) + " is not a finite number";
                         return "";
                       },
                       "")
                       .non_modifying());
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

CLI::Validator max_memory_spec() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          // A usage error like any other unparsable value (exit 2): a negative accelerator index.
          for (const auto& [dev, bytes] : hooks::parse_max_memory(value))
            if (dev.is_accelerator() && dev.index < 0)
              return "key '" + dev.str() + "' is not a device: accelerator indices start at 0";
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "DEVICE=SIZE,...");
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

namespace {

// The closest of `names` to `word` within 2 edits ("" when none is that close).
std::string closest(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = 3;
  for (const auto& n : names)
    if (const size_t d = edit_distance(word, n); d < best_d) {
      best_d = d;
      best = n;
    }
  return best;
}

}  // namespace

std::string did_you_mean(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* cmd = nullptr;
  std::vector<std::string> subcommands;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) subcommands.push_back(sub->get_name());
  for (const auto& a : args) {
    if (a.empty() || a[0] == '-') continue;
    if (std::find(subcommands.begin(), subcommands.end(), a) != subcommands.end()) cmd = app.get_subcommand(a);
    else if (const std::string s = closest(a, subcommands); !s.empty())
      return "hookscope: '" + a + "' is no command; did you mean '" + s + "'?";
    break;
  }
  std::vector<std::string> names;
  for (CLI::App* scope : {&app, cmd})
    if (scope)
      for (const CLI::Option* o : scope->get_options())
        for (const auto& l : o->get_lnames()) names.push_back(l);
  for (const auto& a : args) {
    if (a == "--") break;
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) continue;
    const std::string flag = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
    if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
    if (const std::string s = closest(flag, names); !s.empty())
      return std::string("hookscope") + (cmd ? " " + cmd->get_name() : "") + ": unknown option --" + flag +
             "; did you mean --" + s + "?";
    return "";
  }
  return "";
}

void refuse_empty_values(const CLI::App& app) {
  std::vector<const CLI::App*> scopes{&app};
  for (const CLI::App* sub : app.get_subcommands()) scopes.push_back(sub);
  // Options whose empty value is documented: `plan --no-split ""` splits every class.
  static const std::set<std::string> kEmptyMeansNone = {"--no-split"};
  for (const CLI::App* scope : scopes)
    for (const CLI::Option* o : scope->get_options()) {
      if (o->count() == 0 || o->get_type_size_max() == 0) continue;  // not given, or a flag
      if (kEmptyMeansNone.count(o->get_name())) continue;
      for (const auto& v : o->results())
        if (v.find_first_not_of(" \t\n") == std::string::npos)
          throw CLI::ValidationError(o->get_name(), "an empty value names nothing: give one, or leave the option out");
    }
}

std::string unknown_command(CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return "";
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), args[0]) != names.end()) return "";
  if (const std::string s = closest(args[0], names); !s.empty())
    return "hookscope: '" + args[0] + "' is no command; did you mean '" + s + "'?";
  return "hookscope: '" + args[0] + "' is no command; the commands are: " + output::join(names, ", ") +
         " (hookscope COMMAND --help says more)";
}


hooks::MaxMemory parse_max_memory_option(const std::string& spec, int max_index, const std::string& limit, bool mps_ok) {
  hooks::MaxMemory mm;
  try {
    mm = hooks::parse_max_memory(spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--max-memory: ") + e.what());
  }
  for (const auto& [dev, bytes] : mm) {
    const std::string key = "--max-memory: key '" + dev.str() + "'";
    if (dev.is_accelerator() && dev.index < 0)
      throw std::invalid_argument(key + " is not a device: accelerator indices start at 0");
    if (dev.is_accelerator() && dev.index > max_index)
      throw std::invalid_argument(key + ": accelerator indices go from 0 to " + std::to_string(max_index) + " (" + limit +
                                  ")");
    if (dev.kind == hooks::DeviceId::Kind::Mps && !mps_ok)
      throw std::invalid_argument(key + ": there is no MPS device here (the devices are the accelerators 0.." +
                                  std::to_string(max_index) + ", cpu and disk)");
  }
  return mm;
}

AccelerateTree parse_accelerate_tree(const std::string& value) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    throw std::invalid_argument("--accelerate: '" + output::terminal_text(value, false) + "' is not NAME=PATH");
  AccelerateTree t{value.substr(0, eq), value.substr(eq + 1)};
  const bool chars_ok = std::all_of(t.name.begin(), t.name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '+' || c == '-';
  });
  if (!chars_ok || t.name.size() > 64 || t.name[0] == '.' || t.name[0] == '-')
    throw std::invalid_argument("--accelerate: the name '" + output::terminal_text(t.name, false) +
                                "' is not a policy name: 1 to 64 of A-Z a-z 0-9 . _ + -, not beginning with . or -");
  if (t.name == "whole-hook" || t.name == "offload-only")
    throw std::invalid_argument("--accelerate: the name '" + t.name + "' is taken");
  return t;
}

namespace {
// The command-line word that gave `path`: "--flag VALUE" or "--flag=VALUE" as "--flag VALUE", a
// positional argument as itself; the value must be the path or a folder above it (the deepest
// such one: `--model .` holds every path here). "" if none.
std::string argument_giving(const std::filesystem::path& path, const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(path, ec).lexically_normal();
  if (ec || target.empty()) return "";
  // How many parts of `value` lead to the path (0: it does not).
  auto depth = [&](const std::string& value) -> size_t {
    if (value.empty() || value[0] == '-') return 0;
    const fs::path v = fs::absolute(value, ec).lexically_normal();
    if (ec) return 0;
    const auto [vi, ti] = std::mismatch(v.begin(), v.end(), target.begin(), target.end());
    const bool leads = vi == v.end() || (std::next(vi) == v.end() && vi->empty());  // a trailing '/': an empty part
    return leads ? static_cast<size_t>(std::distance(v.begin(), vi)) : 0;
  };
  std::string best;
  size_t best_depth = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a.size() == 2 && a.starts_with("--")) break;  // hookscope profile's program and its arguments follow
    std::string given;
    size_t d = 0;
    if (const size_t eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) {
      const std::string flag(a.substr(0, eq)), value(a.substr(eq + 1));
      d = depth(value), given = flag + " " + value;
    } else {
      d = depth(args[i]);
      given = i > 0 && args[i - 1].size() > 1 && args[i - 1][0] == '-' ? args[i - 1] + " " + args[i] : args[i];
    }
    if (d > best_depth) best = given, best_depth = d;
  }
  return best;
}
}  // namespace

std::string filesystem_error_message(const std::filesystem::filesystem_error& e, const std::vector<std::string>& args) {
  std::string why =
      e.code() == std::errc::too_many_symbolic_link_levels ? "a loop of symbolic links" : e.code().message();
  if (!why.empty() && why[0] >= 'A' && why[0] <= 'Z' && (why.size() < 2 || why[1] < 'A' || why[1] > 'Z'))
    why[0] = static_cast<char>(why[0] - 'A' + 'a');
  // libstdc++ says "filesystem error: OPERATION: MESSAGE [PATH1] [PATH2]".
  std::string op;
  const std::string what = e.what(), prefix = "filesystem error: ", tail = ": " + e.code().message();
  if (what.rfind(prefix, 0) == 0) {
    const size_t end = what.find(tail, prefix.size());
    if (end != std::string::npos) op = what.substr(prefix.size(), end - prefix.size());
  }
  if (op == "status" || op == "symlink_status" || op == "canonical" || op == "weakly_canonical")
    op = "cannot look it up";
  const std::string path = e.path1().string(), given = argument_giving(e.path1(), args);
  std::string out;
  if (!given.empty()) out = given + ": ";
  if (!path.empty() && given != path && !std::string_view(given).ends_with(" " + path)) out += path + ": ";
  if (!op.empty()) out += op + ": ";
  out += why;
  if (!e.path2().empty()) out += " (and " + e.path2().string() + ")";
  return output::terminal_text(out, false);
}

}  // namespace hs::cli

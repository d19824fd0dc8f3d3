#include "app/cli_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/export_file.h"
#include "storage/capture_reader.h"

namespace hs::app {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    out.push_back(item.substr(b, item.find_last_not_of(" \t") - b + 1));
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

CLI::Validator list_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        const auto items = split_list(value);
        if (items.empty()) return "needs at least one of " + join(allowed, ", ");
        for (size_t i = 0; i < items.size(); ++i) {
          if (std::find(allowed.begin(), allowed.end(), items[i]) == allowed.end())
            return "'" + items[i] + "' is not one of " + join(allowed, ", ");
          if (std::find(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i), items[i]) !=
              items.begin() + static_cast<std::ptrdiff_t>(i))
            return "'" + items[i] + "' is given twice";
        }
        return "";
      },
      "{" + join(allowed, ",") + "},...");
}

CLI::Validator one_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return "";
        return "'" + value + "' is not one of " + join(allowed, ", ");
      },
      "{" + join(allowed, ",") + "}");
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
  return "hookscope: '" + args[0] + "' is no command; the commands are: " + join(names, ", ") +
         " (hookscope COMMAND --help says more)";
}

namespace {

std::string shell_quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

namespace {
std::filesystem::path normal_path(const std::filesystem::path& p);
}  // namespace

std::string open_hint(const std::filesystem::path& capture, size_t runs, const std::vector<std::string>& inputs) {
  const std::string f = shell_quoted(capture.string());
  std::filesystem::path chrome = capture;
  chrome.replace_extension(runs == 1 ? ".json" : "");
  if (runs != 1) chrome += "-chrome";
  const auto taken = [&](const std::filesystem::path& p) {
    return p == capture || std::any_of(inputs.begin(), inputs.end(), [&](const std::string& in) {
             return !in.empty() && (same_file(p, in) || normal_path(p) == normal_path(in));
           });
  };
  if (taken(chrome)) chrome = capture.parent_path() / (capture.stem().string() + ".trace.json");
  if (taken(chrome)) chrome = capture.parent_path() / (capture.stem().string() + ".export.json");
  const std::string export_line =
      runs == 1 ? "hookscope export " + f + " --format chrome -o " + shell_quoted(chrome.string()) +
                      "   (Perfetto, chrome://tracing, HTA)"
                : "hookscope export " + f + " --run all --format chrome -o " + shell_quoted(chrome.string()) +
                      "   (a trace per run for Perfetto, chrome://tracing, HTA; --run ID for one)";
  return "[hookscope] open it with:\n  hookscope report " + f + "     (Markdown / JSON comparison)\n  hookscope view " + f +
         "       (timeline viewer)\n  " + export_line + "\n";
}

namespace {
// A path made absolute and normal, a (dangling) symlink's target followed: what two output
// names are compared by when the files do not exist yet.
std::filesystem::path normal_path(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (std::filesystem::is_symlink(abs, ec)) {
    const std::filesystem::path target = std::filesystem::read_symlink(abs, ec);
    if (!ec) abs = target.is_absolute() ? target : abs.parent_path() / target;
  }
  return std::filesystem::weakly_canonical(abs, ec);
}
}  // namespace

std::string json_text(const nlohmann::json& doc, int indent) {
  return doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void refuse_invalid_utf8(const std::string& flag, const std::string& value) {
  try {
    (void)nlohmann::json(value).dump();
  } catch (const nlohmann::json::type_error& e) {  // type_error.316: "invalid UTF-8 byte at index N: 0xFF"
    const std::string what = e.what();
    const size_t at = what.find("invalid UTF-8");
    throw std::invalid_argument(flag + ": not valid UTF-8 (" + (at == std::string::npos ? what : what.substr(at)) + ")");
  }
}

size_t utf8_length_at(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b = at(0);
  if (i >= s.size()) return 0;
  if (b < 0x80) return 1;
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b >= 0xe0 && b <= 0xef) n = 3, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  return n;
}

std::pair<unsigned, size_t> invisible_character_at(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (at(0) == 0xc2 && at(1) >= 0x80 && at(1) <= 0x9f) return {at(1), 2};  // C1
  if (at(0) == 0xef && at(1) == 0xbb && at(2) == 0xbf) return {0xfeff, 3};
  if (at(0) != 0xe2 || at(1) < 0x80 || at(1) > 0x81 || at(2) < 0x80 || at(2) > 0xbf) return {0, 0};
  const unsigned cp = 0x2000 + ((at(1) & 0x3f) << 6) + (at(2) & 0x3f);
  const bool hidden = cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
  return hidden ? std::pair<unsigned, size_t>{cp, 3} : std::pair<unsigned, size_t>{0, 0};
}

std::string terminal_text(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if ((u < 0x20 && !(keep_lines && (u == '\n' || u == '\t'))) || u == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
      ++i;
    } else if (const auto [cp, n] = invisible_character_at(s, i); n) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
      i += n;
    } else if (const size_t len = utf8_length_at(s, i); len == 0) {  // not UTF-8: the byte's value
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

void refuse_control_characters(const std::string& flag, const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f)
      throw std::invalid_argument(flag + ": holds a control character (" + (c == '\n' ? std::string("a newline") : c == '\t' ? std::string("a tab") : "byte " + std::to_string(c)) +
                                  ") at offset " + std::to_string(i) + "; a name is one line");
  }
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

namespace {
/// `p` with a final symbolic link followed even when what it points to does not exist yet
/// (weakly_canonical stops at a dangling link, and writing through it creates its target).
std::filesystem::path through_links(std::filesystem::path p) {
  std::error_code ec;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec)); ++hops) {
    const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return p;
}
}  // namespace

bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  std::error_code ec;
  const std::string i = std::filesystem::weakly_canonical(through_links(inner), ec).string();
  const std::string o = std::filesystem::weakly_canonical(outer, ec).string();
  if (o.empty() || i.size() < o.size() || i.compare(0, o.size(), o) != 0) return false;
  return i.size() == o.size() || o.back() == '/' || i[o.size()] == '/';
}

std::optional<std::filesystem::path> model_file_at(const std::filesystem::path& out,
                                                   const std::filesystem::path& model_dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec))
    if (same_file(it->path(), out)) return it->path();
  return std::nullopt;
}

std::vector<std::filesystem::path> model_folders(const storage::CaptureReader& capture) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& run : capture.runs()) {
    std::vector<std::filesystem::path> named{run.model};  // a hub id's snapshot folder is in the results
    if (const auto it = run.results.find("model"); it != run.results.end() && it->is_object())
      if (const auto p = it->find("path"); p != it->end() && p->is_string()) named.emplace_back(p->get<std::string>());
    for (const auto& m : named) {
      if (!m.is_absolute() || !std::filesystem::is_regular_file(m / "config.json", ec)) continue;
      if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
    }
  }
  return out;
}

void refuse_output_in_model_folder(const std::string& flag, const std::filesystem::path& out,
                                   const std::vector<std::filesystem::path>& models, const std::string& why,
                                   bool holds_too) {
  if (out.empty()) return;
  const std::string tail = " (" + why + "); hookscope never writes into a model's folder: name a place outside it";
  for (const auto& m : models) {
    if (m.empty()) continue;
    if (const auto f = model_file_at(out, m))
      throw std::invalid_argument(flag + ": " + out.string() + " is (or links to) the model's file " + f->string() + tail);
    if (path_inside(out, m) || same_file(out, m))
      throw std::invalid_argument(flag + ": " + out.string() + " is or lies inside the model's folder " + m.string() + tail);
    if (holds_too && path_inside(m, out))
      throw std::invalid_argument(flag + ": " + out.string() + " holds the model's folder " + m.string() + tail);
  }
}

void refuse_overwriting_input(const std::string& flag, const std::filesystem::path& out,
                              const std::filesystem::path& input, const std::string& role,
                              const std::vector<std::filesystem::path>& models) {
  const bool same = same_file(out, input) || (!out.empty() && normal_path(out) == normal_path(input));
  if (same) throw std::invalid_argument(flag + ": " + out.string() + " is the capture being " + role + "; name another file");
  refuse_output_in_model_folder(flag, out, models, "a run of " + input.string() + " was made from it");
}

void refuse_shared_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const auto& [fa, a] = outputs[j];
      const auto& [fb, b] = outputs[i];
      if (a.empty() || b.empty()) continue;
      if (same_file(a, b) || normal_path(a) == normal_path(b))
        throw std::invalid_argument(fb + ": " + b + " is also " + fa + "'s output; name two files");
    }
}

void write_output_file(const std::filesystem::path& path, const std::string& bytes) {
  ExportFile f(path, /*gzip=*/false);
  f.write(bytes);
  f.commit();
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

}  // namespace hs::app

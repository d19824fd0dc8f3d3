#include "output/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "output/output_file.h"
#include "storage/capture_reader.h"

namespace hs::output {

std::filesystem::path normal_path(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (std::filesystem::is_symlink(abs, ec)) {
    const std::filesystem::path target = std::filesystem::read_symlink(abs, ec);
    if (!ec) abs = target.is_absolute() ? target : abs.parent_path() / target;
  }
  return std::filesystem::weakly_canonical(abs, ec);
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::filesystem::path final_link_target(std::filesystem::path p) {
  std::error_code ec;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec)); ++hops) {
    const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return p;
}

bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  std::error_code ec;
  const std::string i = std::filesystem::weakly_canonical(final_link_target(inner), ec).string();
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
                              const std::vector<std::filesystem::path>& models, bool folder_made) {
  const bool same = same_file(out, input) || (!out.empty() && normal_path(out) == normal_path(input));
  if (same) throw std::invalid_argument(flag + ": " + out.string() + " is the capture being " + role + "; name another file");
  refuse_output_in_model_folder(flag, out, models, "a run of " + input.string() + " was made from it");
  const auto replaced = OutputFile::replaced_file(out);
  if (!replaced) return;  // written in place: /dev/stdout, a FIFO
  refuse_name_too_long(flag, *replaced);
  // What would fail at the write, refused before any output is written.
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(*replaced, ec)) throw std::invalid_argument(flag + ": " + out.string() + " is a folder; name a file to write");
  fs::path folder = replaced->parent_path().empty() ? fs::path(".") : replaced->parent_path();
  if (folder_made)  // the command makes it: the nearest folder above it that exists must be one
    while (!fs::exists(folder, ec) && folder.has_parent_path() && folder.parent_path() != folder) folder = folder.parent_path();
  if (fs::is_directory(folder, ec)) return;
  if (fs::exists(folder, ec))
    throw std::invalid_argument(flag + ": " + out.string() + ": " + folder.string() + " is not a folder");
  if (!folder_made) throw std::invalid_argument(flag + ": " + out.string() + ": folder " + folder.string() + " does not exist");
}

void refuse_name_too_long(const std::string& flag, const std::filesystem::path& out) {
  const std::string name = out.filename().string();
  const std::filesystem::path dir = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
  const long got = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const size_t limit = got > 0 ? static_cast<size_t>(got) : 255;
  if (name.size() + kTemporarySuffixBytes <= limit) return;
  const size_t most = limit > kTemporarySuffixBytes ? limit - kTemporarySuffixBytes : 0;
  throw std::invalid_argument((flag.empty() ? std::string() : flag + ": ") + out.string() + ": its file name is " +
                              std::to_string(name.size()) + " bytes; the temporary files written beside it add up to " +
                              std::to_string(kTemporarySuffixBytes) + " more, and this file system allows " +
                              std::to_string(limit) + " bytes a name: name it in at most " + std::to_string(most) +
                              " bytes");
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

std::vector<std::filesystem::path> checkpoint_folders_above(const std::filesystem::path& out) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (std::filesystem::path dir = normal_path(out).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (std::filesystem::is_regular_file(dir / "config.json", ec)) found.push_back(dir);
    if (dir == dir.root_path()) break;
  }
  return found;
}

void refuse_files_around_folder(const std::string& folder_flag, const std::filesystem::path& folder,
                                const std::vector<std::pair<std::string, std::string>>& files) {
  if (folder.empty()) return;
  const std::filesystem::path inner = normal_path(folder);
  for (const auto& [flag, file] : files) {
    if (file.empty()) continue;
    const std::filesystem::path outer = normal_path(file);
    // `outer` is the folder or above it: its parts are the first of the folder's.
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end() && i != inner.end() && *o == *i; ++o, ++i) {
    }
    if (o == outer.end() || path_inside(folder, file))
      throw std::invalid_argument(flag + ": " + file + " is also " + folder_flag + "'s folder (" + folder.string() +
                                  "); name a file outside it");
  }
}

void write_output_file(const std::filesystem::path& path, const std::string& bytes) {
  OutputFile f(path, /*gzip=*/false);
  f.write(bytes);
  f.commit();
}
}  // namespace hs::output

// Where hookscope writes: the one rule every command's outputs follow (never into a model's
// folder a capture in play was made from, never over an input, never two outputs on one file),
// and whole-file writes that replace a file only once complete.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hs::storage {
class CaptureReader;
}

namespace hs::output {

/// True when both paths exist and are the same file (device and inode, links followed): how an
/// output is checked against the inputs it must never replace.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

/// `p` with a final symbolic link followed, link after link (at most 40), even when what the last
/// one points to does not exist yet (weakly_canonical stops at a dangling link, and writing
/// through it creates its target); `p` itself when it is no link.
std::filesystem::path final_link_target(std::filesystem::path p);

/// True when `inner` is `outer` or lies inside it (both resolved, links followed).
bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer);

/// The file of the folder `model_dir` that `out` is (or links to: symlink or hard link), if any.
std::optional<std::filesystem::path> model_file_at(const std::filesystem::path& out,
                                                   const std::filesystem::path& model_dir);

/// The checkpoint folders the capture's runs were made from: each distinct RUNS.model, or
/// results `model.path` (a hub id's snapshot), that is an absolute path to a folder holding
/// config.json (imports name none).
std::vector<std::filesystem::path> model_folders(const storage::CaptureReader& capture);

/// The one rule for where hookscope writes, checked by every flag that names an output (files,
/// folders, the capture's --out, --keep-offload-dir, --keep-driver-files): never into a model's
/// folder. Throws std::invalid_argument
///   "FLAG: OUT is (or links to) the model's file F (WHY); hookscope never writes into a model's folder: name a place outside it"
/// when `out` is one of the files of a folder of `models` under any name (a link, a hard link), and
///   "FLAG: OUT is or lies inside the model's folder M (WHY); hookscope never writes ..."
/// when it is the folder or lies inside it (links followed, `out` need not exist). With
/// `holds_too` (a folder whose contents the command replaces), "... holds the model's folder M
/// ..." when a model's folder lies inside `out`. `why` says where the folder comes from ("a run
/// of C was made from it", "--model").
void refuse_output_in_model_folder(const std::string& flag, const std::filesystem::path& out,
                                   const std::vector<std::filesystem::path>& models, const std::string& why,
                                   bool holds_too = false);

/// The checkpoint folders an output at `out` would land in (links followed): each folder above
/// it that holds a config.json. The rule for an output whose model is not known before it is
/// written (an import's trace, a profiled program's checkpoints): refuse_output_in_model_folder
/// with these, "it holds a config.json".
std::vector<std::filesystem::path> checkpoint_folders_above(const std::filesystem::path& out);

/// The folder --assets (or any output that is a folder) writes into: refuses, before anything is
/// written, each of the (flag, file) outputs that is that folder or a folder above it, since the
/// folder would be made where the file goes. Throws std::invalid_argument "FLAG: OUT is also
/// FOLDER_FLAG's folder (FOLDER); name a file outside it".
void refuse_files_around_folder(const std::string& folder_flag, const std::filesystem::path& folder,
                                const std::vector<std::pair<std::string, std::string>>& files);

/// Throws std::invalid_argument "FLAG: OUT is the capture being ROLE; name another file" when
/// `out` is `input` (same_file, or the same path once normalised when `out` does not exist yet),
/// refuse_output_in_model_folder's message when it is a file of, or lies inside, one of
/// `models` (model_folders of that capture), refuse_name_too_long's for the file an OutputFile
/// would replace (OutputFile::replaced_file), and for what would fail at the write "FLAG: OUT is
/// a folder; name a file to write", "FLAG: OUT: folder F does not exist" or "FLAG: OUT: F is not
/// a folder": a command that checks each of its outputs first writes none when one is bad.
/// `folder_made`: the command makes the output's folder (`--assets`, an `-o` folder), which need
/// not exist yet. How every command keeps its outputs off the captures it reads and the
/// checkpoints they were made from (`role`: "reported", "exported", "read", ...).
void refuse_overwriting_input(const std::string& flag, const std::filesystem::path& out,
                              const std::filesystem::path& input, const std::string& role,
                              const std::vector<std::filesystem::path>& models = {}, bool folder_made = false);

/// Throws std::invalid_argument "FLAG2: OUT is also FLAG1's output; name two files" when two of
/// the (flag, path) outputs of one command name the same file (empty paths are not outputs).
void refuse_shared_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

/// The most bytes hookscope adds to an output's file name for the files it writes beside it
/// while writing it: `OUT.PID-N.partial-journal` (a capture's temporary file and its SQLite
/// journal), `OUT.partial-PID` (an export's, a report's), `OUT.lock`.
inline constexpr size_t kTemporarySuffixBytes = 32;

/// Throws std::invalid_argument "FLAG: OUT: its file name is N bytes; the temporary files written
/// beside it add up to 32 more, and this file system allows L bytes a name: name it in at most
/// L − 32 bytes" when `out`'s file name plus kTemporarySuffixBytes passes the limit of its
/// folder's file system (pathconf's NAME_MAX; 255 where it cannot be read). Checked before
/// anything is written, so that a legal name never fails halfway at its temporary file.
/// `flag` may be empty (the message then starts at OUT).
void refuse_name_too_long(const std::string& flag, const std::filesystem::path& out);

/// Writes `bytes` through an OutputFile: to a temporary sibling renamed onto `path` when
/// complete, so that a reader never sees half a file and a failed write leaves an earlier file
/// alone (a link's file replaced, /dev/stdout or a FIFO written in place). Throws
/// std::invalid_argument when `path` is a folder, std::runtime_error "cannot write PATH: REASON"
/// when the write fails.
void write_output_file(const std::filesystem::path& path, const std::string& bytes);

/// `p` made absolute and normal, a (dangling) symlink's target followed: what two output names
/// are compared by when the files do not exist yet.
std::filesystem::path normal_path(const std::filesystem::path& p);

}  // namespace hs::output

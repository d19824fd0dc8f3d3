// A capture the importer targets write into: one Store in the scratch folder, replaced every
// kRunsPerStore inputs so the file stays small (creating a capture per input would dominate).
#pragma once

#include <filesystem>
#include <memory>

#include "storage/store.h"
#include "tracer/event_writer.h"

namespace hs::fuzz {

class FuzzStore {
 public:
  explicit FuzzStore(std::filesystem::path path) : path_(std::move(path)) {}
  /// A new run in the current store (a fresh store every kRunsPerStore runs).
  int64_t new_run() {
    if (!store_ || ++runs_ >= kRunsPerStore) {
      store_.reset();
      storage::StoreOptions o;
      o.overwrite = true;
      store_ = std::make_unique<storage::Store>(path_, o);
      runs_ = 0;
    }
    tracer::RunInfo info;
    info.scenario = "fuzz";
    info.engine = "import";
    return store_->add_run(info);
  }
  storage::Store& store() { return *store_; }

 private:
  static constexpr int kRunsPerStore = 4096;
  std::filesystem::path path_;
  std::unique_ptr<storage::Store> store_;
  int runs_ = 0;
};

}  // namespace hs::fuzz

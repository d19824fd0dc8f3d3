// safetensors open time against the number of header entries: files of N zero-size tensors
// (N = 10k, 40k, 160k, 640k; the last one's header is ~35 MB, under the format's 100 MB limit).
// Linear parsing keeps the time per entry flat; the ratio line compares the largest file with
// the smallest (linear: the entry ratio, 64; the old parse was quadratic: ~4096).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "models/safetensors.h"

namespace fs = std::filesystem;

namespace {

fs::path write_file(const fs::path& dir, int n) {
  std::ostringstream o;
  o << '{';
  for (int i = 0; i < n; ++i) o << (i ? "," : "") << "\"t" << i << "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  o << '}';
  const std::string h = o.str();
  std::ostringstream name;
  name << "n" << n << ".safetensors";
  const fs::path p = dir / name.str();
  std::ofstream f(p, std::ios::binary);
  const uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((len >> (8 * i)) & 0xff));
  f << h;
  return p;
}

double open_seconds(const fs::path& p) {
  const auto t0 = std::chrono::steady_clock::now();
  auto f = hs::models::SafetensorsFile::open(p);
  const auto t1 = std::chrono::steady_clock::now();
  if (f->tensors().empty()) std::fprintf(stderr, "no tensors in %s\n", p.c_str());
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace

int main() {
  const fs::path dir = fs::temp_directory_path() / ("hookscope-st-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::pair<int, double>> rows;
  for (int n : {10'000, 40'000, 160'000, 640'000}) {
    const fs::path p = write_file(dir, n);
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) best = std::min(best, open_seconds(p));
    rows.emplace_back(n, best);
    std::printf("safetensors open, %7d entries: %8.3f s  (%.2f us/entry)\n", n, best, best / n * 1e6);
  }
  std::printf("safetensors open: time ratio %.0fx for %dx the entries (linear: %d)\n", rows.back().second / rows.front().second,
              rows.back().first / rows.front().first, rows.back().first / rows.front().first);
  fs::remove_all(dir);
  return 0;
}

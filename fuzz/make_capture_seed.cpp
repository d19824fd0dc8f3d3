// Writes the capture_reader_fuzz seeds: small captures through the real Store and HostTracer
// (the tests' synthetic capture writer, tests/synthetic.h), closed to single files.
//   make_capture_seed OUT_DIR   ->  OUT_DIR/sharded.sqlite, offload.sqlite, trace.sqlite
#include <cstdio>
#include <filesystem>

#include "storage/store.h"
#include "tests/synthetic.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  using namespace hs::storage;
  const fs::path out = argv[1];
  fs::create_directories(out);
  StoreOptions o;
  o.overwrite = true;
  {
    Store s(out / "sharded.sqlite", o);
    add_synthetic_devices(s, 2);
    SyntheticRun spec;
    spec.devices = 2;
    spec.layers = 2;
    spec.tokens = 2;
    write_synthetic_run(s, spec);
    s.finalize();
    s.close();
  }
  {
    Store s(out / "offload.sqlite", o);
    add_synthetic_devices(s, 1);
    SyntheticRun spec;
    spec.devices = 1;
    spec.layers = 2;
    spec.tokens = 1;
    spec.offload = true;
    spec.disk = true;
    spec.mode = "eager";
    write_synthetic_run(s, spec);
    spec.policy = "offload-only";
    write_synthetic_run(s, spec);
    s.finalize();
    s.close();
  }
  {
    Store s(out / "trace.sqlite", o);
    write_synthetic_trace_run(s);
    s.finalize();
    s.close();
  }
  return 0;
}

#!/usr/bin/env bash
# The one prepared device check: what only a real GPU can show, in one run of well under 10 min.
#
#   tools/gpu_check.sh pack [DIR]   on the build machine: builds, then copies into DIR (default
#                                   gpu-carry/, ignored by git) the CLI, the GPU test binaries and
#                                   the Debian shared libraries they need that the GPU machine
#                                   lacks (found with ldd; never LibTorch, CUDA or glibc, which
#                                   come from the GPU machine's own torch). Refuses past 64 MiB.
#   tools/gpu_check.sh run [DIR]    on the GPU machine, from the repository root (the device
#                                   tool: run with carry ["gpu-carry"]): links the binaries
#                                   against that machine's LibTorch and CUDA libraries through
#                                   LD_LIBRARY_PATH, runs the GPU tests (the real CUPTI tracer,
#                                   the cudagraphs backend seam on CUDA inputs, GPU attribution,
#                                   hook parity with accelerate on cuda:0),
#                                   then captures of the tests' tiny Llama (made there by
#                                   transformers: random weights, no network) on real
#                                   GPUs with CUPTI on, and writes the capture, its report
#                                   (Markdown, HTML, JSON), `stats`, a Chrome trace and the logs
#                                   to $OUT (default out/gpu-check/).
# Exit status: 0 when every step passed; otherwise the number of failed steps (each is logged,
# and the later ones still run).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARRY_LIMIT=$((64 * 1024 * 1024))
# Test binaries that hold GPU tests (each skips what needs a GPU on a CPU machine).
GPU_TESTS=(cupti_test compile_test gpu_attribution_test)
# Hook parity with accelerate, run a second time with the scenarios' execution device on cuda:0.
PARITY_TESTS=(hooks_test)

log() { printf '[gpu_check] %s\n' "$*" >&2; }

# Libraries the GPU machine brings itself: glibc's, and LibTorch's / CUDA's (from its torch wheel).
system_lib() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*|ld-linux*|libresolv.so*) return 0 ;;
    libtorch*|libc10*|libcaffe2*|libshm*|libgomp*|libcuda.so*|libcudart*|libcupti*|libnv*|libcublas*|libcusparse*|libcufft*|libcurand*|libcusolver*|libcudnn*|libnccl*|libcufile*) return 0 ;;
  esac
  return 1
}

pack() {
  local dir="${1:-$ROOT/gpu-carry}"
  "$ROOT/run" build || exit 1
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib"
  local bins=("$ROOT/build/hookscope")
  for t in "${GPU_TESTS[@]}" "${PARITY_TESTS[@]}"; do bins+=("$ROOT/build/tests/$t"); done
  for b in "${bins[@]}"; do
    [ -x "$b" ] || { log "missing $b (did the build make it?)"; exit 1; }
    cp "$b" "$dir/bin/"
    strip --strip-unneeded "$dir/bin/$(basename "$b")"
    # Every resolved dependency that is not the GPU machine's own.
    ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
      system_lib "$lib" || [ -e "$dir/lib/$(basename "$lib")" ] || cp -L "$lib" "$dir/lib/"
    done
  done
  local bytes
  bytes=$(du -sb "$dir" | cut -f1)
  log "packed $(ls "$dir/bin" | wc -l) binaries and $(ls "$dir/lib" | wc -l) libraries: $((bytes / 1024 / 1024)) MiB in $dir"
  if [ "$bytes" -gt "$CARRY_LIMIT" ]; then log "over the 64 MiB the device tool carries"; exit 1; fi
}

# LD_LIBRARY_PATH for the carried binaries: their libraries, then LibTorch and every CUDA
# library directory of the GPU machine's torch installation (the nvidia-* wheels).
device_library_path() {
  local py="$1" dir="$2"
  "$py" - "$dir" <<'EOF'
import glob, os, sys
import torch
dirs = [os.path.join(sys.argv[1], "lib"), os.path.join(os.path.dirname(torch.__file__), "lib")]
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib"))) + sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "lib")))
for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64"):
    if os.path.isdir(d):
        dirs.append(d)
seen = []
for d in dirs:
    if os.path.isdir(d) and d not in seen:
        seen.append(d)
print(":".join(seen))
EOF
}

# ldd of each binary; fails when a library is not found.
resolved() {
  local b missing=0
  for b in "$@"; do
    echo "== $b"
    ldd "$b" || missing=1
    ldd "$b" | grep -q "not found" && missing=1
  done
  return "$missing"
}

FAILED=0
step() {  # step NAME CMD...: runs it, logs to $OUT/NAME.log, counts a failure
  local name="$1"; shift
  log "$name: $*"
  local t0=$SECONDS
  if "$@" >"$OUT/$name.log" 2>&1; then
    log "$name: ok ($((SECONDS - t0)) s)"
  else
    log "$name: FAILED (exit $?, $((SECONDS - t0)) s; tail of $OUT/$name.log follows)"
    tail -n 25 "$OUT/$name.log" >&2
    FAILED=$((FAILED + 1))
  fi
}

run_checks() {
  local dir="${1:-$ROOT/gpu-carry}"
  dir="$(cd "$dir" && pwd)" || { log "no carried folder $1 (run: tools/gpu_check.sh pack first)"; exit 1; }
  OUT="${OUT:-$ROOT/out/gpu-check}"
  mkdir -p "$OUT"
  local py="${HOOKSCOPE_PYTHON:-python3}" work
  work="$(mktemp -d)"
  local libs
  libs="$(device_library_path "$py" "$dir")" || { log "$py cannot import torch (set HOOKSCOPE_PYTHON)"; exit 1; }
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export HOOKSCOPE_PYTHON="$py" HOOKSCOPE_SOURCE_DIR="$ROOT" HOOKSCOPE_BINARY_DIR="$work/build"
  export HOOKSCOPE_CLI="$dir/bin/hookscope" HOOKSCOPE_CACHE="$work/cache"
  export TORCHINDUCTOR_CACHE_DIR="$work/inductor-cache"
  local H="$dir/bin/hookscope"
  {
    nvidia-smi -L || true
    "$py" -c 'import torch, transformers, accelerate; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count()); print("transformers", transformers.__version__, "accelerate", accelerate.__version__)'
    "$H" --version
  } >"$OUT/machine.txt" 2>&1
  cat "$OUT/machine.txt" >&2
  step ldd resolved "$H" "${GPU_TESTS[@]/#/$dir/bin/}" "${PARITY_TESTS[@]/#/$dir/bin/}"
  for t in "${GPU_TESTS[@]}"; do step "$t" "$dir/bin/$t" --gtest_color=no; done
  # accelerate on cuda:0 against the port on the real GPU: devices after attach / forward /
  # remove, io_same_device, outputs, offload folders.
  for t in "${PARITY_TESTS[@]}"; do
    step "${t}_cuda" env HOOKSCOPE_PARITY_DEVICE=cuda:0 "$dir/bin/$t" --gtest_color=no --gtest_filter='HookParity.*'
  done

  # The tests' tiny Llama (random weights written by transformers here; no download), captured
  # on the real GPUs.
  local model="$work/fixtures/tiny-llama"
  step make_model "$py" "$ROOT/tests/oracles/make_fixtures.py" --out "$work/fixtures" --only tiny-llama
  local common=(--model "$model" --devices 2 --prompt-ids 5,17,99,3 --max-new-tokens 16 --repeats 3 --warmup 1)
  step capture_libtorch "$H" capture "${common[@]}" --engine libtorch --scenarios sharded,cpu-offload \
    --modes eager,default,reduce-overhead --fullgraph off --out "$OUT/gpu-libtorch.sqlite" --force-overwrite
  step capture_torch "$H" capture "${common[@]}" --engine torch --python "$py" --scenarios sharded \
    --policies whole-hook,offload-only --modes eager,default --fullgraph off --backend inductor \
    --out "$OUT/gpu-torch.sqlite" --force-overwrite
  local db
  for db in gpu-libtorch gpu-torch; do
    [ -f "$OUT/$db.sqlite" ] || continue
    step "report_$db" "$H" report "$OUT/$db.sqlite" --markdown "$OUT/$db.md" --json "$OUT/$db.json" --html "$OUT/$db.html"
    step "stats_$db" "$H" stats "$OUT/$db.sqlite" --report gpu_by_caller,device_compute,transfers,weight_swaps
    step "export_$db" "$H" export "$OUT/$db.sqlite" --run all --format chrome -o "$OUT/$db-chrome"
  done
  # What the GPU lanes hold, straight from the nsys-named tables.
  if [ -f "$OUT/gpu-libtorch.sqlite" ]; then
    step gpu_tables "$py" - "$OUT/gpu-libtorch.sqlite" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
              "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION", "CLOCK_CALIBRATION"):
    print(table, db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
kernels = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
named = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION x "
                   "ON x.correlationId = k.correlationId AND x.runId = k.runId").fetchone()[0]
print(f"kernels with an external id: {named} of {kernels}")
for row in db.execute("SELECT d.text, count(*) FROM DIAGNOSTICS d GROUP BY d.text ORDER BY 2 DESC LIMIT 20"):
    print("diagnostic:", *row)
sys.exit(0 if kernels > 0 and named > 0 else 1)
EOF
  fi
  rm -rf "$work"
  log "done: $FAILED failed step(s); results in $OUT"
  return "$FAILED"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run_checks "$@"; exit $? ;;
  *) sed -n '2,22p' "$0" >&2; exit 2 ;;
esac

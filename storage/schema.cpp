#include "storage/schema.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "storage/event_tables.h"
#include "tracer/kind_names.h"

namespace hs::storage {

namespace {
/// ENUM_DIAGNOSTIC_SEVERITY and ENUM_DEVICE_KIND, printed as their labels.
constexpr tracer::EnumName<Severity> kSeverityNames[] = {
    {Severity::Info, "INFO", "info", ""},
    {Severity::Warning, "WARNING", "warning", ""},
    {Severity::Error, "ERROR", "error", ""},
};
constexpr tracer::EnumName<DeviceKind> kDeviceKindNames[] = {
    {DeviceKind::Cpu, "CPU", "cpu", ""},
    {DeviceKind::Cuda, "CUDA", "cuda", ""},
    {DeviceKind::Emulated, "EMULATED", "emulated", ""},
};
}  // namespace

std::string_view to_string(Severity s) { return tracer::name_of(kSeverityNames, s, "unknown"); }
std::string_view to_string(DeviceKind k) { return tracer::name_of(kDeviceKindNames, k, "unknown"); }

namespace {
bool is_host(std::string_view d) { return d == "cpu" || d == "disk"; }
bool is_accelerator(std::string_view d) {
  return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}
}  // namespace

tracer::MemcpyKind copy_kind_for(std::string_view src, std::string_view dst) {
  using K = tracer::MemcpyKind;
  if (is_host(src) && is_accelerator(dst)) return K::HtoD;
  if (is_accelerator(src) && is_host(dst)) return K::DtoH;
  if (is_accelerator(src) && is_accelerator(dst)) return src == dst ? K::DtoD : K::PtoP;
  if (is_host(src) && is_host(dst)) return K::HtoH;
  return K::Unknown;
}

namespace {
// The tables that are not event kinds: metadata, strings, the target, enumerations, runs and
// what the app records about them. The ENUM_* tables of tracer/kind_names.h are written from
// its lists (enum_table_sql), between these parts.
constexpr std::string_view kTargetSql = R"SQL(
CREATE TABLE META_DATA_EXPORT (
    -- Capture metadata: HOOKSCOPE_SCHEMA_VERSION, EXPORT_PRODUCT_VERSION, HOOKSCOPE_TIME_DOMAIN, ...
    name                  TEXT     NOT NULL PRIMARY KEY,
    value                 TEXT
);
CREATE TABLE StringIds (
    -- Interned strings (nsys).
    id                    INTEGER  NOT NULL PRIMARY KEY,
    value                 TEXT     NOT NULL
);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs            INTEGER,   -- UTC epoch at capture start (ns)
    utcTime               TEXT,      -- ISO 8601, UTC
    localTime             TEXT,      -- ISO 8601, local time of the target
    steadyNs              INTEGER    -- host steady clock at the same instant (ns): the time base of every event
);
CREATE TABLE TARGET_INFO_GPU (
    -- Real GPUs of the capture machine (nsys columns; empty on CPU machines).
    vmId                  INTEGER  NOT NULL DEFAULT 0,
    id                    INTEGER  NOT NULL,   -- CUDA device index
    name                  TEXT,
    busLocation           TEXT,
    isDiscrete            INTEGER,
    l2CacheSize           INTEGER,   -- bytes
    totalMemory           INTEGER,   -- bytes
    memoryBandwidth       INTEGER,   -- bytes/s
    clockRate             INTEGER,   -- Hz
    smCount               INTEGER,
    uuid                  TEXT,
    chipName              TEXT,
    cuDevice              INTEGER,
    maxShmemPerBlock      INTEGER,   -- bytes
    threadsPerWarp        INTEGER,
    asyncEngines          INTEGER,
    maxWarpsPerSm         INTEGER,
    computeMajor          INTEGER,
    computeMinor          INTEGER
);

)SQL";
// After ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND and ENUM_CUPTI_SYNC_TYPE.
constexpr std::string_view kCuptiEnumSql = R"SQL(CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES
    (0,'TRACE_PROCESS_EVENT_CUDA_RUNTIME','CUDA runtime'),
    (1,'TRACE_PROCESS_EVENT_CUDA_DRIVER','CUDA driver');
CREATE TABLE ENUM_CUPTI_EXTERNAL_CORRELATION_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUPTI_EXTERNAL_CORRELATION_KIND VALUES
    (1,'CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN','Unknown'),
    (3,'CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0','Custom 0'),
    (4,'CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1','Custom 1 (hookscope hook call)'),
    (5,'CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2','Custom 2');
CREATE TABLE ENUM_CUPTI_OVERHEAD_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUPTI_OVERHEAD_KIND VALUES
    (0,'CUPTI_ACTIVITY_OVERHEAD_UNKNOWN','Unknown'),
    (1,'CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER','Driver compiler'),
    (65536,'CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH','CUPTI buffer flush'),
    (131072,'CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION','CUPTI instrumentation'),
    (196608,'CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE','CUPTI resource'),
    (262144,'CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING','Runtime-triggered module loading'),
    (327680,'CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING','Lazy function loading'),
    (393216,'CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL','Command buffer full'),
    (458752,'CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST','Activity buffer request'),
    (524288,'CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT','UVM activity init');
CREATE TABLE ENUM_CUPTI_OBJECT_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUPTI_OBJECT_KIND VALUES
    (0,'CUPTI_ACTIVITY_OBJECT_UNKNOWN','Unknown'),
    (1,'CUPTI_ACTIVITY_OBJECT_PROCESS','Process'),
    (2,'CUPTI_ACTIVITY_OBJECT_THREAD','Thread'),
    (3,'CUPTI_ACTIVITY_OBJECT_DEVICE','Device'),
    (4,'CUPTI_ACTIVITY_OBJECT_CONTEXT','Context'),
    (5,'CUPTI_ACTIVITY_OBJECT_STREAM','Stream');
)SQL";
// After ENUM_HOOK_PHASE, ENUM_WEIGHT_SOURCE, ENUM_RUN_STATUS, ENUM_DEVICE_KIND and
// ENUM_DIAGNOSTIC_SEVERITY.
constexpr std::string_view kRunSql = R"SQL(
CREATE TABLE RUNS (
    -- One run of a comparison: scenario x policy x mode.
    id                    INTEGER  NOT NULL PRIMARY KEY,
    scenario              TEXT     NOT NULL,
    policy                TEXT     NOT NULL,   -- whole-hook | offload-only | ''
    mode                  TEXT     NOT NULL,   -- eager | default | reduce-overhead
    fullgraph             INTEGER  NOT NULL,
    model                 TEXT     NOT NULL,
    device_map            TEXT     NOT NULL,   -- JSON object
    versions              TEXT     NOT NULL,   -- JSON object
    status                INTEGER  NOT NULL,   -- ENUM_RUN_STATUS: incomplete until the last batch commits
    error                 TEXT,
    start                 INTEGER  NOT NULL,
    end                   INTEGER,
    startUtcNs            INTEGER,
    globalPid             INTEGER,             -- pid * 0x1000000 of the capturing process
    droppedRecords        INTEGER  NOT NULL DEFAULT 0,
    results               TEXT     NOT NULL DEFAULT '{}', -- JSON object: latency stats, argmax_match, logits_identical, ...
    engine                TEXT     NOT NULL DEFAULT '',   -- 'libtorch' | 'torch' | 'import'
    label                 TEXT                            -- the user's name for the run (import --label)
);
CREATE TABLE DEVICES (
    id                    INTEGER  NOT NULL PRIMARY KEY,
    runId                 INTEGER,             -- NULL: run-independent
    name                  TEXT     NOT NULL,   -- logical id: '0', '1', 'cpu', 'disk'
    kind                  INTEGER  NOT NULL,   -- ENUM_DEVICE_KIND
    backing               TEXT,                -- 'cpu', 'cuda:0'
    label                 TEXT,
    max_memory            INTEGER,             -- bytes
    gpuId                 INTEGER              -- TARGET_INFO_GPU.id
);
CREATE TABLE MODULES (
    runId                 INTEGER  NOT NULL,
    moduleId              INTEGER  NOT NULL,   -- StringIds: FQN ('' = root)
    classId               INTEGER,             -- StringIds: class name
    PRIMARY KEY (runId, moduleId)
);
CREATE TABLE THREADS (
    runId                 INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,   -- tracer index, as in the event tables
    tid                   INTEGER  NOT NULL    -- Linux thread id
);
CREATE TABLE COMPILE_RESULTS (
    -- The LibTorch engine's explain (not Dynamo's: Dynamo's own counts are in DYNAMO_* tables).
    runId                 INTEGER  NOT NULL,
    region_count          INTEGER  NOT NULL,   -- captured regions that ran >= 1 op
    disabled_scope_entries INTEGER NOT NULL,   -- compiler-disabled scopes entered inside a region
    recompiles            INTEGER  NOT NULL,
    fullgraph_ok          INTEGER  NOT NULL,
    error                 TEXT,
    break_reasons         TEXT     NOT NULL DEFAULT '[]'   -- JSON array
);
CREATE TABLE DIAGNOSTICS (
    id                    INTEGER  NOT NULL PRIMARY KEY,
    runId                 INTEGER,             -- NULL: about the whole capture
    start                 INTEGER,             -- host steady-clock ns, NULL when not tied to a time
    severity              INTEGER  NOT NULL,   -- ENUM_DIAGNOSTIC_SEVERITY
    source                TEXT     NOT NULL,   -- 'tracer', 'cupti', 'compile', ...
    text                  TEXT     NOT NULL
);
)SQL";
}  // namespace

namespace {
/// `CREATE TABLE <table> (id, name, label)` and its rows, one per value of `names`.
template <class E, size_t N>
std::string enum_table_sql(std::string_view table, const tracer::EnumName<E> (&names)[N]) {
  const std::string t(table);
  std::string sql = "CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);\nINSERT INTO " +
                    t + " VALUES\n";
  for (size_t i = 0; i < N; ++i)
    sql += "    (" + std::to_string(static_cast<int64_t>(names[i].value)) + ",'" + std::string(names[i].name) + "','" +
           std::string(names[i].label) + "')" + (i + 1 < N ? ",\n" : ";\n");
  return sql;
}
}  // namespace

std::string_view event_tables_sql() {
  static const std::string sql = [] {
    std::string out;
    detail::for_each_kind([&](auto kind) { out += detail::create_table_sql<typename decltype(kind)::type>(); });
    return out;
  }();
  return sql;
}

std::string_view schema_sql() {
  static const std::string sql =
      std::string(kTargetSql) + enum_table_sql("ENUM_CUDA_MEMCPY_OPER", tracer::kMemcpyKindNames) +
      enum_table_sql("ENUM_CUDA_MEM_KIND", tracer::kMemKindNames) +
      enum_table_sql("ENUM_CUPTI_SYNC_TYPE", tracer::kSyncTypeNames) + std::string(kCuptiEnumSql) +
      enum_table_sql("ENUM_HOOK_PHASE", tracer::kHookPhaseNames) +
      enum_table_sql("ENUM_WEIGHT_SOURCE", tracer::kWeightSourceNames) +
      enum_table_sql("ENUM_RUN_STATUS", tracer::kRunStatusNames) +
      enum_table_sql("ENUM_DEVICE_KIND", kDeviceKindNames) +
      enum_table_sql("ENUM_DIAGNOSTIC_SEVERITY", kSeverityNames) + std::string(kRunSql) +
      std::string(event_tables_sql());
  return sql;
}

}  // namespace hs::storage

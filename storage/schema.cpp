#include "storage/schema.h"

#include <algorithm>
#include <cctype>

namespace hs::storage {

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "unknown";
}

std::string_view to_string(DeviceKind k) {
  switch (k) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Emulated: return "emulated";
  }
  return "unknown";
}

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

std::string_view schema_sql() {
  static constexpr std::string_view kSql = R"SQL(
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

CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES
    (0,'CUDA_MEMCPY_KIND_UNKNOWN','Unknown'),
    (1,'CUDA_MEMCPY_KIND_HTOD','Host-to-Device'),
    (2,'CUDA_MEMCPY_KIND_DTOH','Device-to-Host'),
    (3,'CUDA_MEMCPY_KIND_HTOA','Host-to-Array'),
    (4,'CUDA_MEMCPY_KIND_ATOH','Array-to-Host'),
    (5,'CUDA_MEMCPY_KIND_ATOA','Array-to-Array'),
    (6,'CUDA_MEMCPY_KIND_ATOD','Array-to-Device'),
    (7,'CUDA_MEMCPY_KIND_DTOA','Device-to-Array'),
    (8,'CUDA_MEMCPY_KIND_DTOD','Device-to-Device'),
    (9,'CUDA_MEMCPY_KIND_HTOH','Host-to-Host'),
    (10,'CUDA_MEMCPY_KIND_PTOP','Peer-to-Peer'),
    (11,'CUDA_MEMCPY_KIND_UVM_HTOD','Unified Host-to-Device'),
    (12,'CUDA_MEMCPY_KIND_UVM_DTOH','Unified Device-to-Host'),
    (13,'CUDA_MEMCPY_KIND_UVM_DTOD','Unified Device-to-Device');
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEM_KIND VALUES
    (0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),
    (1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'),
    (2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'),
    (3,'CUDA_MEMOPR_MEMORY_KIND_ARRAY','Array'),
    (4,'CUDA_MEMOPR_MEMORY_KIND_MANAGED','Managed'),
    (5,'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC','Device Static'),
    (6,'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC','Managed Static'),
    (7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES
    (0,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN','Unknown'),
    (1,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE','Event sync'),
    (2,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT','Stream wait sync'),
    (3,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE','Stream sync'),
    (4,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE','Context sync');
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES
    (0,'TRACE_PROCESS_EVENT_CUDA_RUNTIME','CUDA runtime'),
    (1,'TRACE_PROCESS_EVENT_CUDA_DRIVER','CUDA driver');
CREATE TABLE ENUM_CUPTI_EXTERNAL_CORRELATION_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUPTI_EXTERNAL_CORRELATION_KIND VALUES
    (1,'CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN','Unknown'),
    (3,'CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0','Custom 0'),
    (4,'CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1','Custom 1 (hookscope hook call)'),
    (5,'CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2','Custom 2');
CREATE TABLE ENUM_HOOK_PHASE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_HOOK_PHASE VALUES
    (0,'PRE_FORWARD','pre_forward'),
    (1,'POST_FORWARD','post_forward'),
    (2,'INIT_HOOK','init_hook'),
    (3,'DETACH_HOOK','detach_hook');
CREATE TABLE ENUM_WEIGHT_SOURCE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_WEIGHT_SOURCE VALUES
    (0,'CPU','cpu'),
    (1,'DISK','disk'),
    (2,'DEVICE','device');
CREATE TABLE ENUM_RUN_STATUS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_RUN_STATUS VALUES
    (0,'INCOMPLETE','incomplete'),
    (1,'COMPLETE','complete'),
    (2,'FAILED','failed');
CREATE TABLE ENUM_DEVICE_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_DEVICE_KIND VALUES
    (0,'CPU','cpu'),
    (1,'CUDA','cuda'),
    (2,'EMULATED','emulated');
CREATE TABLE ENUM_DIAGNOSTIC_SEVERITY (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_DIAGNOSTIC_SEVERITY VALUES
    (0,'INFO','info'),
    (1,'WARNING','warning'),
    (2,'ERROR','error');

CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start                 INTEGER  NOT NULL,   -- host steady-clock ns (converted)
    end                   INTEGER  NOT NULL,
    deviceId              INTEGER  NOT NULL,
    contextId             INTEGER  NOT NULL,
    greenContextId        INTEGER,
    streamId              INTEGER  NOT NULL,
    correlationId         INTEGER,             -- = CUPTI_ACTIVITY_KIND_RUNTIME/DRIVER.correlationId
    globalPid             INTEGER,             -- pid * 0x1000000 (nsys serialisation)
    demangledName         INTEGER  NOT NULL,   -- StringIds
    shortName             INTEGER  NOT NULL,   -- StringIds
    mangledName           INTEGER,             -- StringIds
    launchType            INTEGER,
    cacheConfig           INTEGER,
    registersPerThread    INTEGER  NOT NULL,
    gridX                 INTEGER  NOT NULL,
    gridY                 INTEGER  NOT NULL,
    gridZ                 INTEGER  NOT NULL,
    blockX                INTEGER  NOT NULL,
    blockY                INTEGER  NOT NULL,
    blockZ                INTEGER  NOT NULL,
    staticSharedMemory    INTEGER  NOT NULL,   -- bytes
    dynamicSharedMemory   INTEGER  NOT NULL,   -- bytes
    localMemoryPerThread  INTEGER  NOT NULL,   -- bytes
    localMemoryTotal      INTEGER  NOT NULL,   -- bytes
    gridId                INTEGER  NOT NULL,
    sharedMemoryExecuted  INTEGER,
    graphNodeId           INTEGER,             -- NULL unless launched from a CUDA graph
    sharedMemoryLimitConfig INTEGER,
    runId                 INTEGER  NOT NULL    -- hookscope: RUNS.id
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    deviceId              INTEGER  NOT NULL,
    contextId             INTEGER  NOT NULL,
    greenContextId        INTEGER,
    streamId              INTEGER  NOT NULL,
    correlationId         INTEGER,
    globalPid             INTEGER,
    bytes                 INTEGER  NOT NULL,
    copyKind              INTEGER  NOT NULL,   -- ENUM_CUDA_MEMCPY_OPER
    deprecatedSrcId       INTEGER,
    srcKind               INTEGER,             -- ENUM_CUDA_MEM_KIND
    dstKind               INTEGER,             -- ENUM_CUDA_MEM_KIND
    srcDeviceId           INTEGER,
    srcContextId          INTEGER,
    dstDeviceId           INTEGER,
    dstContextId          INTEGER,
    migrationCause        INTEGER,
    graphNodeId           INTEGER,
    virtualAddress        INTEGER,
    runId                 INTEGER  NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    deviceId              INTEGER  NOT NULL,
    contextId             INTEGER  NOT NULL,
    greenContextId        INTEGER,
    streamId              INTEGER  NOT NULL,
    correlationId         INTEGER,
    globalPid             INTEGER,
    value                 INTEGER  NOT NULL,
    bytes                 INTEGER  NOT NULL,
    graphNodeId           INTEGER,
    memKind               INTEGER,             -- ENUM_CUDA_MEM_KIND
    runId                 INTEGER  NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    eventClass            INTEGER  NOT NULL,   -- ENUM_NSYS_EVENT_CLASS
    globalTid             INTEGER,             -- pid * 0x1000000 + tid (nsys serialisation)
    correlationId         INTEGER,
    nameId                INTEGER  NOT NULL,   -- StringIds
    returnValue           INTEGER  NOT NULL,
    callchainId           INTEGER,
    runId                 INTEGER  NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    eventClass            INTEGER  NOT NULL,
    globalTid             INTEGER,
    correlationId         INTEGER,
    nameId                INTEGER  NOT NULL,
    returnValue           INTEGER  NOT NULL,
    callchainId           INTEGER,
    runId                 INTEGER  NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    deviceId              INTEGER  NOT NULL,
    contextId             INTEGER  NOT NULL,
    greenContextId        INTEGER,
    streamId              INTEGER  NOT NULL,
    correlationId         INTEGER,
    globalPid             INTEGER,
    syncType              INTEGER  NOT NULL,   -- ENUM_CUPTI_SYNC_TYPE
    eventId               INTEGER  NOT NULL,
    runId                 INTEGER  NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION (
    -- hookscope: CUPTI correlation id -> the external id pushed around a hook call.
    externalKind          INTEGER  NOT NULL,   -- ENUM_CUPTI_EXTERNAL_CORRELATION_KIND
    externalId            INTEGER  NOT NULL,
    correlationId         INTEGER  NOT NULL,
    runId                 INTEGER  NOT NULL
);
CREATE TABLE CLOCK_CALIBRATION (
    -- hookscope: host/GPU clock pairs behind the conversion of CUPTI times.
    runId                 INTEGER  NOT NULL,
    deviceId              INTEGER  NOT NULL,
    hostNs                INTEGER  NOT NULL,
    gpuNs                 INTEGER  NOT NULL
);

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
    results               TEXT     NOT NULL DEFAULT '{}'  -- JSON object: latency stats, argmax_match, logits_identical, ...
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
CREATE TABLE HOOK_EVENTS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    hookId                INTEGER  NOT NULL,   -- StringIds: 'AlignDevicesHook', ...
    phase                 INTEGER  NOT NULL,   -- ENUM_HOOK_PHASE
    moduleId              INTEGER  NOT NULL    -- StringIds: FQN
);
CREATE TABLE WEIGHT_SWAPS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    onload                INTEGER  NOT NULL,   -- 1: onload to the execution device, 0: offload to meta
    moduleId              INTEGER  NOT NULL,   -- StringIds: hooked module FQN
    tensorId              INTEGER  NOT NULL,   -- StringIds: tensor name relative to the module
    bytes                 INTEGER  NOT NULL,
    dtypeId               INTEGER  NOT NULL,   -- StringIds: 'float32', ...
    source                INTEGER  NOT NULL,   -- ENUM_WEIGHT_SOURCE
    device                INTEGER  NOT NULL,   -- StringIds: destination logical device
    pinned                INTEGER  NOT NULL    -- host source was pinned
);
CREATE TABLE TRANSFERS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    src                   INTEGER  NOT NULL,   -- StringIds: logical device
    dst                   INTEGER  NOT NULL,   -- StringIds: logical device
    bytes                 INTEGER  NOT NULL,
    copyKind              INTEGER  NOT NULL,   -- ENUM_CUDA_MEMCPY_OPER: logical direction
    emulated              INTEGER  NOT NULL,   -- 1: an emulated accelerator took part
    moduleId              INTEGER              -- StringIds: module whose hook moved it; NULL = unknown
);
CREATE TABLE DISABLED_SCOPES (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    functionId            INTEGER  NOT NULL,   -- StringIds: 'AlignDevicesHook.pre_forward'
    moduleId              INTEGER  NOT NULL,   -- StringIds
    depth                 INTEGER  NOT NULL    -- > 1: nested
);
CREATE TABLE MODULE_COMPUTE (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    moduleId              INTEGER  NOT NULL,   -- StringIds
    device                INTEGER  NOT NULL    -- StringIds: execution device
);
CREATE TABLE COMPILE_REGIONS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    regionIndex           INTEGER  NOT NULL,   -- 0-based within one compiled call
    opCount               INTEGER  NOT NULL,
    backendId             INTEGER  NOT NULL    -- StringIds: 'eager', 'cudagraphs'
);
CREATE TABLE GRAPH_BREAKS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,   -- time of the break (instant)
    threadId              INTEGER  NOT NULL,
    reasonId              INTEGER  NOT NULL,   -- StringIds: Dynamo's wording
    functionId            INTEGER  NOT NULL,   -- StringIds: the disabled function
    moduleId              INTEGER  NOT NULL,   -- StringIds
    moduleStackId         INTEGER  NOT NULL    -- StringIds: ' > '-joined FQNs, outermost first
);
CREATE TABLE COMPILE_RESULTS (
    runId                 INTEGER  NOT NULL,
    graph_count           INTEGER  NOT NULL,
    graph_break_count     INTEGER  NOT NULL,
    recompiles            INTEGER  NOT NULL,
    fullgraph_ok          INTEGER  NOT NULL,
    error                 TEXT,
    break_reasons         TEXT     NOT NULL DEFAULT '[]'   -- JSON array
);
CREATE TABLE GENERATION_STEPS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,
    end                   INTEGER  NOT NULL,
    threadId              INTEGER  NOT NULL,
    step                  INTEGER  NOT NULL,   -- 0 = prefill
    token                 INTEGER  NOT NULL
);
CREATE TABLE MEMORY_COUNTERS (
    runId                 INTEGER  NOT NULL,
    start                 INTEGER  NOT NULL,   -- sample time (instant)
    threadId              INTEGER  NOT NULL,
    device                INTEGER  NOT NULL,   -- StringIds: logical device
    bytes                 INTEGER  NOT NULL    -- resident bytes
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
  return kSql;
}

}  // namespace hs::storage

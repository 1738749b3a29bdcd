/* Quilt backend ABI: the plain-C interface every backend implements, the built-in CPU backend
 * and third-party plugins alike.
 *
 * A plugin is a shared library that exports one symbol, quilt_backend_init (QUILT_BACKEND_ENTRY).
 * Quilt loads it (SessionOptions::plugins, or a directory listed in QUILT_PLUGIN_PATH), calls the
 * entry with the host's services, and gets back a quilt_backend_t: a table of function pointers
 * plus a context pointer. Nothing C++ crosses this boundary: no exceptions, no STL types, no
 * ownership of memory across the line except where a slot says so.
 *
 * The model, in the order the host uses it:
 *
 *   1. describe    device_count / device_info: what `quilt devices` lists.
 *   2. open        device_open: one quilt_device_t per session that uses the device, configured
 *                  by the session's options for this backend (key/value strings).
 *   3. claim       supports: asked once per node, with the node as a one-node graph (op type,
 *                  domain, opset, attributes, input/output dtypes and shapes, constant inputs).
 *                  Shapes may be partly unknown (-1) or of unknown rank (-1). Or, when the
 *                  backend has it, supports_graph: the whole graph once, a claim per node.
 *   4. compile     compile: a patch (a connected, acyclic set of claimed nodes) becomes an
 *                  executable. Constant inputs (weights) come with host data, valid for the
 *                  executable's lifetime: upload them here, once per session.
 *   5. run         alloc / copy_to_device / execute / copy_to_host, all asynchronous: each takes
 *                  events to wait for and one event to signal. The host gives every value's
 *                  concrete shape at execute (shape inference is the host's job, never the
 *                  backend's) and allocates the patch's outputs before execute.
 *   6. release     event_release, free, executable_release, device_close, then release.
 *
 * Versioning. QUILT_BACKEND_ABI_VERSION is (major << 16) | minor. The structs passed one at a
 * time (quilt_host_api_t, quilt_backend_t, quilt_graph_t, quilt_device_info_t,
 * quilt_execute_args_t) start with struct_size (the top-level ones also with abi_version) and
 * only grow at their end; within a major version, a field is used only if struct_size shows the
 * other side has it. The structs passed as array elements (quilt_node_t, quilt_value_t,
 * quilt_attribute_t, quilt_tensor_info_t, quilt_constant_t, quilt_option_t) are frozen for a
 * major version: new per-node or per-value information arrives as new arrays at the end of
 * quilt_graph_t. The host refuses a plugin whose major version differs from its own, with a
 * message naming both. History: 1.0; 1.1 added quilt_graph_t.constant_done (and the optional
 * node_timing of quilt_execute_args_t, which came without a minor bump); 1.2 added the optional
 * run_begin / run_end slots, quilt_execute_args_t.run, the optional executable_serialize /
 * executable_deserialize slots (executable cache), the optional copy_device_to_device slot,
 * quilt_graph_t.constant_hashes and the optional supports_graph slot (whole-graph claims, with
 * quilt_graph_claims_t). A plugin built
 * against an older minor version keeps working: the host reads no slot or field beyond the
 * struct_size it was given.
 *
 * Errors. Every fallible slot returns a quilt_status_t: NULL means success; otherwise a status
 * made with host->status_create(code, message), which the host reads and frees. Messages should
 * name what failed ("[example] MatMul: device out of memory (asked 64 MiB, 12 MiB free)").
 * A backend never aborts the process and never throws.
 *
 * Required slots. Every slot of quilt_backend_t is required except those marked Optional
 * (release, event_timestamps, run_begin, run_end, executable_serialize,
 * executable_deserialize, copy_device_to_device, supports_graph). The host checks the table when it
 * loads the plugin and refuses one whose struct_size is too short for the required slots or that
 * leaves one NULL, naming it. A QUILT_DEVICE_HOST_MEMORY device still fills the copy slots (never
 * called) and a QUILT_DEVICE_SYNCHRONOUS one the event slots (never called for it; see below).
 *
 * Synchronous devices. A device whose flags have QUILT_DEVICE_SYNCHRONOUS is given no events:
 * signal_event is NULL and wait_events is empty in execute and in the copies, and event_create
 * is never called for it. Its work must be finished when the call returns, and a failure must
 * be returned by the call itself; there is no event to carry it (a failure reported any other
 * way is lost, and the run goes on with unwritten outputs).
 *
 * Argument lifetimes. Everything the host passes by pointer is valid only during the call,
 * unless the slot says otherwise: the quilt_graph_t of supports, supports_graph and compile and
 * all its arrays and strings (except constant data, which lives as long as the executable
 * compiled from the graph), quilt_execute_args_t and its arrays (values, dims, inputs, outputs,
 * wait_events), the wait_events arrays of the copies, device_open's options. Copy what you need to
 * keep. The memory the pointers point to is another matter: device buffers given to execute and the
 * copies stay allocated, and host memory given to a copy stays valid and untouched, until the
 * operation's signal_event is signalled (until the call returns on a synchronous device).
 * Strings the plugin returns (name, version, device_info's) must stay valid until release.
 *
 * Threads. Every slot of an open device may be called from several threads at once (a session
 * may run on several threads, several sessions may use one device index, and the host issues
 * work from one thread per device and run): supports, compile, execute, alloc, free, the copies
 * and the event slots must be thread-safe, and one executable may be executing for several runs
 * at once with different buffers. event_wait and event_query may be called from a thread other
 * than the one that issued the operation. node_timing may be called from any thread. The
 * exceptions: quilt_backend_init is called once per process (the host loads each library once
 * and never unloads it); device_close is called once per opened device, after every other call
 * on that device has returned; release, if ever called, comes after everything else (this
 * Quilt never unloads a plugin and does not call it).
 *
 * A minimal plugin (see tests/plugins/example/ for a complete one):
 *
 *   static quilt_backend_t backend = {sizeof(quilt_backend_t), QUILT_BACKEND_ABI_VERSION,
 *                                     "mydev", "1.0", ...};
 *   QUILT_BACKEND_EXPORT quilt_status_t quilt_backend_init(const quilt_host_api_t* host,
 *                                                          const quilt_backend_t** out) {
 *     *out = &backend;
 *     return NULL;
 *   }
 */
#ifndef QUILT_BACKEND_H_
#define QUILT_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QUILT_BACKEND_ABI_MAJOR 1
#define QUILT_BACKEND_ABI_MINOR 2
#define QUILT_BACKEND_ABI_VERSION ((QUILT_BACKEND_ABI_MAJOR << 16) | QUILT_BACKEND_ABI_MINOR)

/* The one symbol a plugin exports. */
#define QUILT_BACKEND_ENTRY "quilt_backend_init"
#if defined(_WIN32)
#define QUILT_BACKEND_EXPORT __declspec(dllexport)
#else
#define QUILT_BACKEND_EXPORT __attribute__((visibility("default")))
#endif

/* ---- status ------------------------------------------------------------------------------ */

typedef enum quilt_status_code {
  QUILT_STATUS_OK = 0,
  QUILT_STATUS_INVALID_ARGUMENT = 1, /* the host passed something the backend cannot accept */
  QUILT_STATUS_NOT_IMPLEMENTED = 2,  /* a node or option the backend does not support */
  QUILT_STATUS_OUT_OF_MEMORY = 3,    /* device or host memory exhausted */
  QUILT_STATUS_DEVICE_ERROR = 4,     /* the device or its driver failed */
  QUILT_STATUS_RUNTIME_ERROR = 5     /* anything else */
} quilt_status_code_t;

/* Opaque; NULL = success. Created by quilt_host_api_t.status_create, freed by the host. */
typedef struct quilt_status_s* quilt_status_t;

/* ---- the host's services, given to the plugin at init ------------------------------------ */

typedef enum quilt_log_level {
  QUILT_LOG_DEBUG = 0,
  QUILT_LOG_INFO = 1,
  QUILT_LOG_WARNING = 2,
  QUILT_LOG_ERROR = 3
} quilt_log_level_t;

typedef struct quilt_host_api {
  uint32_t struct_size; /* sizeof(quilt_host_api_t) as the host knows it */
  uint32_t abi_version; /* the host's QUILT_BACKEND_ABI_VERSION */
  /* Makes an error status; message is copied. Never returns NULL (OK is NULL itself). */
  quilt_status_t (*status_create)(quilt_status_code_t code, const char* message);
  /* Writes to Quilt's log on stderr (shown up to the most verbose SessionOptions::log_level of
   * the sessions created so far). */
  void (*log)(quilt_log_level_t level, const char* message);
  /* A monotonic clock in nanoseconds, shared by the host and every backend so that event
   * timestamps of different devices can be compared. */
  uint64_t (*now_ns)(void);
} quilt_host_api_t;

/* ---- data description -------------------------------------------------------------------- */

/* Element types; the values are those of onnx.TensorProto.DataType. */
typedef enum quilt_dtype {
  QUILT_DTYPE_UNDEFINED = 0,
  QUILT_DTYPE_FLOAT32 = 1,
  QUILT_DTYPE_UINT8 = 2,
  QUILT_DTYPE_INT8 = 3,
  QUILT_DTYPE_UINT16 = 4,
  QUILT_DTYPE_INT16 = 5,
  QUILT_DTYPE_INT32 = 6,
  QUILT_DTYPE_INT64 = 7,
  QUILT_DTYPE_BOOL = 9,
  QUILT_DTYPE_FLOAT16 = 10,
  QUILT_DTYPE_FLOAT64 = 11,
  QUILT_DTYPE_UINT32 = 12,
  QUILT_DTYPE_UINT64 = 13,
  QUILT_DTYPE_BFLOAT16 = 16,
  QUILT_DTYPE_FLOAT8E4M3FN = 17,
  QUILT_DTYPE_FLOAT8E4M3FNUZ = 18,
  QUILT_DTYPE_FLOAT8E5M2 = 19,
  QUILT_DTYPE_FLOAT8E5M2FNUZ = 20,
  /* 4-bit integers packed two per byte, element 2k in the low nibble of byte k: a tensor of n
   * elements takes (n + 1) / 2 bytes. */
  QUILT_DTYPE_UINT4 = 21,
  QUILT_DTYPE_INT4 = 22,
  /* 4-bit float (1.2.1, no inf/NaN), packed two per byte like INT4. */
  QUILT_DTYPE_FLOAT4E2M1 = 23,
  /* exponent-only 8-bit float: 2^(bits - 127), 0xFF NaN; one byte each. */
  QUILT_DTYPE_FLOAT8E8M0 = 24,
  /* 2-bit integers packed four per byte, element 4k + j in bits 2j, 2j + 1 of byte k: a tensor
   * of n elements takes (n + 3) / 4 bytes. */
  QUILT_DTYPE_UINT2 = 25,
  QUILT_DTYPE_INT2 = 26
} quilt_dtype_t;

/* A dense row-major tensor's type and shape. In supports() and compile(), rank may be -1
 * (unknown) and dims may be -1 (unknown); in execute() everything is concrete. */
typedef struct quilt_tensor_info {
  int32_t dtype; /* quilt_dtype_t */
  int32_t rank;
  const int64_t* dims; /* rank entries */
} quilt_tensor_info_t;

/* Host data of a constant (initializer, folded value, or tensor attribute). */
typedef struct quilt_constant {
  quilt_tensor_info_t info;
  const void* data; /* nbytes = product(dims) * element size (4-bit: rounded up to whole
                     * bytes); NULL when empty */
} quilt_constant_t;

typedef enum quilt_attribute_kind {
  QUILT_ATTRIBUTE_FLOAT = 1,
  QUILT_ATTRIBUTE_INT = 2,
  QUILT_ATTRIBUTE_STRING = 3,
  QUILT_ATTRIBUTE_TENSOR = 4,
  QUILT_ATTRIBUTE_FLOATS = 6,
  QUILT_ATTRIBUTE_INTS = 7,
  QUILT_ATTRIBUTE_STRINGS = 8,
  QUILT_ATTRIBUTE_TENSORS = 9
} quilt_attribute_kind_t; /* values as onnx.AttributeProto.AttributeType */

/* A node attribute, with the ONNX name. Nodes with graph attributes (If, Loop, Scan) are run by
 * the host and never reach a backend. */
typedef struct quilt_attribute {
  const char* name;
  int32_t kind; /* quilt_attribute_kind_t */
  float f;
  int64_t i;
  const char* s; /* STRING: s_size bytes (not necessarily NUL-free), NUL-terminated */
  size_t s_size;
  size_t count; /* FLOATS / INTS / STRINGS / TENSORS: number of elements */
  const float* floats;
  const int64_t* ints;
  const char* const* strings;      /* NUL-terminated */
  const quilt_constant_t* tensors; /* TENSOR: one; TENSORS: count */
} quilt_attribute_t;

/* One value (edge) of a graph given to a backend. */
typedef struct quilt_value {
  const char* name;         /* the ONNX value name, for messages */
  quilt_tensor_info_t info; /* as inferred at session creation */
  /* Non-NULL when the value is a constant: its host data, valid until the executable compiled
   * from this graph is released (or, in supports(), until the call returns). For an empty
   * constant it is non-NULL but must not be read. */
  const void* constant;
} quilt_value_t;

typedef struct quilt_node {
  const char* name; /* may be "" */
  const char* op_type;
  const char* domain; /* "" for the default ONNX domain */
  /* The opset whose semantics the node has: the model's opset for this domain, or a newer one
     for a node the core's rewrites made of an op the model's opset lacks (a Gelu, opset 20, in
     an opset-17 model). */
  int64_t opset;
  int64_t index; /* position in the model file; names unnamed nodes in messages ("Add node #5") */
  size_t num_inputs;
  const int32_t* inputs; /* indices into the graph's values; -1 = optional input absent */
  size_t num_outputs;
  const int32_t* outputs; /* indices into the graph's values; -1 = optional output not wanted */
  size_t num_attributes;
  const quilt_attribute_t* attributes;
} quilt_node_t;

/* A 128-bit content hash (quilt_graph_t.constant_hashes). */
typedef struct quilt_hash128 {
  uint64_t lo, hi;
} quilt_hash128_t;

/* A patch: nodes in an order where producers come first, over a table of values. */
typedef struct quilt_graph {
  uint32_t struct_size;
  size_t num_values;
  const quilt_value_t* values;
  size_t num_nodes;
  const quilt_node_t* nodes;
  size_t num_inputs;
  const int32_t* inputs; /* non-constant values the host provides at execute, in this order */
  size_t num_outputs;
  const int32_t* outputs; /* values the host reads after execute, in this order */
  /* Optional (ABI 1.1; NULL when the host does not offer it): during compile, a backend that
   * has made its own copy of a constant's data (packed weights) and will never read the host's
   * again may call it with the value's index, so that the host can free that data at once and
   * the weights are not held twice. The constant's pointer must not be used after the call. */
  void (*constant_done)(void* context, int32_t value);
  void* constant_done_context;
  /* ABI 1.2, optional (read it only when struct_size covers it; NULL when the host offers no
   * hashes): per value (num_values entries), a 128-bit hash of the bytes of its constant data
   * (nbytes as quilt_constant_t says), {0, 0} for a value that is not a constant. Equal bytes
   * give equal hashes in every process of one Quilt version, whatever the dtype and dims (a
   * backend that keys device copies by content adds those itself); not cryptographic. So a
   * backend can share the uploads of equal constants between sessions without hashing the
   * weights again. Valid as long as the graph. */
  const quilt_hash128_t* constant_hashes;
} quilt_graph_t;

/* ---- devices ----------------------------------------------------------------------------- */

typedef enum quilt_device_flags {
  /* Device pointers are host pointers: the host passes its own memory to execute() and never
   * calls the copy slots. */
  QUILT_DEVICE_HOST_MEMORY = 1u << 0,
  /* execute() and the copies complete before they return (signal events are already
   * signalled). The host then runs this device's work on its own thread. */
  QUILT_DEVICE_SYNCHRONOUS = 1u << 1
} quilt_device_flags_t;

typedef struct quilt_device_info {
  uint32_t struct_size;  /* set by the host; the plugin fills only what fits */
  const char* name;      /* e.g. "Simulated accelerator 0"; owned by the plugin */
  uint32_t flags;        /* quilt_device_flags_t */
  uint64_t memory_bytes; /* 0 = unknown */
  /* extra lines for `quilt devices`, e.g. {"driver", "3.1"}. One key is read by the host too:
     "launch_ns", what a command and a wait for it cost the device (decimal ns), for the
     partitioner's cost rule (docs/BACKEND_ABI.md). */
  size_t num_properties;
  const char* const* property_keys;
  const char* const* property_values;
} quilt_device_info_t;

typedef struct quilt_option {
  const char* key;
  const char* value;
} quilt_option_t;

/* Opaque handles, defined by each backend. */
typedef struct quilt_device_s* quilt_device_t;
typedef struct quilt_executable_s* quilt_executable_t;
typedef struct quilt_event_s* quilt_event_t;

typedef struct quilt_execute_args {
  uint32_t struct_size;
  /* Every value of the compiled graph (exactly graph.num_values entries, same order), with
   * this run's concrete dtype and dims. Constants are as at compile. */
  const quilt_tensor_info_t* values;
  /* Device pointers of the graph's inputs (graph.num_inputs) and of its outputs
   * (graph.num_outputs), the outputs allocated by the host with alloc(), their contents
   * unspecified (write every element). A pointer is NULL when the tensor is empty. */
  void* const* inputs;
  void* const* outputs;
  /* Events of this device to wait for before reading the inputs. */
  const quilt_event_t* wait_events;
  size_t num_wait_events;
  /* Signalled when every output is written, or when the execution failed (event_wait then
   * returns the failure). */
  quilt_event_t signal_event;
  /* Profiling, optional on both sides. When non-NULL, the host wants one call per node of the
   * graph as it runs (node = index into graph.nodes; times from host->now_ns(), or the device's
   * clock converted to it). May be called from any thread, up to when signal_event is
   * signalled. A backend that cannot time nodes ignores it. */
  void (*node_timing)(void* context, size_t node, uint64_t start_ns, uint64_t end_ns);
  void* node_timing_context;
  /* ABI 1.2: the run this execution belongs to, as given to run_begin; 0 when the backend has
   * no run_begin. */
  uint64_t run;
  /* ABI 1.2, optional on both sides (read it only when struct_size covers it; NULL: the host
   * wants none): with node_timing, how the backend ran a node when it has several ways to, e.g.
   * "packed GEMM, input read in place", which profiles show beside the node's time. Called
   * before node_timing for that node, from the same thread; `detail` is valid only during the
   * call. */
  void (*node_detail)(void* context, size_t node, const char* detail);
} quilt_execute_args_t;

/* supports_graph's answer (ABI 1.2): one claim per node of the graph it was given. The host
 * zeroes it and sets struct_size; the plugin fills the rest. The arrays and strings are the
 * plugin's: they must stay valid until the host calls release(release_context), which it does
 * once, from the calling thread, right after it has read them (whatever the status returned,
 * malformed answers included), if release is not NULL. */
#define QUILT_CLAIM_REASON_MAX 512 /* a reason's bytes, its NUL included */
typedef struct quilt_graph_claims {
  uint32_t struct_size; /* set by the host */
  size_t num_nodes;     /* entries of claimed and reasons: exactly the graph's num_nodes */
  /* Per node of the graph (same order): 1 = the device runs it, 0 = it does not. */
  const int32_t* claimed;
  /* Per node, a NUL-terminated string (never NULL; its NUL within QUILT_CLAIM_REASON_MAX
   * bytes): for an unclaimed node why not, as supports' reason (e.g. "Relu: claimed only right
   * after a Conv"); for a claimed one a note on how it runs it when not as written, or "". */
  const char* const* reasons;
  void (*release)(void* context); /* NULL: nothing to release */
  void* release_context;
} quilt_graph_claims_t;

/* ---- the backend ------------------------------------------------------------------------- */

/* Events, precisely: the host creates an event, hands it as signal_event to exactly one
 * operation, may pass it in wait_events of later operations of the same device (never of
 * another device, even of the same backend: the host waits across devices itself), may wait on
 * or query it any number of times, and releases it only after it was signalled (or after the
 * operation it was given to returned an error status, in which case it is never signalled).
 * Empty tensors are never copied (no call, no event) and have NULL device pointers. Device memory
 * pointers are opaque to the host (it never dereferences or offsets them) and need no particular
 * alignment on its behalf. */

typedef struct quilt_backend {
  uint32_t struct_size; /* sizeof(quilt_backend_t) as the plugin knows it */
  uint32_t abi_version; /* QUILT_BACKEND_ABI_VERSION the plugin was built with */
  const char* name;     /* what users write in the backend list, e.g. "example": [a-z0-9_]+ */
  const char* version;  /* the plugin's own version, e.g. "1.2.0" */
  void* context;        /* passed back as the first argument of the backend-level slots */

  /* Unload-time cleanup. Optional (NULL: nothing to do). */
  void (*release)(void* context);

  /* -- description -- */
  int32_t (*device_count)(void* context);
  /* Fills info for device index (0 <= index < device_count). */
  quilt_status_t (*device_info)(void* context, int32_t index, quilt_device_info_t* info);

  /* -- per-session device -- */
  /* Opens device index for a session, configured by options (unknown keys are an error that
   * names them). */
  quilt_status_t (*device_open)(void* context, int32_t index, const quilt_option_t* options,
                                size_t num_options, quilt_device_t* device);
  /* Releases the device; every executable, buffer and event of it is released before. */
  void (*device_close)(quilt_device_t device);

  /* -- capability -- */
  /* Decides whether the device runs `node`, a graph of one node. Sets *claimed to 1 or 0; when
   * 0, writes why into reason (NUL-terminated, at most reason_size bytes), e.g. "Conv: groups
   * > 1 not supported"; when 1, it may write there a note on how it runs the node when that is
   * not as the model wrote it (e.g. "float16 computed in float32 (casts on inputs 0, 1 and output
   * 0)"), which `quilt plan` shows, or leave it empty (the host passes it zeroed; hosts before
   * this note ignore it). A non-NULL status is an error of the query
   * itself, not a refusal. Output values never alias inputs: a patch output is always produced
   * by one of its nodes. */
  quilt_status_t (*supports)(quilt_device_t device, const quilt_graph_t* node, int32_t* claimed,
                             char* reason, size_t reason_size);

  /* -- executables -- */
  /* Compiles a patch of claimed nodes. The graph (and its strings and arrays) is valid only
   * during the call, except constant data (values' constant, attributes' tensors' data), which
   * lives as long as the executable. */
  quilt_status_t (*compile)(quilt_device_t device, const quilt_graph_t* graph,
                            quilt_executable_t* executable);
  void (*executable_release)(quilt_device_t device, quilt_executable_t executable);
  /* Enqueues one execution and returns without waiting for it. The same executable may be
   * executed by several runs at once, with different buffers. */
  quilt_status_t (*execute)(quilt_device_t device, quilt_executable_t executable,
                            const quilt_execute_args_t* args);

  /* -- memory -- */
  /* Allocates bytes (> 0) of device memory. Returns QUILT_STATUS_OUT_OF_MEMORY when it can't. */
  quilt_status_t (*alloc)(quilt_device_t device, size_t bytes, void** ptr);
  /* Frees memory from alloc(); the host calls it only once every operation on it is done. */
  void (*free)(quilt_device_t device, void* ptr);
  /* Asynchronous copies. Host memory stays valid and untouched until signal_event. */
  quilt_status_t (*copy_to_device)(quilt_device_t device, void* dst, const void* src_host,
                                   size_t bytes, const quilt_event_t* wait_events,
                                   size_t num_wait_events, quilt_event_t signal_event);
  quilt_status_t (*copy_to_host)(quilt_device_t device, void* dst_host, const void* src,
                                 size_t bytes, const quilt_event_t* wait_events,
                                 size_t num_wait_events, quilt_event_t signal_event);

  /* -- events: single-use completion markers, each signalled by one operation -- */
  quilt_status_t (*event_create)(quilt_device_t device, quilt_event_t* event);
  /* Blocks until the event is signalled; returns the failure of the operation that signalled
   * it, if it failed (a fresh status each call). */
  quilt_status_t (*event_wait)(quilt_device_t device, quilt_event_t event);
  /* Sets *done to 1 if signalled, else 0, without blocking. */
  quilt_status_t (*event_query)(quilt_device_t device, quilt_event_t event, int32_t* done);
  void (*event_release)(quilt_device_t device, quilt_event_t event);
  /* When the operation that signalled the event started and ended on the device, in
   * host->now_ns() time; used by profiles and plan reports. Optional (NULL: the host uses its
   * own issue and completion times). Valid after the event is signalled. */
  quilt_status_t (*event_timestamps)(quilt_device_t device, quilt_event_t event, uint64_t* start_ns,
                                     uint64_t* end_ns);

  /* -- runs (ABI 1.2) -- */
  /* One Session::run on this device, bracketed: run_begin before the host issues the run's
   * first operation on the device (alloc, copy or execute), run_end once every operation of
   * the run on the device has completed and the host has freed the run's buffers of it. For
   * per-run arenas, graph capture, or batching the run's submissions. `run` is unique among
   * the runs of the process (runs of one device may overlap: concurrent Session::run calls,
   * and the bodies of If/Loop/Scan, which are runs of their own); every execute of the run
   * carries it in quilt_execute_args_t.run. Optional (both or neither; NULL: the host brackets
   * nothing). A run_begin failure fails the run before anything was issued (run_end is then
   * not called for that device). */
  quilt_status_t (*run_begin)(quilt_device_t device, uint64_t run);
  void (*run_end)(quilt_device_t device, uint64_t run);

  /* -- executable cache (ABI 1.2) -- */
  /* Optional, both or neither (NULL: the host compiles every session). With a cache directory
   * (SessionOptions::cache_dir), the host keys each patch by a hash of its graph (every value's
   * dtype and dims, every constant's content hash, every node and attribute), the backend's
   * name, version and ABI version, the device's name, flags and properties (launch_ns aside)
   * and the device_open options, and keeps one file per key. On a miss it compiles, then calls
   * executable_serialize and stores what was written; on a hit it checks the file (size,
   * checksum, key) and calls executable_deserialize instead of compile.
   *
   * executable_serialize writes the executable's bytes (anything the backend needs to rebuild
   * it: program binaries, packed weights, its own format version) by calling write(context,
   * data, bytes) any number of times, in order, from the calling thread, before it returns; a
   * non-NULL status from write ends the serialization (return it). Called right after compile,
   * before the executable runs. A failure is not an error of the session: the host logs a
   * warning and stores nothing.
   *
   * executable_deserialize is given the same patch graph as compile (the same values, nodes,
   * constants with their data, constant_done and constant_hashes) and the bytes
   * executable_serialize wrote for a graph with the same key; it returns an executable that
   * behaves as the one compile would, without compiling. `data` starts at a 4096-byte
   * boundary and stays valid, unchanged and readable until the executable is released (the
   * host maps the file; a backend whose device reads host memory may use it in place, but only
   * for this executable). The bytes may come from another process, an older version of the
   * backend with the same version string, or a damaged file that passed the checksum by
   * chance: check every size and offset, and return a status (never crash) when they do not
   * fit; the host then logs a warning, compiles and overwrites the entry. Both slots follow
   * compile's thread rules. */
  quilt_status_t (*executable_serialize)(quilt_device_t device, quilt_executable_t executable,
                                         quilt_status_t (*write)(void* context, const void* data,
                                                                 size_t bytes),
                                         void* write_context);
  quilt_status_t (*executable_deserialize)(quilt_device_t device, const quilt_graph_t* graph,
                                           const void* data, size_t bytes,
                                           quilt_executable_t* executable);

  /* -- device-to-device copies (ABI 1.2) -- */
  /* Optional (NULL: a value going from one device of this backend to another goes through host
   * memory, a copy_to_host then a copy_to_device). Copies bytes from src, memory of src_device,
   * to dst, memory of dst_device: two different open devices of this backend in one session
   * (never a QUILT_DEVICE_HOST_MEMORY one, whose values need no copy). Asynchronous on
   * dst_device, as copy_to_device: wait_events and signal_event are dst_device's (NULL and
   * empty when it is synchronous). The host has waited for the operation that wrote src to
   * complete before the call (it waits across devices itself), keeps src allocated and unwritten
   * and both devices open until signal_event is signalled (until the call returns on a
   * synchronous device). */
  quilt_status_t (*copy_device_to_device)(quilt_device_t dst_device, void* dst,
                                          quilt_device_t src_device, const void* src, size_t bytes,
                                          const quilt_event_t* wait_events, size_t num_wait_events,
                                          quilt_event_t signal_event);

  /* -- whole-graph capability (ABI 1.2) -- */
  /* Optional (NULL: the host asks supports once per node). Claims by pattern, as onnxruntime's
   * GetCapability and OpenVINO's query_model: the device sees the whole graph once and says,
   * for every node, whether it runs it, so that it may claim a node only in company (a Relu
   * only right after a Conv it fuses it into) or nothing of a graph it cannot take whole.
   * When present the host calls it instead of supports, once per open device and graph it
   * partitions (a session's model; each If/Loop/Scan body is a graph of its own), before the
   * first claim it needs from the device, and only for a device the session may place nodes on.
   * The graph is the view supports gets, for every node the host may place on a backend at once
   * (nodes the host runs itself, such as If, Loop, Scan and sequence ops, are left out, their
   * values becoming graph inputs and outputs): values with creation-time dtypes and shapes
   * (maybe -1), constants with their data, nodes in an order where producers come first;
   * inputs are the values it reads and does not make, outputs those read after it. No
   * constant_hashes, no constant_done. Valid during the call only. Fill *claims (see
   * quilt_graph_claims_t). The claims then go through the same partitioner as supports' answers:
   * the backends' priority order (a node a higher backend claims is not yours), pinned nodes,
   * the cost rule (which may send a claimed island back to the CPU), CPU fallback or strict mode;
   * the patches compiled are connected sets of claimed nodes, not necessarily the patterns you
   * claimed whole (claim accordingly: a pattern you can run only whole, claim only when the
   * whole is yours). A non-NULL status, or an answer of the wrong length, with a NULL claimed
   * or reasons array, a NULL or unterminated reason, or a claim other than 0 or 1, is an error
   * of the session's creation naming the plugin. Thread rules as supports. */
  quilt_status_t (*supports_graph)(quilt_device_t device, const quilt_graph_t* graph,
                                   quilt_graph_claims_t* claims);
} quilt_backend_t;

/* The entry point a plugin exports. The plugin may refuse a host whose major ABI version is
 * not its own by returning a status (host->status_create and host->abi_version are at the same
 * place in every version). On success *backend stays valid until backend->release. */
typedef quilt_status_t (*quilt_backend_init_fn)(const quilt_host_api_t* host,
                                                const quilt_backend_t** backend);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QUILT_BACKEND_H_ */

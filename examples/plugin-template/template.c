/* The smallest Quilt backend plugin: a starting point for a vendor's own.
 *
 * One device, "Template device", whose memory is host memory (QUILT_DEVICE_HOST_MEMORY: the host
 * passes its own buffers and never calls the copy slots) and whose calls finish before they
 * return (QUILT_DEVICE_SYNCHRONOUS: no events are handed to it, and a failure is the status the
 * call returns). It claims float32 Relu, Add, Sub and Mul (with numpy broadcasting) and runs
 * them with plain loops. Replace the loops with your device's work, the flags with what your
 * device does, and keep the structure: copy what you need out of the graph at compile (the graph
 * and its arrays are valid only during the call), check what you claim in supports, allocate
 * intermediates yourself at execute from the concrete shapes the host gives.
 *
 * Build it against an installed Quilt with examples/plugin-template/CMakeLists.txt, then:
 *   quilt devices --plugin ./libquilt_template.so
 *   quilt test-onnx <onnx>/backend/test/data/node --backend template,cpu --plugin
 * ./libquilt_template.so
 */
#include <quilt/backend.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const quilt_host_api_t* host;

static quilt_status_t fail(quilt_status_code_t code, const char* what) {
  char message[256];
  snprintf(message, sizeof message, "[template] %s", what);
  return host->status_create(code, message);
}

/* ---- ops ---- */

enum op { OP_RELU, OP_ADD, OP_SUB, OP_MUL };
static const char* const op_names[] = {"Relu", "Add", "Sub", "Mul"};

static int op_of(const char* op_type) {
  for (int k = 0; k < 4; ++k)
    if (strcmp(op_type, op_names[k]) == 0) return k;
  return -1;
}

#define MAX_RANK 8

static int64_t numel(const quilt_tensor_info_t* t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; ++d) n *= t->dims[d];
  return n;
}

/* out = a (op) b, numpy broadcasting; out's shape is given by the host. */
static void binary(enum op op, const quilt_tensor_info_t* ta, const float* a,
                   const quilt_tensor_info_t* tb, const float* b, const quilt_tensor_info_t* to,
                   float* out) {
  const int32_t rank = to->rank;
  int64_t sa[MAX_RANK], sb[MAX_RANK], index[MAX_RANK] = {0};
  int64_t stride_a = 1, stride_b = 1;
  for (int32_t d = rank - 1; d >= 0; --d) { /* strides, 0 along broadcast dims */
    const int32_t da = d - (rank - ta->rank), db = d - (rank - tb->rank);
    const int64_t na = da >= 0 ? ta->dims[da] : 1, nb = db >= 0 ? tb->dims[db] : 1;
    sa[d] = na == 1 ? 0 : stride_a;
    sb[d] = nb == 1 ? 0 : stride_b;
    stride_a *= na;
    stride_b *= nb;
  }
  const int64_t n = numel(to);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = a[ia], y = b[ib];
    out[i] = op == OP_ADD ? x + y : op == OP_SUB ? x - y : x * y;
    for (int32_t d = rank - 1; d >= 0; --d) { /* next index, row-major */
      ia += sa[d];
      ib += sb[d];
      if (++index[d] < to->dims[d]) break;
      ia -= sa[d] * to->dims[d];
      ib -= sb[d] * to->dims[d];
      index[d] = 0;
    }
  }
}

/* ---- devices ---- */

struct quilt_device_s {
  int unused;
};

static int32_t device_count(void* context) {
  (void)context;
  return 1;
}

static quilt_status_t device_info(void* context, int32_t index, quilt_device_info_t* info) {
  (void)context;
  if (index != 0) return fail(QUILT_STATUS_INVALID_ARGUMENT, "no such device");
  /* Fill only the fields that fit the host's struct_size. */
  if (info->struct_size >= offsetof(quilt_device_info_t, name) + sizeof info->name)
    info->name = "Template device";
  if (info->struct_size >= offsetof(quilt_device_info_t, flags) + sizeof info->flags)
    info->flags = QUILT_DEVICE_HOST_MEMORY | QUILT_DEVICE_SYNCHRONOUS;
  return NULL;
}

static quilt_status_t device_open(void* context, int32_t index, const quilt_option_t* options,
                                  size_t num_options, quilt_device_t* device) {
  (void)context;
  (void)index;
  if (num_options > 0) {
    char what[200];
    snprintf(what, sizeof what, "unknown option '%s' (this backend has none)", options[0].key);
    return fail(QUILT_STATUS_INVALID_ARGUMENT, what);
  }
  *device = calloc(1, sizeof(struct quilt_device_s));
  return *device ? NULL : fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
}

static void device_close(quilt_device_t device) {
  free(device);
}

/* ---- capability ---- */

static quilt_status_t supports(quilt_device_t device, const quilt_graph_t* graph, int32_t* claimed,
                               char* reason, size_t reason_size) {
  (void)device;
  const quilt_node_t* node = &graph->nodes[0];
  *claimed = 0;
  if (node->domain[0] != '\0' || op_of(node->op_type) < 0) {
    snprintf(reason, reason_size, "%s is not supported", node->op_type);
    return NULL;
  }
  for (size_t k = 0; k < node->num_inputs + node->num_outputs; ++k) {
    const int32_t v = k < node->num_inputs ? node->inputs[k] : node->outputs[k - node->num_inputs];
    if (v < 0) continue;
    const quilt_tensor_info_t* t = &graph->values[v].info;
    if (t->dtype != QUILT_DTYPE_FLOAT32) {
      snprintf(reason, reason_size, "%s: only float32", node->op_type);
      return NULL;
    }
    if (t->rank < 0 || t->rank > MAX_RANK) {
      snprintf(reason, reason_size, "%s: rank unknown or above %d", node->op_type, MAX_RANK);
      return NULL;
    }
  }
  *claimed = 1;
  return NULL;
}

/* ---- executables: what compile keeps of the graph ---- */

struct step {
  int op;
  int32_t in[2], out;
};

struct quilt_executable_s {
  size_t num_values, num_steps, num_inputs, num_outputs;
  const void** constants; /* per value: the host's data (valid as long as the executable) */
  struct step* steps;
  int32_t* inputs;
  int32_t* outputs;
};

static void executable_release(quilt_device_t device, quilt_executable_t exe) {
  (void)device;
  if (!exe) return;
  free(exe->constants);
  free(exe->steps);
  free(exe->inputs);
  free(exe->outputs);
  free(exe);
}

static quilt_status_t compile(quilt_device_t device, const quilt_graph_t* graph,
                              quilt_executable_t* out) {
  struct quilt_executable_s* exe = calloc(1, sizeof *exe);
  if (!exe) return fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
  exe->num_values = graph->num_values;
  exe->num_steps = graph->num_nodes;
  exe->num_inputs = graph->num_inputs;
  exe->num_outputs = graph->num_outputs;
  exe->constants = calloc(graph->num_values + 1, sizeof(void*));
  exe->steps = calloc(graph->num_nodes + 1, sizeof(struct step));
  exe->inputs = calloc(graph->num_inputs + 1, sizeof(int32_t));
  exe->outputs = calloc(graph->num_outputs + 1, sizeof(int32_t));
  if (!exe->constants || !exe->steps || !exe->inputs || !exe->outputs) {
    executable_release(device, exe);
    return fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t v = 0; v < graph->num_values; ++v) exe->constants[v] = graph->values[v].constant;
  for (size_t k = 0; k < graph->num_nodes; ++k) {
    const quilt_node_t* node = &graph->nodes[k];
    exe->steps[k].op = op_of(node->op_type);
    exe->steps[k].in[0] = node->inputs[0];
    exe->steps[k].in[1] = node->num_inputs > 1 ? node->inputs[1] : -1;
    exe->steps[k].out = node->outputs[0];
  }
  memcpy(exe->inputs, graph->inputs, graph->num_inputs * sizeof(int32_t));
  memcpy(exe->outputs, graph->outputs, graph->num_outputs * sizeof(int32_t));
  *out = exe;
  return NULL;
}

/* Synchronous: the work is done here, and a failure is returned (there is no event). */
static quilt_status_t execute(quilt_device_t device, quilt_executable_t exe,
                              const quilt_execute_args_t* args) {
  (void)device;
  float** data = calloc(exe->num_values + 1, sizeof(float*));
  char* owned = calloc(exe->num_values + 1, 1);
  quilt_status_t status = NULL;
  if (!data || !owned) {
    status = fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t v = 0; v < exe->num_values; ++v) data[v] = (float*)exe->constants[v];
  for (size_t k = 0; k < exe->num_inputs; ++k) data[exe->inputs[k]] = args->inputs[k];
  for (size_t k = 0; k < exe->num_outputs; ++k) data[exe->outputs[k]] = args->outputs[k];
  for (size_t k = 0; k < exe->num_steps; ++k) {
    const struct step* s = &exe->steps[k];
    const quilt_tensor_info_t* to = &args->values[s->out];
    if (!data[s->out] && numel(to) > 0) { /* an intermediate value: ours to allocate */
      data[s->out] = malloc((size_t)numel(to) * sizeof(float));
      owned[s->out] = 1;
      if (!data[s->out]) {
        status = fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
      }
    }
    if (numel(to) == 0) continue; /* empty tensors have NULL pointers */
    if (s->op == OP_RELU) {
      const float* x = data[s->in[0]];
      for (int64_t i = 0; i < numel(to); ++i) data[s->out][i] = x[i] > 0 ? x[i] : 0;
    } else {
      binary((enum op)s->op, &args->values[s->in[0]], data[s->in[0]], &args->values[s->in[1]],
             data[s->in[1]], to, data[s->out]);
    }
  }
done:
  if (data && owned)
    for (size_t v = 0; v < exe->num_values; ++v)
      if (owned[v]) free(data[v]);
  free(data);
  free(owned);
  return status;
}

/* ---- memory: host memory, so alloc is malloc and the copies are never called ---- */

static quilt_status_t alloc(quilt_device_t device, size_t bytes, void** ptr) {
  (void)device;
  *ptr = malloc(bytes);
  return *ptr ? NULL : fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
}

static void release_memory(quilt_device_t device, void* ptr) {
  (void)device;
  free(ptr);
}

static quilt_status_t copy(quilt_device_t device, void* dst, const void* src, size_t bytes,
                           const quilt_event_t* wait_events, size_t num_wait_events,
                           quilt_event_t signal_event) {
  (void)device;
  (void)wait_events;
  (void)num_wait_events;
  (void)signal_event;
  memcpy(dst, src, bytes);
  return NULL;
}

/* ---- events: a synchronous device is given none, but the slots are required ---- */

struct quilt_event_s {
  int unused;
};

static quilt_status_t event_create(quilt_device_t device, quilt_event_t* event) {
  (void)device;
  *event = calloc(1, sizeof(struct quilt_event_s));
  return *event ? NULL : fail(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
}

static quilt_status_t event_wait(quilt_device_t device, quilt_event_t event) {
  (void)device;
  (void)event;
  return NULL;
}

static quilt_status_t event_query(quilt_device_t device, quilt_event_t event, int32_t* done) {
  (void)device;
  (void)event;
  *done = 1;
  return NULL;
}

static void event_release(quilt_device_t device, quilt_event_t event) {
  (void)device;
  free(event);
}

/* ---- the table and the entry point ---- */

static const quilt_backend_t backend = {
    .struct_size = sizeof(quilt_backend_t),
    .abi_version = QUILT_BACKEND_ABI_VERSION,
    .name = "template",
    .version = "0.1.0",
    .device_count = device_count,
    .device_info = device_info,
    .device_open = device_open,
    .device_close = device_close,
    .supports = supports,
    .compile = compile,
    .executable_release = executable_release,
    .execute = execute,
    .alloc = alloc,
    .free = release_memory,
    .copy_to_device = copy,
    .copy_to_host = copy,
    .event_create = event_create,
    .event_wait = event_wait,
    .event_query = event_query,
    .event_release = event_release,
};

QUILT_BACKEND_EXPORT quilt_status_t quilt_backend_init(const quilt_host_api_t* h,
                                                       const quilt_backend_t** out) {
  host = h;
  if ((h->abi_version >> 16) != QUILT_BACKEND_ABI_MAJOR)
    return h->status_create(QUILT_STATUS_NOT_IMPLEMENTED,
                            "[template] built for another major version of the backend ABI");
  *out = &backend;
  return NULL;
}

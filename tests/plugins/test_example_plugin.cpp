// The example plugin on its own: loaded with dlopen and driven through the plain-C ABI by a fake
// host defined here, as Quilt's loader would. Results are compared with naive references
// written in this file.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <quilt/backend.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// The fake host's status: a heap struct the test owns once a slot returns it.
struct quilt_status_s {
  quilt_status_code_t code;
  std::string message;
};

namespace {

using Dims = std::vector<int64_t>;
using Status = std::unique_ptr<quilt_status_s>;
using Options = std::vector<std::pair<std::string, std::string>>;

constexpr uint64_t kMiB = 1024 * 1024;

quilt_status_t fake_status_create(quilt_status_code_t code, const char* message) {
  return new quilt_status_s{code, message};
}

std::mutex log_mutex;
std::vector<std::string> log_lines;
void fake_log(quilt_log_level_t, const char* message) {
  std::lock_guard lock(log_mutex);
  log_lines.emplace_back(message);
}

uint64_t fake_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const quilt_host_api_t kHost = {sizeof(quilt_host_api_t), QUILT_BACKEND_ABI_VERSION,
                                fake_status_create, fake_log, fake_now_ns};

#define EXPECT_OK(call)                                \
  do {                                                 \
    Status s_(call);                                   \
    EXPECT_EQ(s_, nullptr) << (s_ ? s_->message : ""); \
  } while (0)
#define ASSERT_OK(call)                                \
  do {                                                 \
    Status s_(call);                                   \
    ASSERT_EQ(s_, nullptr) << (s_ ? s_->message : ""); \
  } while (0)

void expect_error(quilt_status_t raw, quilt_status_code_t code,
                  const std::vector<std::string>& parts) {
  Status status(raw);
  ASSERT_NE(status, nullptr) << "no error";
  EXPECT_EQ(status->code, code) << status->message;
  for (const auto& part : parts)
    EXPECT_NE(status->message.find(part), std::string::npos) << status->message;
}

struct Library {
  explicit Library(const char* path) : handle(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle) dlclose(handle);
  }
  quilt_backend_init_fn entry() const {
    return reinterpret_cast<quilt_backend_init_fn>(dlsym(handle, QUILT_BACKEND_ENTRY));
  }
  void* handle;
};

// ---- graphs: specs kept by value, turned into the ABI's structs by build() ----

struct AttributeSpec {
  std::string name;
  int32_t kind;
  int64_t i = 0;
  std::string s;
  Dims ints;
};
AttributeSpec ints(std::string name, Dims v) {
  return {std::move(name), QUILT_ATTRIBUTE_INTS, 0, "", std::move(v)};
}
AttributeSpec integer(std::string name, int64_t v) {
  return {std::move(name), QUILT_ATTRIBUTE_INT, v, "", {}};
}
AttributeSpec string(std::string name, std::string v) {
  return {std::move(name), QUILT_ATTRIBUTE_STRING, 0, std::move(v), {}};
}

class GraphBuilder {
 public:
  // A value; rank -1 = unknown rank; data makes it a constant.
  int32_t value(std::string name, Dims dims, std::vector<float> data = {},
                int32_t dtype = QUILT_DTYPE_FLOAT32, int32_t rank = -2) {
    values_.push_back({std::move(name), dtype, rank == -2 ? int32_t(dims.size()) : rank,
                       std::move(dims), std::move(data)});
    return int32_t(values_.size() - 1);
  }
  void node(std::string op_type, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
            std::vector<AttributeSpec> attributes = {}, std::string name = "",
            std::string domain = "") {
    nodes_.push_back({std::move(name), std::move(op_type), std::move(domain), std::move(inputs),
                      std::move(outputs), std::move(attributes)});
  }
  const quilt_graph_t& build(std::vector<int32_t> outputs) {
    outputs_ = std::move(outputs);
    c_values_.clear();
    for (auto& v : values_)
      c_values_.push_back({v.name.c_str(),
                           {v.dtype, v.rank, v.dims.data()},
                           v.data.empty() ? nullptr : v.data.data()});
    std::vector<char> produced(values_.size(), 0);
    c_attributes_.clear();
    c_nodes_.clear();
    for (auto& n : nodes_) {
      auto& attributes = c_attributes_.emplace_back();
      for (auto& a : n.attributes) {
        quilt_attribute_t c{};
        c.name = a.name.c_str();
        c.kind = a.kind;
        c.i = a.i;
        c.s = a.s.c_str();
        c.s_size = a.s.size();
        c.count = a.ints.size();
        c.ints = a.ints.data();
        attributes.push_back(c);
      }
      quilt_node_t c{};
      c.name = n.name.c_str();
      c.op_type = n.op_type.c_str();
      c.domain = n.domain.c_str();
      c.opset = 13;
      c.num_inputs = n.inputs.size();
      c.inputs = n.inputs.data();
      c.num_outputs = n.outputs.size();
      c.outputs = n.outputs.data();
      c.num_attributes = attributes.size();
      c.attributes = attributes.data();
      c_nodes_.push_back(c);
      for (int32_t o : n.outputs) produced[o] = 1;
    }
    inputs_.clear();
    for (size_t v = 0; v < values_.size(); ++v)
      if (!produced[v] && values_[v].data.empty()) inputs_.push_back(int32_t(v));
    // No constant_done: this host keeps every constant (ABI 1.1 makes the callback optional).
    graph_ = {
        sizeof(quilt_graph_t), c_values_.size(), c_values_.data(), c_nodes_.size(),
        c_nodes_.data(),       inputs_.size(),   inputs_.data(),   outputs_.size(),
        outputs_.data(),       nullptr,          nullptr,          nullptr};  // nor constant hashes
    return graph_;
  }
  // The concrete shapes execute() takes: every value as declared.
  std::vector<quilt_tensor_info_t> shapes() const {
    std::vector<quilt_tensor_info_t> infos;
    for (auto& v : values_) infos.push_back({v.dtype, v.rank, v.dims.data()});
    return infos;
  }
  const std::vector<int32_t>& inputs() const { return inputs_; }

 private:
  struct ValueSpec {
    std::string name;
    int32_t dtype, rank;
    Dims dims;
    std::vector<float> data;
  };
  struct NodeSpec {
    std::string name, op_type, domain;
    std::vector<int32_t> inputs, outputs;
    std::vector<AttributeSpec> attributes;
  };
  std::deque<ValueSpec> values_;
  std::deque<NodeSpec> nodes_;
  std::vector<quilt_value_t> c_values_;
  std::deque<std::vector<quilt_attribute_t>> c_attributes_;
  std::vector<quilt_node_t> c_nodes_;
  std::vector<int32_t> inputs_, outputs_;
  quilt_graph_t graph_{};
};

std::vector<float> iota_values(int64_t n, float scale = 0.25f, int offset = 7) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = float((i * 37 + offset) % 17 - 8) * scale;
  return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << "at " << i;
}

// ---- naive references ----

// out[b][i][j] = sum_k x[b][i][k] * w[k][j]
std::vector<float> reference_matmul(const std::vector<float>& x, const std::vector<float>& w,
                                    int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<float> out(batch * m * n, 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          out[(b * m + i) * n + j] += x[(b * m + i) * k + p] * w[p * n + j];
  return out;
}

// Conv by explicit zero padding, then a direct sum (a different route from the plugin's).
std::vector<float> reference_conv(const std::vector<float>& x, Dims xd, const std::vector<float>& w,
                                  Dims wd, const std::vector<float>& bias, int64_t group,
                                  Dims strides, Dims pads, Dims dilations, Dims* out_dims) {
  int64_t ph = xd[2] + pads[0] + pads[2], pw = xd[3] + pads[1] + pads[3];
  std::vector<float> padded(xd[0] * xd[1] * ph * pw, 0.0f);
  for (int64_t nc = 0; nc < xd[0] * xd[1]; ++nc)
    for (int64_t h = 0; h < xd[2]; ++h)
      for (int64_t c = 0; c < xd[3]; ++c)
        padded[(nc * ph + h + pads[0]) * pw + c + pads[1]] = x[(nc * xd[2] + h) * xd[3] + c];
  int64_t oh = (ph - (wd[2] - 1) * dilations[0] - 1) / strides[0] + 1;
  int64_t ow = (pw - (wd[3] - 1) * dilations[1] - 1) / strides[1] + 1;
  *out_dims = {xd[0], wd[0], oh, ow};
  std::vector<float> out(xd[0] * wd[0] * oh * ow);
  int64_t per_group = wd[0] / group;
  for (int64_t n = 0; n < xd[0]; ++n)
    for (int64_t m = 0; m < wd[0]; ++m)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          float sum = bias.empty() ? 0.0f : bias[m];
          for (int64_t c = 0; c < wd[1]; ++c)
            for (int64_t i = 0; i < wd[2]; ++i)
              for (int64_t j = 0; j < wd[3]; ++j) {
                int64_t channel = (m / per_group) * wd[1] + c;
                sum +=
                    padded[((n * xd[1] + channel) * ph + y * strides[0] + i * dilations[0]) * pw +
                           z * strides[1] + j * dilations[1]] *
                    w[((m * wd[1] + c) * wd[2] + i) * wd[3] + j];
              }
          out[((n * wd[0] + m) * oh + y) * ow + z] = sum;
        }
  return out;
}

// ---- the fixture: the plugin loaded and initialised with the fake host ----

class ExamplePlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(library_.handle, nullptr) << dlerror();
    quilt_backend_init_fn init = library_.entry();
    ASSERT_NE(init, nullptr);
    ASSERT_OK(init(&kHost, &backend_));
    ASSERT_NE(backend_, nullptr);
  }
  void TearDown() override {
    release_events();
    for (quilt_device_t d : devices_) backend_->device_close(d);
    if (backend_ && backend_->release) backend_->release(backend_->context);
  }

  quilt_status_t open_status(const Options& options, int32_t index = 0) {
    std::vector<quilt_option_t> c;
    for (auto& [k, v] : options) c.push_back({k.c_str(), v.c_str()});
    quilt_device_t device = nullptr;
    quilt_status_t s = backend_->device_open(backend_->context, index, c.data(), c.size(), &device);
    if (!s) devices_.push_back(device);
    return s;
  }
  quilt_device_t open(const Options& options = {}, int32_t index = 0) {
    Status s(open_status(options, index));
    EXPECT_EQ(s, nullptr) << s->message;
    return s ? nullptr : devices_.back();
  }

  quilt_event_t event(quilt_device_t d) {
    quilt_event_t e = nullptr;
    EXPECT_OK(backend_->event_create(d, &e));
    events_.emplace_back(e, d);
    return e;
  }
  void release_events() {
    for (auto [e, d] : events_) backend_->event_release(d, e);
    events_.clear();
  }
  void* alloc(quilt_device_t d, size_t bytes) {
    void* p = nullptr;
    EXPECT_OK(backend_->alloc(d, bytes, &p));
    return p;
  }
  void* upload(quilt_device_t d, const std::vector<float>& data) {
    void* p = alloc(d, data.size() * sizeof(float));
    quilt_event_t done = event(d);
    EXPECT_OK(
        backend_->copy_to_device(d, p, data.data(), data.size() * sizeof(float), nullptr, 0, done));
    EXPECT_OK(backend_->event_wait(d, done));
    return p;
  }
  std::vector<float> download(quilt_device_t d, const void* p, size_t count) {
    std::vector<float> data(count);
    quilt_event_t done = event(d);
    EXPECT_OK(backend_->copy_to_host(d, data.data(), p, count * sizeof(float), nullptr, 0, done));
    EXPECT_OK(backend_->event_wait(d, done));
    return data;
  }
  quilt_executable_t compile(quilt_device_t d, const quilt_graph_t& g) {
    quilt_executable_t e = nullptr;
    EXPECT_OK(backend_->compile(d, &g, &e));
    return e;
  }
  // Enqueues one execution of `exe` over the builder's shapes; returns execute's own status.
  quilt_status_t execute(quilt_device_t d, quilt_executable_t exe, const GraphBuilder& g,
                         std::vector<void*> inputs, std::vector<void*> outputs,
                         quilt_event_t signal, std::vector<quilt_event_t> waits = {}) {
    std::vector<quilt_tensor_info_t> shapes = g.shapes();
    quilt_execute_args_t args{};
    args.struct_size = sizeof(quilt_execute_args_t);
    args.values = shapes.data();
    args.inputs = inputs.data();
    args.outputs = outputs.data();
    args.wait_events = waits.data();
    args.num_wait_events = waits.size();
    args.signal_event = signal;
    return backend_->execute(d, exe, &args);
  }

  // Runs a one-node patch over inputs given as (dims, data); returns its one output.
  std::vector<float> run_one_node(quilt_device_t d, const std::string& op,
                                  const std::vector<std::pair<Dims, std::vector<float>>>& inputs,
                                  const Dims& out_dims) {
    GraphBuilder g;
    std::vector<int32_t> ins;
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(g.value("in" + std::to_string(i), inputs[i].first));
    int32_t y = g.value("y", out_dims);
    g.node(op, ins, {y}, {}, op + "1");
    quilt_executable_t exe = compile(d, g.build({y}));
    std::vector<void*> pointers;
    for (auto& [dims, data] : inputs) pointers.push_back(upload(d, data));
    size_t count = 1;
    for (int64_t dim : out_dims) count *= dim;
    void* out = alloc(d, count * 4);
    quilt_event_t done = event(d);
    EXPECT_OK(execute(d, exe, g, pointers, {out}, done));
    EXPECT_OK(backend_->event_wait(d, done));
    std::vector<float> result = download(d, out, count);
    for (void* p : pointers) backend_->free(d, p);
    backend_->free(d, out);
    backend_->executable_release(d, exe);
    return result;
  }

  // Asks supports() about a one-node graph; returns "" when claimed, else the reason.
  std::string refusal(quilt_device_t d, GraphBuilder& g, std::vector<int32_t> outputs) {
    char reason[256] = "untouched";
    int32_t claimed = -1;
    EXPECT_OK(backend_->supports(d, &g.build(std::move(outputs)), &claimed, reason, sizeof reason));
    EXPECT_TRUE(claimed == 0 || claimed == 1);
    return claimed ? "" : reason;
  }

  Library library_{QUILT_EXAMPLE_PLUGIN};
  const quilt_backend_t* backend_ = nullptr;
  std::vector<quilt_device_t> devices_;
  std::vector<std::pair<quilt_event_t, quilt_device_t>> events_;
};

// MatMul(x, W) -> Add(bias) -> Relu over x [2, 3, 4], W [4, 5], bias [5].
struct MlpGraph {
  explicit MlpGraph(const std::string& relu_name = "relu1") {
    x = g.value("x", {2, 3, 4});
    int32_t w_value = g.value("W", {4, 5}, w);
    int32_t b_value = g.value("bias", {5}, bias);
    int32_t t1 = g.value("t1", {2, 3, 5}), t2 = g.value("t2", {2, 3, 5});
    y = g.value("y", {2, 3, 5});
    g.node("MatMul", {x, w_value}, {t1}, {}, "matmul1");
    g.node("Add", {t1, b_value}, {t2}, {}, "add1");
    g.node("Relu", {t2}, {y}, {}, relu_name);
    g.build({y});
  }
  std::vector<float> expected() const {
    std::vector<float> out = reference_matmul(input, w, 2, 3, 4, 5);
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::max(out[i] + bias[i % 5], 0.0f);
    return out;
  }
  std::vector<float> input = iota_values(24), w = iota_values(20, 0.5f, 3),
                     bias = iota_values(5, 0.1f, 1);
  GraphBuilder g;
  int32_t x, y;
};

TEST_F(ExamplePlugin, DescribesItselfAndTwoDevices) {
  EXPECT_EQ(backend_->struct_size, sizeof(quilt_backend_t));
  EXPECT_EQ(backend_->abi_version, uint32_t(QUILT_BACKEND_ABI_VERSION));
  EXPECT_STREQ(backend_->name, "example");
  EXPECT_STREQ(backend_->version, "1.0.0");
  ASSERT_EQ(backend_->device_count(backend_->context), 2);
  for (int32_t i = 0; i < 2; ++i) {
    quilt_device_info_t info{};
    info.struct_size = sizeof info;
    info.flags = 0xdead;
    ASSERT_OK(backend_->device_info(backend_->context, i, &info));
    EXPECT_EQ(std::string(info.name), "Simulated accelerator " + std::to_string(i));
    EXPECT_EQ(info.flags, 0u);  // own memory, asynchronous
    EXPECT_EQ(info.memory_bytes, 256 * kMiB);
    EXPECT_GT(info.num_properties, 0u);
  }
  // An older host's smaller struct is filled only as far as it goes.
  quilt_device_info_t small{};
  small.struct_size = offsetof(quilt_device_info_t, flags);
  small.flags = 0xdead;
  ASSERT_OK(backend_->device_info(backend_->context, 1, &small));
  EXPECT_STREQ(small.name, "Simulated accelerator 1");
  EXPECT_EQ(small.flags, 0xdeadu);
  expect_error(backend_->device_info(backend_->context, 2, &small), QUILT_STATUS_INVALID_ARGUMENT,
               {"no device 2"});
}

TEST_F(ExamplePlugin, ClaimsFloat32MatMulAddReluConv) {
  quilt_device_t d = open();
  {
    GraphBuilder g;  // rank-1 and batched operands, per numpy matmul
    int32_t a = g.value("a", {-1, 3, 4}), b = g.value("b", {4}), y = g.value("y", {-1, 3});
    g.node("MatMul", {a, b}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "");
  }
  {
    GraphBuilder g;
    int32_t a = g.value("a", {2, 1, 5}), b = g.value("b", {7, 1}), y = g.value("y", {2, 7, 5});
    g.node("Add", {a, b}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "");
  }
  {
    GraphBuilder g;
    int32_t a = g.value("a", {}), y = g.value("y", {});
    g.node("Relu", {a}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "");
  }
  {
    GraphBuilder g;
    int32_t x = g.value("x", {1, 4, 8, 8}), w = g.value("w", {4, 1, 3, 3}, iota_values(36));
    int32_t y = g.value("y", {1, 4, 8, 8});
    g.node("Conv", {x, w, -1}, {y},
           {integer("group", 4), string("auto_pad", "SAME_LOWER"), ints("strides", {1, 1})});
    EXPECT_EQ(refusal(d, g, {y}), "");
  }
}

// ABI 1.2's supports_graph on a Conv -> Relu -> Add -> Softmax chain: one claim and one
// NUL-terminated reason per node, released through the answer's release callback; graph_claims
// picks what is claimed.
TEST_F(ExamplePlugin, ClaimsAWholeGraphByPattern) {
  ASSERT_GE(backend_->struct_size, offsetof(quilt_backend_t, supports_graph) + sizeof(void*));
  ASSERT_NE(backend_->supports_graph, nullptr);
  GraphBuilder g;
  int32_t x = g.value("x", {1, 2, 4, 4}), w = g.value("w", {2, 2, 1, 1}, iota_values(4));
  int32_t c = g.value("c", {1, 2, 4, 4}), r = g.value("r", {1, 2, 4, 4});
  int32_t a = g.value("a", {1, 2, 4, 4}), y = g.value("y", {1, 2, 4, 4});
  g.node("Conv", {x, w}, {c}, {}, "conv");
  g.node("Relu", {c}, {r}, {}, "relu");
  g.node("Add", {r, x}, {a}, {}, "add");
  g.node("Softmax", {a}, {y}, {}, "sm");
  const quilt_graph_t& graph = g.build({y});
  auto claims_of = [&](const std::string& mode) {
    quilt_device_t d = open({{"graph_claims", mode}});
    quilt_graph_claims_t claims{};
    claims.struct_size = sizeof(claims);
    EXPECT_OK(backend_->supports_graph(d, &graph, &claims));
    std::vector<std::pair<int, std::string>> out;
    EXPECT_EQ(claims.num_nodes, 4u);
    for (size_t n = 0; n < claims.num_nodes && n < 4; ++n)
      out.emplace_back(claims.claimed[n], claims.reasons[n]);
    EXPECT_NE(claims.release, nullptr);
    if (claims.release) claims.release(claims.release_context);
    return out;
  };
  using Claims = std::vector<std::pair<int, std::string>>;
  EXPECT_EQ(claims_of("node"),
            (Claims{{1, ""}, {1, ""}, {1, ""}, {0, "Softmax is not supported"}}));
  const std::string pattern = ": graph_claims=conv_relu claims only a Conv followed by a Relu";
  EXPECT_EQ(claims_of("conv_relu"),
            (Claims{{1, ""}, {1, ""}, {0, "Add" + pattern}, {0, "Softmax is not supported"}}));
  const std::string whole =
      "graph_claims=whole: the graph's Softmax 'sm' cannot run here, so none of it does "
      "(Softmax is not supported)";
  EXPECT_EQ(claims_of("whole"),
            (Claims{{0, whole}, {0, whole}, {0, whole}, {0, "Softmax is not supported"}}));
  expect_error(open_status({{"graph_claims", "some"}}), QUILT_STATUS_INVALID_ARGUMENT,
               {"option graph_claims: 'some' is not node, conv_relu or whole"});
}

TEST_F(ExamplePlugin, RefusesOtherNodesWithAReason) {
  quilt_device_t d = open();
  {
    GraphBuilder g;
    int32_t x = g.value("x", {2, 3}), y = g.value("y", {2, 3});
    g.node("Softmax", {x}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "Softmax is not supported");
  }
  {
    GraphBuilder g;
    int32_t x = g.value("x", {2, 3}, {}, QUILT_DTYPE_INT64), w = g.value("w", {3, 2});
    int32_t y = g.value("y", {2, 2});
    g.node("MatMul", {x, w}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "MatMul: input 'x' is int64, only float32");
  }
  {
    GraphBuilder g;
    int32_t x = g.value("x", {1, 2, 4, 4, 4}), w = g.value("w", {2, 2, 3, 3, 3});
    int32_t y = g.value("y", {1, 2, 2, 2, 2});
    g.node("Conv", {x, w}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "Conv: 3-D convolution not supported");
  }
  {
    GraphBuilder g;
    int32_t x = g.value("x", {1, 2, 4, 4}), w = g.value("w", {2, 2, 3, 3});
    int32_t y = g.value("y", {1, 2, 4, 4});
    g.node("Conv", {x, w}, {y}, {string("auto_pad", "SOMETIMES")});
    EXPECT_EQ(refusal(d, g, {y}), "Conv: auto_pad 'SOMETIMES' not supported");
  }
  {
    GraphBuilder g;
    int32_t x = g.value("x", {}, {}, QUILT_DTYPE_FLOAT32, -1), y = g.value("y", {2});
    g.node("Relu", {x}, {y});
    EXPECT_EQ(refusal(d, g, {y}), "Relu: input 'x' has unknown rank");
  }
  {
    GraphBuilder g;
    int32_t x = g.value("x", {2}), y = g.value("y", {2});
    g.node("Relu", {x}, {y}, {}, "", "com.example");
    EXPECT_EQ(refusal(d, g, {y}),
              "com.example.Relu is not supported (only the default ONNX domain)");
  }
  {
    GraphBuilder g;  // the reason is cut to the host's buffer, NUL included
    int32_t x = g.value("x", {2}), y = g.value("y", {2});
    g.node("Softmax", {x}, {y});
    char reason[8];
    int32_t claimed = -1;
    ASSERT_OK(backend_->supports(d, &g.build({y}), &claimed, reason, sizeof reason));
    EXPECT_EQ(claimed, 0);
    EXPECT_STREQ(reason, "Softmax");
  }
}

TEST_F(ExamplePlugin, CopiesRoundTripThroughDeviceMemory) {
  quilt_device_t d = open();
  std::vector<float> data = iota_values(1000);
  void* p = alloc(d, data.size() * sizeof(float));
  ASSERT_NE(p, nullptr);
  // A device address, not host memory: the host must never dereference it.
  EXPECT_GE(reinterpret_cast<uintptr_t>(p), 0x100000000000ull);
  std::vector<float> back(data.size(), -1.0f);
  quilt_event_t up = event(d), down = event(d);
  ASSERT_OK(backend_->copy_to_device(d, p, data.data(), data.size() * 4, nullptr, 0, up));
  ASSERT_OK(backend_->copy_to_host(d, back.data(), p, back.size() * 4, &up, 1, down));
  ASSERT_OK(backend_->event_wait(d, down));
  EXPECT_EQ(back, data);
  int32_t done = 0;
  ASSERT_OK(backend_->event_query(d, up, &done));
  EXPECT_EQ(done, 1);
  // Host pointers and ranges past an allocation are refused before anything is queued.
  quilt_event_t spare = event(d);
  expect_error(backend_->copy_to_host(d, back.data(), data.data(), 4, nullptr, 0, spare),
               QUILT_STATUS_INVALID_ARGUMENT, {"not memory of this device"});
  expect_error(backend_->copy_to_host(d, back.data(), p, 4004, nullptr, 0, spare),
               QUILT_STATUS_INVALID_ARGUMENT, {"not inside one allocation"});
  // Events are single-use.
  expect_error(backend_->copy_to_host(d, back.data(), p, 4, nullptr, 0, up),
               QUILT_STATUS_INVALID_ARGUMENT, {"single-use"});
  release_events();
  backend_->free(d, p);
}

TEST_F(ExamplePlugin, MemoryLimitIsEnforcedAndFreedBlocksCoalesce) {
  quilt_device_t d = open({{"memory_limit", std::to_string(kMiB)}});
  void* p = nullptr;
  expect_error(backend_->alloc(d, 2 * kMiB, &p), QUILT_STATUS_OUT_OF_MEMORY,
               {"[example] out of device memory: asked 2.0 MiB, 1.0 MiB free of 1.0 MiB"});
  std::vector<void*> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(alloc(d, kMiB / 4));
  expect_error(backend_->alloc(d, 64, &p), QUILT_STATUS_OUT_OF_MEMORY,
               {"asked 64 B, 0 B free of 1.0 MiB"});
  backend_->free(d, quarters[1]);
  backend_->free(d, quarters[2]);
  void* half = alloc(d, kMiB / 2);  // only if the two freed quarters merged
  EXPECT_EQ(half, quarters[1]);
  backend_->free(d, half);
  backend_->free(d, quarters[0]);
  backend_->free(d, quarters[3]);
  backend_->free(d, alloc(d, kMiB));  // everything merged back
}

TEST_F(ExamplePlugin, ConstantsAreUploadedOnceAndCountAgainstTheLimit) {
  quilt_device_t d = open({{"memory_limit", std::to_string(kMiB)}});
  MlpGraph mlp;
  quilt_executable_t exe = compile(d, mlp.g.build({mlp.y}));
  void* p = nullptr;
  expect_error(backend_->alloc(d, kMiB, &p), QUILT_STATUS_OUT_OF_MEMORY, {"of 1.0 MiB"});
  backend_->executable_release(d, exe);
  backend_->free(d, alloc(d, kMiB));

  GraphBuilder big;  // a 2 MiB weight cannot fit
  int32_t x = big.value("x", {1, 1024}), w = big.value("W", {1024, 512}, iota_values(1024 * 512));
  int32_t y = big.value("y", {1, 512});
  big.node("MatMul", {x, w}, {y});
  quilt_executable_t none = nullptr;
  expect_error(backend_->compile(d, &big.build({y}), &none), QUILT_STATUS_OUT_OF_MEMORY,
               {"asked 2.0 MiB", "constant 'W'"});
}

TEST_F(ExamplePlugin, RejectsUnknownAndMalformedOptions) {
  expect_error(open_status({{"colour", "blue"}}), QUILT_STATUS_INVALID_ARGUMENT,
               {"unknown option 'colour'", "memory_limit", "execute_delay_ms", "fail_execute_on",
                "fail_compile_on"});
  expect_error(open_status({{"memory_limit", "lots"}}), QUILT_STATUS_INVALID_ARGUMENT,
               {"memory_limit", "'lots'"});
  expect_error(open_status({}, 2), QUILT_STATUS_INVALID_ARGUMENT, {"no device 2"});
}

TEST_F(ExamplePlugin, RunsMatMulAddReluPatch) {
  quilt_device_t d = open();
  MlpGraph mlp;
  quilt_executable_t exe = compile(d, mlp.g.build({mlp.y}));
  ASSERT_NE(exe, nullptr);
  // Two runs of the same executable in flight at once, with their own buffers.
  std::vector<float> input2 = iota_values(24, -0.5f, 11);
  void* x1 = upload(d, mlp.input);
  void* x2 = upload(d, input2);
  void* y1 = alloc(d, 30 * 4);
  void* y2 = alloc(d, 30 * 4);
  quilt_event_t e1 = event(d), e2 = event(d);
  ASSERT_OK(execute(d, exe, mlp.g, {x1}, {y1}, e1));
  ASSERT_OK(execute(d, exe, mlp.g, {x2}, {y2}, e2));
  ASSERT_OK(backend_->event_wait(d, e1));
  ASSERT_OK(backend_->event_wait(d, e2));
  expect_near(download(d, y1, 30), mlp.expected());
  mlp.input = input2;
  expect_near(download(d, y2, 30), mlp.expected());
  release_events();
  for (void* p : {x1, x2, y1, y2}) backend_->free(d, p);
  backend_->executable_release(d, exe);
}

TEST_F(ExamplePlugin, MatMulBroadcastsBatchesAndTakesVectors) {
  quilt_device_t d = open();
  std::vector<float> a = iota_values(2 * 3 * 4), b = iota_values(4 * 5, 0.5f, 3);
  // [2, 3, 4] x [4, 5]: the 2-D operand is broadcast over the batch.
  expect_near(run_one_node(d, "MatMul", {{{2, 3, 4}, a}, {{4, 5}, b}}, {2, 3, 5}),
              reference_matmul(a, b, 2, 3, 4, 5));
  // [4] x [4, 5] -> [5] and [3, 4] x [4] -> [3]: a vector is promoted, then its dim dropped.
  std::vector<float> v = iota_values(4, 1.0f, 2);
  expect_near(run_one_node(d, "MatMul", {{{4}, v}, {{4, 5}, b}}, {5}),
              reference_matmul(v, b, 1, 1, 4, 5));
  expect_near(run_one_node(d, "MatMul", {{{3, 4}, a}, {{4}, v}}, {3}),
              reference_matmul(a, v, 1, 3, 4, 1));
}

TEST_F(ExamplePlugin, AddBroadcastsAcrossRanks) {
  quilt_device_t d = open();
  std::vector<float> a = iota_values(2 * 1 * 3), b = iota_values(4 * 1, 1.0f, 5);
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(a[i * 3 + k] + b[j]);
  expect_near(run_one_node(d, "Add", {{{2, 1, 3}, a}, {{4, 1}, b}}, {2, 4, 3}), want);
}

struct ConvCase {
  Dims x, w;
  int64_t group;
  std::string auto_pad;
  Dims strides, pads, dilations;
  bool bias;
};

TEST_F(ExamplePlugin, RunsConvWithPadsStridesDilationsAndGroups) {
  quilt_device_t d = open();
  const ConvCase cases[] = {
      {{2, 4, 7, 6}, {6, 2, 3, 3}, 2, "NOTSET", {2, 1}, {1, 0, 1, 2}, {1, 2}, true},
      {{1, 3, 6, 6}, {3, 1, 3, 3}, 3, "SAME_UPPER", {2, 2}, {0, 0, 1, 1}, {1, 1}, false},
      {{1, 3, 6, 6}, {3, 1, 3, 3}, 3, "SAME_LOWER", {2, 2}, {1, 1, 0, 0}, {1, 1}, true},
      {{1, 2, 5, 5}, {4, 2, 2, 2}, 1, "VALID", {1, 1}, {0, 0, 0, 0}, {1, 1}, false},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.auto_pad);
    std::vector<float> x = iota_values(c.x[0] * c.x[1] * c.x[2] * c.x[3]);
    std::vector<float> w = iota_values(c.w[0] * c.w[1] * c.w[2] * c.w[3], 0.5f, 5);
    std::vector<float> bias = c.bias ? iota_values(c.w[0], 1.0f, 2) : std::vector<float>{};
    // c.pads are the explicit pads the SAME/VALID modes amount to, for the reference.
    Dims out_dims;
    std::vector<float> want =
        reference_conv(x, c.x, w, c.w, bias, c.group, c.strides, c.pads, c.dilations, &out_dims);
    GraphBuilder g;
    int32_t xv = g.value("x", c.x), wv = g.value("w", c.w, w);
    int32_t bv = c.bias ? g.value("b", {c.w[0]}, bias) : -1;
    int32_t y = g.value("y", out_dims);
    std::vector<AttributeSpec> attributes = {
        integer("group", c.group), string("auto_pad", c.auto_pad), ints("strides", c.strides),
        ints("dilations", c.dilations), ints("kernel_shape", {c.w[2], c.w[3]})};
    if (c.auto_pad == "NOTSET") attributes.push_back(ints("pads", c.pads));
    g.node("Conv", {xv, wv, bv}, {y}, attributes, "conv1");
    quilt_executable_t exe = compile(d, g.build({y}));
    ASSERT_NE(exe, nullptr);
    void* xp = upload(d, x);
    void* yp = alloc(d, want.size() * 4);
    quilt_event_t done = event(d);
    ASSERT_OK(execute(d, exe, g, {xp}, {yp}, done));
    ASSERT_OK(backend_->event_wait(d, done));
    expect_near(download(d, yp, want.size()), want);
    backend_->free(d, xp);
    backend_->free(d, yp);
    backend_->executable_release(d, exe);
  }
  release_events();
}

TEST_F(ExamplePlugin, QueueIsAsynchronousInOrderAndTimestamped) {
  constexpr uint64_t kDelayMs = 100;
  quilt_device_t d = open({{"execute_delay_ms", std::to_string(kDelayMs)}});
  MlpGraph mlp;
  quilt_executable_t exe = compile(d, mlp.g.build({mlp.y}));
  void* x = alloc(d, 24 * 4);
  void* y = alloc(d, 30 * 4);
  std::vector<float> out(30);
  quilt_event_t up = event(d), run = event(d), down = event(d);
  uint64_t t0 = fake_now_ns();
  ASSERT_OK(backend_->copy_to_device(d, x, mlp.input.data(), 24 * 4, nullptr, 0, up));
  ASSERT_OK(execute(d, exe, mlp.g, {x}, {y}, run, {up}));
  ASSERT_OK(backend_->copy_to_host(d, out.data(), y, 30 * 4, &run, 1, down));
  EXPECT_LT(fake_now_ns() - t0, kDelayMs * 1000000 / 2) << "execute waited for the device";
  int32_t done = 1;
  ASSERT_OK(backend_->event_query(d, run, &done));
  EXPECT_EQ(done, 0);
  uint64_t start = 0, end = 0;
  expect_error(backend_->event_timestamps(d, down, &start, &end), QUILT_STATUS_INVALID_ARGUMENT,
               {"not signalled"});
  ASSERT_OK(backend_->event_wait(d, down));
  expect_near(out, mlp.expected());

  uint64_t previous_end = t0;
  for (quilt_event_t e : {up, run, down}) {
    ASSERT_OK(backend_->event_timestamps(d, e, &start, &end));
    EXPECT_LE(previous_end, start);
    EXPECT_LE(start, end);
    previous_end = end;
  }
  ASSERT_OK(backend_->event_timestamps(d, run, &start, &end));
  EXPECT_GE(end - start, kDelayMs * 1000000);
  release_events();
  backend_->free(d, x);
  backend_->free(d, y);
  backend_->executable_release(d, exe);
}

TEST_F(ExamplePlugin, TwoDevicesRunInParallel) {
  constexpr uint64_t kDelayMs = 150;
  quilt_device_t d[2] = {open({{"execute_delay_ms", std::to_string(kDelayMs)}}, 0),
                         open({{"execute_delay_ms", std::to_string(kDelayMs)}}, 1)};
  MlpGraph mlp;
  quilt_executable_t exe[2];
  void *x[2], *y[2];
  quilt_event_t done[2];
  for (int i = 0; i < 2; ++i) {
    exe[i] = compile(d[i], mlp.g.build({mlp.y}));
    x[i] = upload(d[i], mlp.input);
    y[i] = alloc(d[i], 30 * 4);
    done[i] = event(d[i]);
  }
  uint64_t t0 = fake_now_ns();
  for (int i = 0; i < 2; ++i) ASSERT_OK(execute(d[i], exe[i], mlp.g, {x[i]}, {y[i]}, done[i]));
  for (int i = 0; i < 2; ++i) ASSERT_OK(backend_->event_wait(d[i], done[i]));
  EXPECT_LT(fake_now_ns() - t0, 2 * kDelayMs * 1000000 - 20 * 1000000) << "the devices took turns";
  for (int i = 0; i < 2; ++i) {
    expect_near(download(d[i], y[i], 30), mlp.expected());
    backend_->free(d[i], x[i]);
    backend_->free(d[i], y[i]);
    backend_->executable_release(d[i], exe[i]);
  }
  release_events();
}

TEST_F(ExamplePlugin, InjectedExecuteFailureReachesEventWaitAndDependents) {
  quilt_device_t d = open({{"fail_execute_on", "relu1"}});
  MlpGraph mlp("relu1");
  quilt_executable_t failing = compile(d, mlp.g.build({mlp.y}));
  void* x = upload(d, mlp.input);
  void* y = alloc(d, 30 * 4);
  std::vector<float> out(30);
  quilt_event_t run = event(d), down = event(d);
  ASSERT_OK(execute(d, failing, mlp.g, {x}, {y}, run));  // fails later, on the device
  ASSERT_OK(backend_->copy_to_host(d, out.data(), y, 30 * 4, &run, 1, down));
  for (int i = 0; i < 2; ++i)  // a fresh status each call
    expect_error(backend_->event_wait(d, run), QUILT_STATUS_DEVICE_ERROR,
                 {"[example] injected failure in node 'relu1'"});
  expect_error(backend_->event_wait(d, down), QUILT_STATUS_DEVICE_ERROR,
               {"[example] a dependency failed: ", "injected failure in node 'relu1'"});

  // The device carries on: a patch without that node runs.
  MlpGraph other("relu2");
  quilt_executable_t fine = compile(d, other.g.build({other.y}));
  quilt_event_t ok = event(d);
  ASSERT_OK(execute(d, fine, other.g, {x}, {y}, ok));
  ASSERT_OK(backend_->event_wait(d, ok));
  expect_near(download(d, y, 30), other.expected());
  release_events();
  backend_->free(d, x);
  backend_->free(d, y);
  backend_->executable_release(d, failing);
  backend_->executable_release(d, fine);
}

TEST_F(ExamplePlugin, InjectedCompileFailure) {
  quilt_device_t d = open({{"fail_compile_on", "add1"}});
  MlpGraph mlp;
  quilt_executable_t exe = nullptr;
  expect_error(backend_->compile(d, &mlp.g.build({mlp.y}), &exe), QUILT_STATUS_RUNTIME_ERROR,
               {"injected compile failure in node 'add1'"});
}

TEST_F(ExamplePlugin, ExecuteChecksShapesTheHostGives) {
  quilt_device_t d = open();
  GraphBuilder g;
  int32_t a = g.value("a", {2, 3}), b = g.value("b", {3}), y = g.value("y", {2, 4});
  g.node("Add", {a, b}, {y}, {}, "add1");
  quilt_executable_t exe = compile(d, g.build({y}));
  void* ap = upload(d, iota_values(6));
  void* bp = upload(d, iota_values(3));
  void* yp = alloc(d, 8 * 4);
  quilt_event_t done = event(d);
  ASSERT_OK(execute(d, exe, g, {ap, bp}, {yp}, done));
  expect_error(backend_->event_wait(d, done), QUILT_STATUS_INVALID_ARGUMENT,
               {"Add node 'add1': output shape [2, 4] but the inputs give [2, 3]"});
  release_events();
  for (void* p : {ap, bp, yp}) backend_->free(d, p);
  backend_->executable_release(d, exe);
}

TEST(ExamplePluginEntry, RefusesAHostOfAnotherMajorVersion) {
  Library library(QUILT_EXAMPLE_PLUGIN);
  quilt_host_api_t future = kHost;
  future.abi_version = (2 << 16) | 3;
  const quilt_backend_t* backend = nullptr;
  expect_error(library.entry()(&future, &backend), QUILT_STATUS_INVALID_ARGUMENT,
               {"ABI 2.3", "built for " + std::to_string(QUILT_BACKEND_ABI_MAJOR) + "." +
                               std::to_string(QUILT_BACKEND_ABI_MINOR)});
}

TEST(ExamplePluginVariants, BadAbiReportsMajor99) {
  Library library(QUILT_EXAMPLE_BAD_ABI_PLUGIN);
  ASSERT_NE(library.handle, nullptr) << dlerror();
  const quilt_backend_t* backend = nullptr;
  ASSERT_OK(library.entry()(&kHost, &backend));
  EXPECT_EQ(backend->abi_version >> 16, 99u);
  EXPECT_EQ(backend->abi_version & 0xffff, 0u);
}

TEST(ExamplePluginVariants, InitFailReturnsAStatus) {
  Library library(QUILT_EXAMPLE_INIT_FAIL_PLUGIN);
  ASSERT_NE(library.handle, nullptr) << dlerror();
  const quilt_backend_t* backend = nullptr;
  expect_error(library.entry()(&kHost, &backend), QUILT_STATUS_RUNTIME_ERROR,
               {"example: simulated driver not found"});
  EXPECT_EQ(backend, nullptr);
}

TEST(ExamplePluginVariants, NoEntryLacksTheSymbol) {
  Library library(QUILT_NO_ENTRY_PLUGIN);
  ASSERT_NE(library.handle, nullptr) << dlerror();
  EXPECT_EQ(library.entry(), nullptr);
  EXPECT_NE(dlsym(library.handle, "quilt_not_a_backend"), nullptr);
}

}  // namespace

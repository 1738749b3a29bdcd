// Session: load, validate, choose devices, plan, run.
#include <algorithm>
#include <new>
#include <set>

#include "core/backend_registry.hpp"
#include "core/device.hpp"
#include "core/executor.hpp"
#include "core/host_ops.hpp"
#include "core/log.hpp"
#include "core/onnx_import.hpp"
#include "core/optimize/optimize.hpp"
#include "core/parse_int.hpp"
#include "core/validate.hpp"
#include "quilt/quilt.hpp"

namespace quilt {

struct Session::Impl {
  explicit Impl(LogLevel level) : plugin_log(level), logger(level) {}
  PluginLogScope plugin_log;  // first: outlives the devices, which may log as they close
  std::unique_ptr<Model> model;
  Logger logger;
  DeviceList devices;
  std::unique_ptr<ExecutionPlan> plan;
  ~Impl() { plan.reset(); }  // executables go before their devices
};

namespace {

struct BackendSpec {
  std::string backend;
  int32_t index = 0;
  std::string text;
};

// "name", "name:INDEX" or "name:name=SUBSTRING" (the first device whose name contains it).
BackendSpec parse_spec(const std::string& text, const BackendInventory& inventory) {
  BackendSpec s{text, 0, text};
  const size_t colon = text.find(':');
  s.backend = text.substr(0, colon);
  if (s.backend.empty())
    throw Error(ErrorCode::InvalidArgument, "empty backend name in SessionOptions.backends");
  const LoadedBackend* backend = inventory.find(s.backend);
  if (!backend) return s;  // reported by the caller, with what is available
  if (colon == std::string::npos) return s;
  const std::string sel = text.substr(colon + 1);
  if (sel.rfind("name=", 0) == 0) {
    const std::string want = sel.substr(5);
    const auto devices = describe_devices(*backend);
    std::string names;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!want.empty() && devices[i].name.find(want) != std::string::npos) {
        s.index = static_cast<int32_t>(i);
        return s;
      }
      names += (names.empty() ? "" : ", ") + std::to_string(i) + ": " + devices[i].name;
    }
    throw Error(ErrorCode::InvalidArgument,
                "backend '" + text + "': no " + s.backend + " device name contains '" + want +
                    "' (devices: " + (names.empty() ? "none" : names) + ")");
  }
  const auto i = parse_int64(sel);
  if (!i || *i < 0 || *i > 1 << 20)
    throw Error(ErrorCode::InvalidArgument,
                "backend '" + text +
                    "' in SessionOptions.backends: expected NAME, NAME:DEVICE_INDEX or "
                    "NAME:name=DEVICE_NAME_PART");
  s.index = static_cast<int32_t>(*i);
  return s;
}

std::string available(const BackendInventory& inv) {
  std::string out;
  for (const auto& b : inv.backends) out += (out.empty() ? "" : ", ") + b.name;
  for (const auto& f : inv.failures) out += "; could not load " + f.library + ": " + f.reason;
  return out;
}

void collect_node_names(const Graph& g, std::set<std::string>& names) {
  for (const auto& n : g.nodes)
    if (!n.name.empty()) names.insert(n.name);
}

// Applies SessionOptions::fixed_dims to the graph's declared inputs, outputs and value infos.
void fix_dims(Graph& g, const std::map<std::string, int64_t>& fixed) {
  if (fixed.empty()) return;
  std::set<std::string> symbols;
  auto apply = [&](ValueInfo& info) {
    for (auto& d : info.shape) {
      if (d.symbol.empty()) continue;
      symbols.insert(d.symbol);
      if (auto it = fixed.find(d.symbol); it != fixed.end()) d.value = it->second;
    }
  };
  for (auto& in : g.inputs) apply(in);
  for (auto& out : g.outputs) apply(out);
  for (auto& [_, info] : g.value_info) apply(info);
  for (const auto& [name, value] : fixed) {
    if (value < 0)
      throw Error(ErrorCode::InvalidArgument, "SessionOptions.fixed_dims: '" + name + "' is " +
                                                  std::to_string(value) + ", expected >= 0");
    if (!symbols.count(name)) {
      std::string known;
      for (const auto& s : symbols) known += (known.empty() ? "" : ", ") + s;
      throw Error(ErrorCode::InvalidArgument,
                  "SessionOptions.fixed_dims names '" + name +
                      "', which is not a symbolic dim of the model (its symbolic dims: " +
                      (known.empty() ? "none" : known) + ")");
    }
  }
}

std::shared_ptr<Session::Impl> make_impl(std::unique_ptr<Model> model,
                                         const SessionOptions& options) {
  if (options.threads < 0 || options.threads > SessionOptions::kMaxThreads)
    throw Error(ErrorCode::InvalidArgument, "SessionOptions.threads is " +
                                                std::to_string(options.threads) +
                                                ", expected 0 (one per core) to " +
                                                std::to_string(SessionOptions::kMaxThreads));
  if (options.optimization_level < 0 || options.optimization_level > 1)
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions.optimization_level is " +
                    std::to_string(options.optimization_level) +
                    ", expected 0 (as written) or 1 (constant folding and pattern rewrites)");
  if (static_cast<int>(options.log_level) < static_cast<int>(LogLevel::Error) ||
      static_cast<int>(options.log_level) > static_cast<int>(LogLevel::Debug))
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions.log_level is " +
                    std::to_string(static_cast<int>(options.log_level)) +
                    ", expected Error (0), Warning (1), Info (2) or Debug (3)");
  if (options.precision != "fp32" && options.precision != "bf16")
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions.precision is '" + options.precision +
                    "', expected fp32 or bf16 (float32 models' GEMM and convolution on "
                    "bfloat16 operands)");
  auto impl = std::make_shared<Session::Impl>(options.log_level);
  impl->model = std::move(model);
  lower_string_class_labels(impl->model->graph);  // before validation, which refuses them
  lower_string_tfidf(impl->model->graph);
  validate_model(*impl->model, SchemaRegistry::builtin());
  fix_dims(impl->model->graph, options.fixed_dims);
  // Pins name the model's nodes as written, some of which the rewrites replace.
  std::set<std::string> node_names;
  collect_node_names(impl->model->graph, node_names);
  const std::vector<PlanReport::Rewrite> rewrites =
      optimize_model(*impl->model, options.optimization_level);

  std::vector<std::string> named = options.backends;
  for (const auto& [name, _] : options.backend_options) named.push_back(name);
  const BackendInventory inventory = discover_backends_for(named, options.plugins);
  for (const auto& f : inventory.failures) {
    // A library the caller named must load; those found in QUILT_PLUGIN_PATH may fail quietly.
    if (std::find(options.plugins.begin(), options.plugins.end(), f.library) !=
        options.plugins.end())
      throw Error(ErrorCode::InvalidArgument,
                  "SessionOptions.plugins: '" + f.library + "' not loaded: " + f.reason);
    impl->logger.info("backend library " + f.library + " not loaded: " + f.reason);
  }
  std::vector<BackendSpec> specs;
  for (const auto& text : options.backends) {
    BackendSpec s = parse_spec(text, inventory);
    if (!inventory.find(s.backend))
      throw Error(ErrorCode::InvalidArgument,
                  "unknown backend '" + s.backend +
                      "' in SessionOptions.backends; available: " + available(inventory));
    for (const auto& other : specs)
      if (other.backend == s.backend && other.index == s.index)
        throw Error(ErrorCode::InvalidArgument,
                    "backend '" + text + "' is listed twice in SessionOptions.backends");
    specs.push_back(s);
  }
  for (const auto& [name, _] : options.backend_options)
    if (!inventory.find(name))
      throw Error(ErrorCode::InvalidArgument, "SessionOptions.backend_options names backend '" +
                                                  name + "', which is not available (" +
                                                  available(inventory) + ")");
  const bool cpu_listed = std::any_of(specs.begin(), specs.end(),
                                      [](const BackendSpec& s) { return s.backend == "cpu"; });
  if (!cpu_listed) specs.push_back({"cpu", 0, "cpu"});

  PlanOptions plan_options;
  plan_options.optimization_level = options.optimization_level;
  plan_options.logger = &impl->logger;
  plan_options.cache_dir = options.cache_dir;
  plan_options.cpu_fallback = options.cpu_fallback;
  plan_options.cost_rule = options.partition_cost_rule;
  plan_options.rewrites = rewrites;
  for (size_t i = 0; i < specs.size(); ++i) {
    const BackendSpec& s = specs[i];
    std::map<std::string, std::string> device_options;
    if (auto it = options.backend_options.find(s.backend); it != options.backend_options.end())
      device_options = it->second;
    if (s.backend == "cpu" && options.threads > 0 && !device_options.count("threads"))
      device_options["threads"] = std::to_string(options.threads);
    if (s.backend == "cpu" && options.precision != "fp32" && !device_options.count("precision"))
      device_options["precision"] = options.precision;
    impl->devices.push_back(
        std::make_shared<Device>(*inventory.find(s.backend), s.index, device_options));
    plan_options.requested.push_back(s.backend != "cpu" || cpu_listed);
    if (s.backend == "cpu") plan_options.cpu_index = static_cast<int>(i);
  }
  std::set<std::string> kept_names;
  collect_node_names(impl->model->graph, kept_names);
  for (const auto& [node, backend] : options.pinned_nodes) {
    if (!node_names.count(node))
      throw Error(ErrorCode::InvalidArgument, "SessionOptions.pinned_nodes names node '" + node +
                                                  "', which is not in the model's graph");
    if (!kept_names.count(node))
      impl->logger.warning("SessionOptions.pinned_nodes: node '" + node +
                           "' was fused into another node by the optimisation passes, so its "
                           "pin has no effect (optimization_level 0 keeps every node)");
    int found = -1;
    for (size_t i = 0; i < impl->devices.size(); ++i)
      if (impl->devices[i]->name() == backend ||
          (specs[i].backend == backend && specs[i].index == 0) || specs[i].text == backend)
        found = static_cast<int>(i);
    if (found < 0)
      throw Error(ErrorCode::InvalidArgument, "node '" + node + "' is pinned to '" + backend +
                                                  "', which is not in SessionOptions.backends");
    plan_options.pinned[node] = found;
  }
  impl->plan = std::make_unique<ExecutionPlan>(*impl->model, impl->devices, plan_options);
  return impl;
}

// Session creation allocates all along (parsing, folding, packing, devices, threads): running
// out of memory anywhere is Error(OutOfMemory), like in a run, not a std::bad_alloc escaping.
template <class F>
std::shared_ptr<Session::Impl> creating(F f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::OutOfMemory, "out of memory while creating the session");
  }
}

}  // namespace

Session::Session(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::Session(const std::string& model_path, const SessionOptions& options)
    : impl_(creating([&] {
        return make_impl(std::make_unique<Model>(load_model_file(model_path)), options);
      })) {}

Session Session::from_bytes(std::span<const std::byte> model, const SessionOptions& options,
                            const std::string& external_data_dir) {
  return Session(creating([&] {
    return make_impl(std::make_unique<Model>(load_model_bytes(model, external_data_dir)), options);
  }));
}

Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

const Session::Impl& Session::impl() const {
  if (!impl_)
    throw Error(ErrorCode::InvalidArgument,
                "this Session was moved from: it holds no model (use the Session it was moved to)");
  return *impl_;
}

const std::vector<ValueInfo>& Session::inputs() const {
  return impl().plan->inputs();
}
const std::vector<ValueInfo>& Session::outputs() const {
  return impl().plan->outputs();
}

TensorMap Session::run(const TensorMap& inputs,
                       const std::vector<std::string>& output_names) const {
  return impl().plan->run(inputs, output_names);
}

TensorMap Session::run(const TensorMap& inputs, const std::vector<std::string>& output_names,
                       RunProfile* profile) const {
  return impl().plan->run(inputs, output_names, profile);
}

ValueMap Session::run_values(const ValueMap& inputs, const std::vector<std::string>& output_names,
                             RunProfile* profile) const {
  return impl().plan->run_values(inputs, output_names, profile);
}

const PlanReport& Session::plan() const {
  return impl().plan->report();
}

const ModelMetadata& Session::metadata() const {
  return impl_->model->metadata;
}

const std::vector<ValueInfo>& Session::overridable_initializers() const {
  return impl_->plan->overridable();
}

}  // namespace quilt

// Session: load, validate, plan, run.
#include <algorithm>

#include "core/executor.hpp"
#include "core/log.hpp"
#include "core/onnx_import.hpp"
#include "core/validate.hpp"
#include "quilt/quilt.hpp"

namespace quilt {

struct Session::Impl {
  std::unique_ptr<Model> model;
  Logger logger;
  std::unique_ptr<ExecutionPlan> plan;
};

namespace {

std::shared_ptr<Session::Impl> make_impl(std::unique_ptr<Model> model,
                                         const SessionOptions& options) {
  if (options.threads < 0)
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions.threads is " + std::to_string(options.threads) + ", expected >= 0");
  if (options.optimization_level < 0 || options.optimization_level > 1)
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions.optimization_level is " +
                    std::to_string(options.optimization_level) +
                    ", expected 0 (as written) or 1 (constant folding)");
  auto impl = std::make_shared<Session::Impl>();
  impl->model = std::move(model);
  impl->logger = Logger(options.log_level);
  validate_model(*impl->model, SchemaRegistry::builtin());

  static const std::vector<std::string> kKnown = {"cpu"};
  for (const auto& b : options.backends)
    if (std::find(kKnown.begin(), kKnown.end(), b) == kKnown.end()) {
      std::string known;
      for (const auto& k : kKnown) {
        if (!known.empty()) known += ", ";
        known += k;
      }
      throw Error(ErrorCode::InvalidArgument,
                  "unknown backend '" + b + "' in SessionOptions.backends; available: " + known);
    }
  BackendList backends;
  backends.push_back(create_cpu_backend({options.threads, &impl->logger}));
  impl->plan = std::make_unique<ExecutionPlan>(
      *impl->model, std::move(backends), PlanOptions{options.optimization_level, &impl->logger});
  return impl;
}

}  // namespace

Session::Session(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::Session(const std::string& model_path, const SessionOptions& options)
    : impl_(make_impl(std::make_unique<Model>(load_model_file(model_path)), options)) {}

Session Session::from_bytes(std::span<const std::byte> model, const SessionOptions& options,
                            const std::string& external_data_dir) {
  return Session(
      make_impl(std::make_unique<Model>(load_model_bytes(model, external_data_dir)), options));
}

Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

const std::vector<ValueInfo>& Session::inputs() const {
  return impl_->plan->inputs();
}
const std::vector<ValueInfo>& Session::outputs() const {
  return impl_->plan->outputs();
}

TensorMap Session::run(const TensorMap& inputs,
                       const std::vector<std::string>& output_names) const {
  return impl_->plan->run(inputs, output_names);
}

}  // namespace quilt

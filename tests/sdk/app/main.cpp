// A small application built against an installed Quilt (tests/sdk/run.sh builds it with
// find_package(Quilt) and with pkg-config): runs MODEL on generated inputs, prints the outputs'
// shapes and the backends Quilt finds.
#include <quilt/quilt.hpp>

#include <cstring>
#include <iostream>

static_assert(QUILT_VERSION_NUMBER >= QUILT_MAKE_VERSION(0, 1, 0));

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: quilt_sdk_app MODEL\n";
    return 2;
  }
  if (std::strcmp(quilt::version(), QUILT_VERSION_STRING) != 0) {
    std::cerr << "header " << QUILT_VERSION_STRING << ", library " << quilt::version() << "\n";
    return 1;
  }
  // quilt::Error thrown in libquilt is caught here by its type (its typeinfo is exported).
  try {
    quilt::Session missing("/nonexistent/model.onnx");
    std::cerr << "no error for a missing model\n";
    return 1;
  } catch (const quilt::Error& e) {
    if (e.code() != quilt::ErrorCode::Io) {
      std::cerr << "missing model: code " << quilt::error_code_name(e.code()) << "\n";
      return 1;
    }
  }
  try {
    quilt::Session session(argv[1]);
    quilt::TensorMap inputs;
    for (const auto& in : session.inputs()) {
      std::vector<int64_t> shape;
      for (const auto& d : in.shape) shape.push_back(d.is_fixed() ? d.value : 1);
      inputs.emplace(in.name, quilt::Tensor(in.dtype, shape));
    }
    for (const auto& [name, t] : session.run(inputs))
      std::cout << "output " << name << " " << quilt::to_string(t.shape()) << "\n";
    for (const auto& b : quilt::list_backends().backends) std::cout << "backend " << b.name << "\n";
  } catch (const quilt::Error& e) {
    std::cerr << "error (" << quilt::error_code_name(e.code()) << "): " << e.what() << "\n";
    return 1;
  }
  std::cout << "quilt " << quilt::version() << "\n";
}

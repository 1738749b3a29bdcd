// quilt._quilt: the nanobind module over the public C++ API (include/quilt/quilt.hpp) that the
// Python package (quilt/, quilt/onnxruntime/, quilt/backend.py) is written on.
//
//   import quilt._quilt as q
//   s = q.Session("model.onnx", q.SessionOptions())
//   y = s.run({"x": x})["y"]                  # numpy in, numpy out
//   ys = s.run_list(None, {"x": x}, None)     # outputs in the model's order (onnxruntime's run)
//
// Runs release the GIL: several Python threads may run one session at once.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <mutex>
#include <unordered_map>

#include "convert.hpp"
#include "errors.hpp"
#include "quilt/backend.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace quilt::python {
namespace {

// Spans of the runs made while profiling, appended by every thread that runs.
class Profile {
 public:
  void append(const RunProfile& run) {
    std::lock_guard lock(mutex_);
    profile_.spans.insert(profile_.spans.end(), run.spans.begin(), run.spans.end());
  }
  std::string to_chrome_trace(const std::string& process_name) const {
    std::lock_guard lock(mutex_);
    return profile_.to_chrome_trace(process_name);
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return profile_.spans.size();
  }
  nb::list spans() const {
    std::lock_guard lock(mutex_);
    nb::list out;
    for (const auto& s : profile_.spans)
      out.append(nb::make_tuple(s.name, s.lane, s.kind, s.start_ns, s.end_ns));
    return out;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    profile_.spans.clear();
  }

 private:
  mutable std::mutex mutex_;
  RunProfile profile_;
};

nb::object dim_to_python(const Dim& d) {
  if (d.is_fixed()) return nb::int_(d.value);
  if (!d.symbol.empty()) return nb::str(d.symbol.c_str());
  return nb::none();
}

// A Session and what a run needs to look up quickly.
class PySession {
 public:
  PySession(nb::handle model, const SessionOptions& options, const std::string& external_data_dir)
      : session_(open(model, options, external_data_dir)) {
    for (const auto& in : session_.inputs()) declared_[in.name] = in;
    for (const auto& in : session_.overridable_initializers()) declared_[in.name] = in;
    for (const auto& out : session_.outputs()) output_names_.push_back(out.name);
  }

  const Session& session() const { return session_; }

  // Outputs in the order of `names` (all of the model's, in its order, when None or empty).
  nb::list run_list(nb::handle names, nb::handle feed, Profile* profile) const {
    std::vector<std::string> wanted;
    if (!names.is_none())
      for (nb::handle n : names) wanted.push_back(nb::cast<std::string>(n));
    const std::vector<std::string>& order = wanted.empty() ? output_names_ : wanted;
    ValueMap out = run(feed, wanted, profile);
    nb::list result;
    for (const auto& name : order)
      result.append(export_value(out.at(name), "output '" + name + "'"));
    return result;
  }

  nb::dict run_dict(nb::handle feed, const std::vector<std::string>& names,
                    Profile* profile) const {
    ValueMap out = run(feed, names, profile);
    nb::dict result;
    const std::vector<std::string>& order = names.empty() ? output_names_ : names;
    for (const auto& name : order)
      result[name.c_str()] = export_value(out.at(name), "output '" + name + "'");
    return result;
  }

 private:
  static Session open(nb::handle model, const SessionOptions& options,
                      const std::string& external_data_dir) {
    if (PyObject_CheckBuffer(model.ptr())) {
      Py_buffer view{};
      if (PyObject_GetBuffer(model.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
      struct Release {
        Py_buffer* v;
        ~Release() { PyBuffer_Release(v); }
      } release{&view};
      std::span<const std::byte> bytes{static_cast<const std::byte*>(view.buf),
                                       static_cast<size_t>(view.len)};
      nb::gil_scoped_release unlocked;
      return Session::from_bytes(bytes, options, external_data_dir);
    }
    const std::string path =
        nb::cast<std::string>(nb::str(nb::module_::import_("os").attr("fspath")(model)));
    nb::gil_scoped_release unlocked;
    return Session(path, options);
  }

  ValueMap run(nb::handle feed, const std::vector<std::string>& names, Profile* profile) const {
    HeldBuffers held;
    ValueMap inputs;
    for (auto [key, value] : nb::cast<nb::dict>(feed)) {
      std::string name = nb::cast<std::string>(key);
      auto it = declared_.find(name);
      Value v = it == declared_.end() ? Value(import_array(value, name, DType::Undefined, held))
                                      : import_value(value, name, it->second, held);
      inputs.emplace(std::move(name), std::move(v));
    }
    ValueMap out;
    {
      nb::gil_scoped_release unlocked;
      if (profile) {
        RunProfile run_profile;
        out = session_.run_values(inputs, names, &run_profile);
        profile->append(run_profile);
      } else {
        out = session_.run_values(inputs, names);
      }
    }
    return out;
  }

  Session session_;
  std::unordered_map<std::string, ValueInfo> declared_;
  std::vector<std::string> output_names_;
};

nb::list value_infos(const std::vector<ValueInfo>& infos) {
  nb::list out;
  for (const auto& v : infos) out.append(nb::cast(v));
  return out;
}

nb::dict backend_to_dict(const BackendInfo& b) {
  nb::dict d;
  d["name"] = b.name;
  d["version"] = b.version;
  d["library"] = b.library;
  d["abi_version"] = b.abi_version;
  d["error"] = b.error.empty() ? nb::none() : nb::object(nb::str(b.error.c_str()));
  nb::list devices;
  for (size_t i = 0; i < b.devices.size(); ++i) {
    const DeviceInfo& dev = b.devices[i];
    nb::dict props;
    for (const auto& [k, v] : dev.properties) props[k.c_str()] = v;
    nb::dict e;
    e["backend"] = b.name;
    e["index"] = i;
    e["name"] = dev.name;
    e["memory_bytes"] = dev.memory_bytes ? nb::object(nb::int_(dev.memory_bytes)) : nb::none();
    e["host_memory"] = (dev.flags & QUILT_DEVICE_HOST_MEMORY) != 0;
    e["synchronous"] = (dev.flags & QUILT_DEVICE_SYNCHRONOUS) != 0;
    e["properties"] = props;
    devices.append(e);
  }
  d["devices"] = devices;
  return d;
}

}  // namespace
}  // namespace quilt::python

NB_MODULE(_quilt, m) {
  using namespace quilt;
  using namespace quilt::python;
  m.doc() = "Quilt's C++ API for the quilt package (use quilt, quilt.onnxruntime, quilt.backend).";
  register_errors(m);

  m.def("version", [] { return std::string(quilt::version()); });

  nb::enum_<LogLevel>(m, "LogLevel")
      .value("Error", LogLevel::Error)
      .value("Warning", LogLevel::Warning)
      .value("Info", LogLevel::Info)
      .value("Debug", LogLevel::Debug);

  // set_log_sink(callable(level: int, message: str) or None). The callable gets the messages
  // logged on threads Python knows (the one creating or running a session: its GIL is taken
  // back for the call); those of Quilt's worker threads, which have no Python thread state and
  // could deadlock waiting for the GIL, go to stderr, as do messages whose call raised (the
  // exception is reported through sys.unraisablehook).
  m.def(
      "set_log_sink",
      [](nb::object sink) {
        if (sink.is_none()) {
          quilt::set_log_sink(nullptr);
          return;
        }
        // Kept alive for good: a thread may still be inside a replaced sink, and the sink's
        // copies are destroyed on threads that may not hold the GIL. One reference per call.
        PyObject* callable = sink.inc_ref().ptr();
        quilt::set_log_sink([callable](LogLevel level, const std::string& message) {
          if (PyGILState_GetThisThreadState() == nullptr) return false;
          nb::gil_scoped_acquire gil;
          try {
            const nb::handle fn(callable);
            fn(static_cast<int>(level), nb::str(message.data(), message.size()));
          } catch (nb::python_error& e) {
            e.restore();
            PyErr_WriteUnraisable(callable);
            return false;
          }
          return true;
        });
      },
      "sink"_a.none());

  nb::class_<SessionOptions>(m, "SessionOptions", "quilt::SessionOptions, field for field.")
      .def(nb::init<>())
      .def_rw("threads", &SessionOptions::threads)
      .def_rw("backends", &SessionOptions::backends)
      .def_rw("cpu_fallback", &SessionOptions::cpu_fallback)
      .def_rw("pinned_nodes", &SessionOptions::pinned_nodes)
      .def_rw("partition_cost_rule", &SessionOptions::partition_cost_rule)
      .def_rw("plugins", &SessionOptions::plugins)
      .def_rw("backend_options", &SessionOptions::backend_options)
      .def_rw("fixed_dims", &SessionOptions::fixed_dims)
      .def_rw("optimization_level", &SessionOptions::optimization_level)
      .def_rw("log_level", &SessionOptions::log_level)
      .def_rw("precision", &SessionOptions::precision)
      .def_rw("cache_dir", &SessionOptions::cache_dir);

  nb::class_<ValueInfo>(m, "ValueInfo", "A graph input or output: name, dtype and shape.")
      .def_ro("name", &ValueInfo::name)
      .def_prop_ro("dtype", [](const ValueInfo& v) { return std::string(dtype_name(v.dtype)); })
      .def_prop_ro("onnx_type", [](const ValueInfo& v) { return static_cast<int>(v.dtype); })
      .def_prop_ro("kind", [](const ValueInfo& v) { return std::string(value_kind_name(v.kind)); })
      // ONNX's notation, as onnxruntime's NodeArg.type: "tensor(float)",
      // "seq(map(int64,tensor(float)))"
      .def_prop_ro("type", [](const ValueInfo& v) { return type_string(v); })
      .def_prop_ro("shape",
                   [](const ValueInfo& v) -> nb::object {
                     if (!v.has_shape) return nb::none();
                     nb::list dims;
                     for (const auto& d : v.shape) dims.append(dim_to_python(d));
                     return dims;
                   })
      .def("__repr__", [](const ValueInfo& v) {
        if (v.kind != ValueKind::Tensor)
          return "ValueInfo(name='" + v.name + "', type='" + type_string(v) + "')";
        return "ValueInfo(name='" + v.name + "', dtype='" + dtype_name(v.dtype) +
               "', shape=" + (v.has_shape ? to_string(v.shape) : "unknown") + ")";
      });

  nb::class_<ModelMetadata>(m, "ModelMetadata")
      .def_ro("producer_name", &ModelMetadata::producer_name)
      .def_ro("producer_version", &ModelMetadata::producer_version)
      .def_ro("domain", &ModelMetadata::domain)
      .def_ro("model_version", &ModelMetadata::model_version)
      .def_ro("description", &ModelMetadata::description)
      .def_ro("graph_name", &ModelMetadata::graph_name)
      .def_ro("graph_description", &ModelMetadata::graph_description)
      .def_ro("custom", &ModelMetadata::custom)
      .def_ro("ir_version", &ModelMetadata::ir_version)
      .def_ro("opsets", &ModelMetadata::opsets);

  nb::class_<Profile>(m, "Profile", "Spans of the runs made with it (quilt::RunProfile).")
      .def(nb::init<>())
      .def("to_chrome_trace", &Profile::to_chrome_trace, "process_name"_a)
      .def("spans", &Profile::spans, "(name, lane, kind, start_ns, end_ns) per span")
      .def("clear", &Profile::clear)
      .def("__len__", &Profile::size);

  nb::class_<PySession>(m, "Session")
      .def(nb::init<nb::handle, const SessionOptions&, const std::string&>(), "model"_a,
           "options"_a, "external_data_dir"_a = "",
           "model: a path (str or os.PathLike) or the serialized ModelProto (bytes-like)")
      .def_prop_ro("inputs", [](const PySession& s) { return value_infos(s.session().inputs()); })
      .def_prop_ro("outputs", [](const PySession& s) { return value_infos(s.session().outputs()); })
      .def_prop_ro(
          "overridable_initializers",
          [](const PySession& s) { return value_infos(s.session().overridable_initializers()); })
      .def_prop_ro("metadata", [](const PySession& s) { return s.session().metadata(); })
      .def("plan_json", [](const PySession& s) { return s.session().plan().to_json(); })
      .def("plan_text", [](const PySession& s) { return s.session().plan().to_text(); })
      .def("plan_dot", [](const PySession& s) { return s.session().plan().to_dot(); })
      .def("run_list", &PySession::run_list, "output_names"_a.none(), "feed"_a, "profile"_a.none())
      .def("run", &PySession::run_dict, "feed"_a, "output_names"_a, "profile"_a.none());

  m.def(
      "list_backends",
      [](const std::vector<std::string>& plugins) {
        BackendList list;
        {
          nb::gil_scoped_release unlocked;
          list = list_backends(plugins);
        }
        nb::list backends, failures;
        for (const auto& b : list.backends) backends.append(backend_to_dict(b));
        for (const auto& f : list.failures) {
          nb::dict d;
          d["library"] = f.library;
          d["reason"] = f.reason;
          failures.append(d);
        }
        return nb::make_tuple(backends, failures);
      },
      "plugins"_a);
}

// ExecutionPlan::run: per-run shape inference on the calling thread, steps issued to one lane
// per device, events between them.
#include "core/executor.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <thread>

namespace quilt {
namespace {

// Wraps a failure so that its message names where it happened.
[[noreturn]] void rethrow_with(const std::string& where) {
  try {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind("[", 0) == 0 || where.empty()) throw;
    throw Error(e.code(), "[" + where + "] " + what);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::OutOfMemory, "[" + where + "] out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Runtime, "[" + where + "] " + e.what());
  }
}

// One thread issuing the work of one device, in step order.
class Lane {
 public:
  Lane() : thread_([this] { loop(); }) {}
  ~Lane() { close(); }
  void push(std::function<void()> task) {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
    cv_.notify_one();
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      if (closing_) return;
      closing_ = true;
      cv_.notify_one();
    }
    thread_.join();
  }
  // Waits until every task pushed so far has run.
  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return closing_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        busy_ = true;
      }
      task();
      std::lock_guard lock(mutex_);
      busy_ = false;
      if (tasks_.empty()) idle_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> tasks_;
  bool closing_ = false, busy_ = false;
  std::thread thread_;
};

}  // namespace

// Idle lanes of finished runs. Each run takes lanes of its own (a lane shared by two runs could
// deadlock them, one run's task waiting on work queued behind the other's), so this only saves
// starting and joining a thread per device per run (MNIST on opencl,cpu, alternating runs:
// median 0.17-0.18 -> 0.13-0.16 ms).
class LanePool {
 public:
  std::unique_ptr<Lane> take() {
    std::lock_guard lock(mutex_);
    if (idle_.empty()) return std::make_unique<Lane>();
    std::unique_ptr<Lane> lane = std::move(idle_.back());
    idle_.pop_back();
    return lane;
  }
  // A drained lane back; beyond a few (as many as concurrent runs used) it is closed.
  void give(std::unique_ptr<Lane> lane) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(lane));
  }

 private:
  static constexpr size_t kMaxIdle = 8;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Lane>> idle_;
};

std::shared_ptr<LanePool> make_lane_pool() {
  return std::make_shared<LanePool>();
}

// The type of every value for one run: the creation-time ones, overridden only where this run's
// differ. Copying all of them on every run was a vector allocation per value (204 per run of a
// 200-node chain). An override is a pointer: to a copy this run owns (set) or to a type that
// outlives the run (point: a patch's kept types, ExecutionPlan::TypesMemo), which costs no copy.
class RunTypes {
 public:
  explicit RunTypes(const std::vector<TypeShape>& base) : base_(&base) {}
  const TypeShape& operator[](size_t v) const {
    return at_.empty() || !at_[v] ? (*base_)[v] : *at_[v];
  }
  void set(size_t v, const TypeShape& t) {
    const TypeShape& now = (*this)[v];
    if (now.dtype == t.dtype && now.has_shape == t.has_shape && now.dims == t.dims) return;
    own(v, t);
  }
  // Sets the type of a tensor value without building a TypeShape when it is unchanged.
  void set_of(size_t v, const Tensor& t) {
    const TypeShape& now = (*this)[v];
    if (now.dtype == t.dtype() && now.has_shape && now.dims == t.shape()) return;
    own(v, TypeShape::of(t));
  }
  // v's type is *t, which the caller keeps alive until the run ends.
  void point(size_t v, const TypeShape* t) {
    own_all();
    at_[v] = t;
  }
  // Makes the table of overrides now, before other threads read it: lanes read types while
  // the issuing thread sets others, and making it at the first set moved the vector they were
  // reading (ThreadSanitizer, a run with symbolic shapes on the example plugin and the CPU).
  void own_all() {
    if (at_.empty()) at_.assign(base_->size(), nullptr);
  }

 private:
  void own(size_t v, TypeShape t) {
    own_all();
    owned_.push_back(std::move(t));  // a deque: the types already pointed at stay where they are
    at_[v] = &owned_.back();
  }
  const std::vector<TypeShape>* base_;
  std::vector<const TypeShape*> at_;  // per value: its override, or null
  std::deque<TypeShape> owned_;
};

// Everything one run owns.
struct RunState {
  // This run's id for the backends' run_begin/run_end and execute (0 until the run begins).
  uint64_t run = 0;
  explicit RunState(const std::vector<TypeShape>& static_types) : types(static_types) {}
  struct SlotState {
    Tensor host;          // host-memory slots
    Value value;          // a sequence, map or optional (host steps only): host is undefined
    void* dev = nullptr;  // device slots
    const Device* owner = nullptr;
    std::shared_ptr<Event> event;  // null: ready once issued
    bool issued = false;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<SlotState> slots;
  RunTypes types;  // per value, for this run
  // The patches' kept types this run points at (ExecutionPlan::TypesMemo), held until it ends.
  std::vector<std::shared_ptr<const void>> held;
  std::exception_ptr error;
  // Set under mutex by fail(); also read without it, as an early exit, by the lanes' issue()
  // and the issuing loop (a plain bool there was a data race, found by ThreadSanitizer).
  std::atomic<bool> failed{false};
  struct SpanRecord {
    RunProfile::Span span;
    std::shared_ptr<Event> event;
  };
  std::vector<SpanRecord> spans;
  // Node timings a backend reports through node_timing, possibly from inside an event wait
  // (the OpenCL plugin's event_wait does): kept apart from spans, which the run walks while
  // waiting on their events and must not grow under it.
  std::vector<RunProfile::Span> node_spans;
  bool profiling = false;
  // What a backend's node_timing callback needs; kept until the run ends.
  struct NodeTimingContext {
    RunState* st;
    const std::vector<std::string>* names;
    std::string lane;
    std::vector<std::string> details;  // per node, from node_detail until its node_timing
  };
  std::vector<std::unique_ptr<NodeTimingContext>> timing_contexts;
  bool inline_run = false;  // no other thread can issue a slot

  void fail(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    if (!error) error = e;
    failed = true;
    cv.notify_all();
  }
  // Waits until slot s is issued (or the run failed) and returns its event.
  std::shared_ptr<Event> wait_issued(int s) {
    std::unique_lock lock(mutex);
    if (inline_run && !slots[s].issued && !failed)
      throw Error(ErrorCode::Runtime, "internal error: a value is read before it is produced");
    cv.wait(lock, [&] { return slots[s].issued || failed; });
    if (!slots[s].issued) throw Error(ErrorCode::Runtime, "run cancelled after a failure");
    return slots[s].event;
  }
  void wait_ready(int s, const std::string& where) {
    if (auto e = wait_issued(s)) e->wait("[" + where + "]");
  }
  void publish(const std::vector<int>& out_slots, const std::shared_ptr<Event>& event) {
    std::lock_guard lock(mutex);
    for (int s : out_slots)
      if (s >= 0) {
        slots[s].issued = true;
        slots[s].event = event;
      }
    cv.notify_all();
  }
};

namespace {
// The host value in slot s: a constant stays in the plan (copying every constant into every
// run's slots was an allocation each: 300 per run of a model whose weights are Constant nodes).
const Tensor& host_value(const RunState& st, int s, const std::vector<Tensor>& constants) {
  const Tensor& t = st.slots[s].host;
  if (t.defined() || static_cast<size_t>(s) >= constants.size()) return t;
  return constants[s];
}
// The value in host slot s, of any kind.
Value any_value(const RunState& st, int s, const std::vector<Tensor>& constants) {
  if (!st.slots[s].value.is_tensor()) return st.slots[s].value;
  return host_value(st, s, constants);
}
}  // namespace

// What a patch step's shape inference gave on a run: kept for the next runs whose boundary
// values have the same types (a symbolic batch of 1, call after call, inferred again each time
// read every node's attributes by name: 2-3 % of a MobileNetV3 run). Replaced, never changed:
// a run points at the one it took until it ends.
struct ExecutionPlan::TypesMemo {
  struct Kept {
    std::vector<TypeShape> boundary;              // per Step::boundary value
    std::vector<std::pair<int, TypeShape>> made;  // the values the patch makes
    std::vector<std::vector<int64_t>> dims;       // storage of infos' dims
    std::vector<quilt_tensor_info_t> infos;       // per Step::abi_values entry
  };
  std::shared_ptr<const Kept> get() const {
    std::lock_guard lock(mutex);
    return kept;
  }
  void set(std::shared_ptr<const Kept> k) {
    std::lock_guard lock(mutex);
    kept = std::move(k);
  }
  mutable std::mutex mutex;
  std::shared_ptr<const Kept> kept;
};

std::shared_ptr<ExecutionPlan::TypesMemo> ExecutionPlan::new_types_memo() {
  return std::make_shared<TypesMemo>();
}

namespace {
bool same_type(const TypeShape& a, const TypeShape& b) {
  return a.dtype == b.dtype && a.has_shape == b.has_shape && a.dims == b.dims;
}
}  // namespace

const quilt_tensor_info_t* ExecutionPlan::infer_patch(const Step& step, RunState& st) const {
  // st.types starts as static_types_: with the same boundary types, inference would only
  // write them again (MNIST: a tenth of a run, mostly allocations).
  auto boundary_is = [&](auto type_of) {
    for (size_t i = 0; i < step.boundary.size(); ++i)
      if (!same_type(st.types[step.boundary[i]], type_of(i))) return false;
    return true;
  };
  if (step.static_shapes &&
      boundary_is([&](size_t i) -> const TypeShape& { return static_types_[step.boundary[i]]; }))
    return step.static_infos.data();
  if (step.memo)
    if (std::shared_ptr<const TypesMemo::Kept> kept = step.memo->get();
        kept && boundary_is([&](size_t i) -> const TypeShape& { return kept->boundary[i]; })) {
      for (const auto& [v, t] : kept->made) st.types.point(static_cast<size_t>(v), &t);
      st.held.push_back(kept);
      return kept->infos.data();
    }
  std::vector<TypeShape> in_types;
  std::vector<const Tensor*> in_values;
  for (int v : step.value_inputs) st.wait_ready(v, step.label);
  for (const PatchNode& pn : step.nodes) {
    in_types.assign(pn.inputs.size(), TypeShape{});
    in_values.assign(pn.inputs.size(), nullptr);
    for (size_t i = 0; i < pn.inputs.size(); ++i) {
      const int v = pn.inputs[i];
      if (v < 0) continue;
      in_types[i] = st.types[v];
      if (constants_[v].defined()) {
        in_values[i] = &constants_[v];
      } else if (std::count(step.value_inputs.begin(), step.value_inputs.end(), v)) {
        in_values[i] = &st.slots[v].host;
      }
    }
    std::vector<TypeShape> out_types;
    try {
      out_types = infer_node(*pn.schema, *pn.node, in_types, in_values, true);
    } catch (const Error& e) {
      // Creation-time inference accepted the graph: what fails now is the actual inputs.
      if (e.code() != ErrorCode::InvalidModel) throw;
      throw Error(ErrorCode::InvalidArgument, e.what());
    }
    for (size_t i = 0; i < pn.outputs.size(); ++i) {
      if (pn.outputs[i] < 0) continue;
      if (!out_types[i].is_static())
        pn.node->fail("could not infer the shape of output '" + names_[pn.outputs[i]] + "'",
                      ErrorCode::Runtime);
      st.types.set(static_cast<size_t>(pn.outputs[i]), out_types[i]);
    }
  }
  if (!step.memo) return nullptr;
  auto kept = std::make_shared<TypesMemo::Kept>();
  for (int v : step.boundary) kept->boundary.push_back(st.types[v]);
  for (const PatchNode& pn : step.nodes)
    for (int v : pn.outputs)
      if (v >= 0) kept->made.emplace_back(v, st.types[v]);
  kept->dims.resize(step.abi_values.size());
  for (size_t a = 0; a < step.abi_values.size(); ++a) {
    const int v = step.abi_values[a];
    kept->infos.push_back(tensor_info(
        constants_[v].defined() ? TypeShape::of(constants_[v]) : st.types[v], kept->dims[a]));
  }
  step.memo->set(kept);
  st.held.push_back(kept);
  return kept->infos.data();
}

void ExecutionPlan::issue(const Step& step, RunState& st,
                          const quilt_tensor_info_t* infos_given) const {
  if (st.failed) return;
  const Device& device = *devices_[step.device];
  const std::string tag = "[" + step.label + "]";
  try {
    std::vector<quilt_event_t> waits;
    auto input_ptr = [&](int s) -> void* {
      std::shared_ptr<Event> e = st.wait_issued(s);
      if (e) {
        if (&e->device() == &device)
          waits.push_back(e->handle());
        else
          e->wait("[" + step.label + "]");
      }
      if (slots_[s].space == 0) {
        const Tensor& host = host_value(st, s, constants_);
        return host.nbytes() ? const_cast<void*>(host.raw_data()) : nullptr;
      }
      return st.slots[s].dev;
    };
    auto allocate = [&](int s) -> void* {
      const TypeShape& t = st.types[slots_[s].value];
      RunState::SlotState& slot = st.slots[s];
      if (slots_[s].space == 0) {
        // Left uninitialised (every backend writes its outputs whole) and taken from the
        // buffer cache: the outputs are allocated on every run, and BERT's 15.6 MB of logits
        // (GPT-2's 25.7 MB) were zeroed and faulted in page by page each time.
        slot.host = Tensor::scratch(t.dtype, t.dims, false);
        return slot.host.nbytes() ? slot.host.raw_data() : nullptr;
      }
      const auto bytes = static_cast<size_t>(t.bytes());
      if (bytes) {
        void* p = device.alloc(bytes, tag);
        std::lock_guard lock(st.mutex);
        slot.dev = p;
        slot.owner = &device;
      }
      return slot.dev;
    };
    // Empty transfers copy nothing: no device call, no event (an event must be signalled).
    const size_t transfer_bytes =
        step.kind == StepKind::Patch
            ? 0
            : static_cast<size_t>(st.types[slots_[step.out_slots[0]].value].bytes());
    std::shared_ptr<Event> event;
    if (!device.synchronous() && (step.kind == StepKind::Patch || transfer_bytes))
      event = device.create_event();
    uint64_t start = host_now_ns();
    if (step.kind == StepKind::Patch) {
      std::vector<void*> ins, outs;
      for (int s : step.in_slots) ins.push_back(input_ptr(s));
      for (int s : step.out_slots) outs.push_back(allocate(s));
      std::vector<std::vector<int64_t>> dims;
      std::vector<quilt_tensor_info_t> infos;
      if (!infos_given) {
        dims.resize(step.abi_values.size());
        infos.resize(step.abi_values.size());
        for (size_t a = 0; a < step.abi_values.size(); ++a) {
          const int v = step.abi_values[a];
          infos[a] = tensor_info(
              constants_[v].defined() ? TypeShape::of(constants_[v]) : st.types[v], dims[a]);
        }
      }
      start = host_now_ns();  // after the host-side waits for inputs of other devices
      quilt_execute_args_t args{};
      args.struct_size = sizeof(args);
      args.values = infos_given ? infos_given : infos.data();
      args.inputs = ins.data();
      args.outputs = outs.data();
      args.wait_events = waits.data();
      args.num_wait_events = waits.size();
      args.signal_event = event ? event->handle() : nullptr;
      args.run = device.brackets_runs() ? st.run : 0;
      if (st.profiling) {
        std::lock_guard lock(st.mutex);
        st.timing_contexts.push_back(std::make_unique<RunState::NodeTimingContext>(
            RunState::NodeTimingContext{&st, &step.node_labels, device.name(), {}}));
        args.node_timing_context = st.timing_contexts.back().get();
        args.node_timing = [](void* context, size_t node, uint64_t start, uint64_t end) {
          auto* c = static_cast<RunState::NodeTimingContext*>(context);
          if (node >= c->names->size()) return;
          std::lock_guard lock(c->st->mutex);
          std::string detail;
          if (node < c->details.size()) detail = std::move(c->details[node]);
          c->st->node_spans.push_back(
              {(*c->names)[node], c->lane, "node", start, end, std::move(detail)});
        };
        args.node_detail = [](void* context, size_t node, const char* detail) {
          auto* c = static_cast<RunState::NodeTimingContext*>(context);
          if (node >= c->names->size() || !detail) return;
          std::lock_guard lock(c->st->mutex);
          if (c->details.size() <= node) c->details.resize(c->names->size());
          c->details[node] = detail;
        };
      }
      device.execute(*step.exe, args, "");
    } else if (step.kind == StepKind::Upload) {
      const int src = step.in_slots[0];
      st.wait_ready(src, step.label);
      const Tensor& host = host_value(st, src, constants_);
      void* dst = allocate(step.out_slots[0]);
      if (transfer_bytes)
        device.copy_to_device(dst, host.raw_data(), transfer_bytes, {}, event.get(), tag);
    } else if (step.kind == StepKind::DeviceCopy) {
      const void* src = input_ptr(step.in_slots[0]);  // waits for the source device's event
      void* dst = allocate(step.out_slots[0]);
      if (transfer_bytes)
        device.copy_from_device(dst, *devices_[step.source_device], src, transfer_bytes, waits,
                                event.get(), tag);
    } else {  // Download
      const void* src = input_ptr(step.in_slots[0]);
      void* dst = allocate(step.out_slots[0]);
      if (transfer_bytes) device.copy_to_host(dst, src, transfer_bytes, waits, event.get(), tag);
    }
    const uint64_t end = host_now_ns();
    if (st.profiling || event) {
      std::lock_guard lock(st.mutex);
      const char* kind = step.kind == StepKind::Patch ? "patch" : "transfer";
      st.spans.push_back({{step.label, device.name(), kind, start, end, {}}, event});
    }
    st.publish(step.out_slots, device.synchronous() ? nullptr : event);
  } catch (const Error& e) {
    // A backend that names the failing node (`[Relu node "r"] ...`, as the CPU does) has said
    // where; any other message gets the step it failed in.
    const std::string what = e.what();
    bool names_node = false;
    for (const auto& label : step.node_labels)
      names_node = names_node || what.rfind("[" + label + "]", 0) == 0;
    st.fail(std::make_exception_ptr(
        names_node || what.rfind(tag, 0) == 0 ? e : Error(e.code(), tag + " " + what)));
  } catch (...) {
    try {
      rethrow_with(step.label);
    } catch (...) {
      st.fail(std::current_exception());
    }
  }
}

void ExecutionPlan::run_host_step(const Step& step, RunState& st) const {
  const uint64_t start = host_now_ns();
  std::vector<Value> in;
  for (int s : step.in_slots) {
    if (s < 0) {
      in.emplace_back();
      continue;
    }
    st.wait_ready(s, step.label);
    in.push_back(any_value(st, s, constants_));
  }
  std::vector<Value> results;
  try {
    results = step.host_kind == HostKind::Op
                  ? step.host_kernel(
                        *step.nodes[0].node,
                        {in.begin(), in.begin() + static_cast<long>(step.nodes[0].inputs.size())})
                  : run_control_flow(step, in);
  } catch (...) {
    rethrow_with(step.nodes[0].node->display());
  }
  for (size_t i = 0; i < step.out_slots.size(); ++i) {
    const int s = step.out_slots[i];
    if (s < 0) continue;
    if (results[i].is_tensor()) {
      st.slots[s].host = results[i].tensor();
      st.types.set_of(static_cast<size_t>(slots_[s].value), results[i].tensor());
    } else {
      st.slots[s].value = results[i];
    }
  }
  if (st.profiling) {
    std::lock_guard lock(st.mutex);
    st.spans.push_back({{step.label, "host", "host", start, host_now_ns(), {}}, nullptr});
  }
  st.publish(step.out_slots, nullptr);
}

void ExecutionPlan::execute(RunState& st, const std::vector<int>& wanted,
                            RunProfile* profile) const {
  st.profiling = profile != nullptr;
  st.inline_run = inline_;
  // Lanes (asynchronous devices) read this run's types while this thread sets later ones.
  if (!inline_) st.types.own_all();
  // The steps the wanted values need.
  std::vector<char> needed_slot(slots_.size(), 0);
  for (int s : wanted) needed_slot[s] = 1;
  std::vector<char> run_step(steps_.size(), 0);
  for (size_t s = steps_.size(); s-- > 0;) {
    for (int o : steps_[s].out_slots)
      if (o >= 0 && needed_slot[o]) run_step[s] = 1;
    if (!run_step[s]) continue;
    for (int i : steps_[s].in_slots)
      if (i >= 0) needed_slot[i] = 1;
    for (int v : steps_[s].value_inputs) needed_slot[v] = 1;
  }
  // Inline runs release host buffers after their last use.
  std::vector<int> uses(slots_.size(), 0);
  std::vector<char> keep(slots_.size(), 0);
  for (int s : wanted) keep[s] = 1;
  if (inline_)
    for (size_t s = 0; s < steps_.size(); ++s)
      if (run_step[s])
        for (int i : steps_[s].in_slots)
          if (i >= 0) ++uses[i];

  // ABI 1.2: devices whose backend brackets runs hear of this one before its first operation
  // on them, and (below) after the last has completed and its buffers are freed.
  static std::atomic<uint64_t> next_run{1};
  st.run = next_run.fetch_add(1);
  std::vector<const Device*> begun;
  {
    std::vector<char> used(devices_.size(), 0);
    for (size_t s = 0; s < steps_.size(); ++s)
      if (run_step[s] && steps_[s].kind != StepKind::Host) used[steps_[s].device] = 1;
    for (size_t d = 0; d < devices_.size(); ++d) {
      if (!used[d] || !devices_[d]->brackets_runs()) continue;
      try {
        devices_[d]->run_begin(st.run);
      } catch (...) {
        for (const Device* b : begun) b->run_end(st.run);
        throw;
      }
      begun.push_back(devices_[d].get());
    }
  }

  std::vector<std::unique_ptr<Lane>> lanes(devices_.size());
  auto lane = [&](int d) -> Lane& {
    if (!lanes[d]) lanes[d] = lane_pool_->take();
    return *lanes[d];
  };
  for (size_t s = 0; s < steps_.size() && !st.failed; ++s) {
    if (!run_step[s]) continue;
    const Step& step = steps_[s];
    const quilt_tensor_info_t* infos = nullptr;  // a patch's, when infer_patch has them
    try {
      switch (step.kind) {
        case StepKind::Patch:
          try {
            infos = infer_patch(step, st);
          } catch (...) {
            rethrow_with(step.label);
          }
          [[fallthrough]];
        case StepKind::Upload:
        case StepKind::Download:
        case StepKind::DeviceCopy:
          if (inline_) {
            issue(step, st, infos);
          } else {
            lane(step.device).push([this, &step, &st, infos] { issue(step, st, infos); });
          }
          break;
        case StepKind::Host:
          run_host_step(step, st);
          break;
      }
    } catch (...) {
      st.fail(std::current_exception());
      break;
    }
    if (inline_)
      for (int i : step.in_slots)
        if (i >= 0 && --uses[i] == 0 && !keep[i]) {
          st.slots[i].host = Tensor();
          st.slots[i].value = Value();
        }
  }
  if (!st.failed) {
    try {
      for (int s : wanted) st.wait_ready(s, "output '" + names_[slots_[s].value] + "'");
    } catch (...) {
      st.fail(std::current_exception());
    }
  }
  for (auto& l : lanes)
    if (l) {
      l->drain();
      lane_pool_->give(std::move(l));
    }
  // Nothing may still run on memory about to be freed. Every event is in st.spans, in issue
  // order: the first that failed is the root cause (later ones fail as its dependents).
  std::exception_ptr root;
  for (auto& rec : st.spans)
    if (rec.event) {
      try {
        rec.event->wait("[" + rec.span.name + "]");
      } catch (...) {
        if (!root) root = std::current_exception();
      }
    }
  if (root) st.error = root;
  if (profile) {
    for (auto& rec : st.spans) {
      uint64_t a = 0, b = 0;
      if (rec.event && !rec.event->device().synchronous() && rec.event->timestamps(&a, &b)) {
        rec.span.start_ns = a;
        rec.span.end_ns = b;
      }
      profile->spans.push_back(rec.span);
    }
    std::lock_guard lock(st.mutex);
    profile->spans.insert(profile->spans.end(), st.node_spans.begin(), st.node_spans.end());
  }
  for (auto& slot : st.slots) {
    slot.event.reset();
    if (slot.dev) slot.owner->free(slot.dev);
    slot.dev = nullptr;
  }
  for (const Device* b : begun) b->run_end(st.run);
  st.spans.clear();
  st.node_spans.clear();
  if (st.error) std::rethrow_exception(st.error);
}

void ExecutionPlan::check_input(const ValueInfo& info, const Value& value) const {
  const std::string where = "input '" + info.name + "'";
  if (!value.is_tensor() || info.kind != ValueKind::Tensor) {
    // Sequences, maps and optionals: the kinds and element types must match the declaration.
    const std::string given =
        value.is_tensor() && !value.defined() ? "an undefined tensor" : value.type_string();
    std::function<bool(const ValueInfo&, const Value&)> fits = [&](const ValueInfo& d,
                                                                   const Value& v) {
      if (d.kind != v.kind()) return false;
      switch (d.kind) {
        case ValueKind::Tensor:
          return d.dtype == DType::Undefined || d.dtype == v.tensor().dtype();
        case ValueKind::Sequence:
          if (!d.element) return true;
          if (v.items().empty())
            return v.element_dtype() == DType::Undefined || d.element->kind != ValueKind::Tensor ||
                   d.element->dtype == DType::Undefined || d.element->dtype == v.element_dtype();
          return fits(*d.element, v.items()[0]);
        case ValueKind::Map:
          return (d.key_dtype == DType::Undefined || d.key_dtype == v.keys().dtype()) &&
                 (!d.element || d.element->dtype == DType::Undefined ||
                  d.element->dtype == v.values().dtype());
        case ValueKind::Optional:
          return !d.element || !v.has_element() || fits(*d.element, v.element());
      }
      return false;
    };
    if (!value.defined() || !fits(info, value))
      throw Error(ErrorCode::InvalidArgument,
                  where + " is " + given + ", expected " + type_string(info));
    if (value.is_tensor()) check_input(info, value.tensor());
    return;
  }
  check_input(info, value.tensor());
}

void ExecutionPlan::check_input(const ValueInfo& info, const Tensor& t) const {
  const std::string where = "input '" + info.name + "'";
  if (!t.defined()) throw Error(ErrorCode::InvalidArgument, where + " is an empty tensor");
  if (info.dtype != DType::Undefined && t.dtype() != info.dtype)
    throw Error(ErrorCode::InvalidArgument, where + " has dtype " + dtype_name(t.dtype()) +
                                                ", expected " + dtype_name(info.dtype));
  if (!info.has_shape) return;
  if (t.rank() != static_cast<int64_t>(info.shape.size()))
    throw Error(ErrorCode::InvalidArgument,
                where + " has rank " + std::to_string(t.rank()) + " (shape " +
                    to_string(t.shape()) + "), expected rank " + std::to_string(info.shape.size()) +
                    " " + to_string(info.shape));
  for (size_t i = 0; i < info.shape.size(); ++i)
    if (info.shape[i].is_fixed() && info.shape[i].value != t.shape()[i])
      throw Error(ErrorCode::InvalidArgument, where + " has shape " + to_string(t.shape()) +
                                                  ", expected " + to_string(info.shape) + ": dim " +
                                                  std::to_string(i) + " is " +
                                                  std::to_string(t.shape()[i]) + ", expected " +
                                                  std::to_string(info.shape[i].value));
}

namespace {
// Every tensor v holds (a sequence's items, a map's keys and values, an optional's element).
void for_each_tensor(const Value& v, const std::function<void(const Tensor&)>& fn) {
  switch (v.kind()) {
    case ValueKind::Tensor:
      if (v.tensor().defined()) fn(v.tensor());
      break;
    case ValueKind::Sequence:
      for (const Value& item : v.items()) for_each_tensor(item, fn);
      break;
    case ValueKind::Map:
      fn(v.keys());
      fn(v.values());
      break;
    case ValueKind::Optional:
      if (v.has_element()) for_each_tensor(v.element(), fn);
  }
}
}  // namespace

Value ExecutionPlan::detach(const Value& v, const std::vector<const Tensor*>& tensors) const {
  if (v.is_tensor()) return detach(v.tensor(), tensors);
  // A sequence or map that holds a constant or one of the caller's tensors is copied whole;
  // one the run made is handed over as it is (a ZipMap's sequence of maps was cloned map by
  // map at every run).
  bool borrowed = false;
  for_each_tensor(v, [&](const Tensor& t) { borrowed = borrowed || this->borrowed(t, tensors); });
  return borrowed ? v.clone() : v;
}

bool ExecutionPlan::borrowed(const Tensor& t, const std::vector<const Tensor*>& inputs) const {
  for (const auto& c : constants_)
    if (c.defined() && t.shares_storage_with(c)) return true;
  for (const auto& c : defaults_)
    if (c.defined() && t.shares_storage_with(c)) return true;
  for (const Tensor* in : inputs)
    if (in && t.shares_storage_with(*in)) return true;
  return false;
}

Tensor ExecutionPlan::detach(const Tensor& t, const std::vector<const Tensor*>& inputs) const {
  return borrowed(t, inputs) ? t.clone() : t;
}

namespace {
void set_host(RunState& st, int v, const Tensor& t) {
  st.slots[v].host = t;
  st.slots[v].issued = true;
  if (t.defined()) st.types.set_of(static_cast<size_t>(v), t);
}
void set_host(RunState& st, int v, const Value& value) {
  if (value.is_tensor()) return set_host(st, v, value.tensor());
  st.slots[v].value = value;
  st.slots[v].issued = true;
}
}  // namespace

TensorMap ExecutionPlan::run(const TensorMap& inputs, const std::vector<std::string>& output_names,
                             RunProfile* profile) const {
  ValueMap values(inputs.begin(), inputs.end());
  TensorMap result;
  for (auto& [name, value] : run_values(values, output_names, profile)) {
    if (!value.is_tensor())
      throw Error(ErrorCode::InvalidArgument, "output '" + name + "' is " + value.type_string() +
                                                  ", not a tensor: run it with run_values()");
    result[name] = value.tensor();
  }
  return result;
}

ValueMap ExecutionPlan::run_values(const ValueMap& inputs,
                                   const std::vector<std::string>& output_names,
                                   RunProfile* profile) const {
  RunState st(static_types_);
  st.slots.resize(slots_.size());
  for (size_t v = 0; v < names_.size(); ++v) {
    if (constants_[v].defined()) st.slots[v].issued = true;  // read in place (host_value)
    if (defaults_[v].defined()) set_host(st, static_cast<int>(v), defaults_[v]);
  }
  for (const auto& [name, tensor] : inputs) {
    auto in = std::find_if(inputs_.begin(), inputs_.end(), [&name = name](const ValueInfo& v) {
      return v.name == name;
    });  // (an explicit capture: clang before 16 cannot capture a structured binding)
    if (in == inputs_.end()) {
      if (std::find(overridable_.begin(), overridable_.end(), name) != overridable_.end()) {
        const int id = ids_.at(name);
        if (!defaults_[id].defined())
          throw Error(ErrorCode::InvalidArgument,
                      "input '" + name +
                          "' is an initializer of a model of IR version < 4, where every "
                          "initializer is listed as an input; it cannot be overridden");
        const Tensor& init = defaults_[id];
        if (!tensor.is_tensor())
          throw Error(ErrorCode::InvalidArgument,
                      "input '" + name + "' overrides a tensor but is " + tensor.type_string());
        if (tensor.tensor().dtype() != init.dtype() || tensor.tensor().shape() != init.shape())
          throw Error(ErrorCode::InvalidArgument,
                      "input '" + name + "' overrides an initializer of " +
                          dtype_name(init.dtype()) + to_string(init.shape()) + " but has " +
                          dtype_name(tensor.tensor().dtype()) + to_string(tensor.tensor().shape()));
        set_host(st, id, tensor);
        continue;
      }
      std::string known;
      for (const auto& v : inputs_) known += std::string(known.empty() ? "" : ", ") + v.name;
      throw Error(ErrorCode::InvalidArgument,
                  "unknown input '" + name + "'; the model's inputs are: " + known);
    }
    check_input(*in, tensor);
    set_host(st, ids_.at(name), tensor);
  }
  for (const auto& in : inputs_)
    if (!inputs.count(in.name))
      throw Error(ErrorCode::InvalidArgument,
                  "missing input '" + in.name + "' (" +
                      (in.kind == ValueKind::Tensor
                           ? std::string(dtype_name(in.dtype)) + " " + to_string(in.shape)
                           : type_string(in)) +
                      ")");

  std::vector<std::string> wanted = output_names;
  if (wanted.empty())
    for (const auto& o : outputs_) wanted.push_back(o.name);
  std::vector<int> wanted_ids;
  for (const auto& name : wanted) {
    bool is_output = std::any_of(outputs_.begin(), outputs_.end(),
                                 [&](const ValueInfo& v) { return v.name == name; });
    if (!is_output) {
      std::string known;
      for (const auto& v : outputs_) known += std::string(known.empty() ? "" : ", ") + v.name;
      throw Error(ErrorCode::InvalidArgument,
                  "unknown output '" + name + "'; the model's outputs are: " + known);
    }
    wanted_ids.push_back(ids_.at(name));
  }
  execute(st, wanted_ids, profile);

  std::vector<const Tensor*> caller;  // the caller's tensors, also inside its sequences and maps
  for (const auto& [_, in] : inputs)
    for_each_tensor(in, [&](const Tensor& t) { caller.push_back(&t); });
  ValueMap result;
  for (const auto& name : wanted)
    result[name] = detach(any_value(st, ids_.at(name), constants_), caller);
  return result;
}

std::vector<Value> ExecutionPlan::run_subgraph(const std::vector<Value>& formal,
                                               const std::map<std::string, Value>& outer) const {
  RunState st(static_types_);
  st.slots.resize(slots_.size());
  for (size_t v = 0; v < names_.size(); ++v)
    if (constants_[v].defined()) st.slots[v].issued = true;  // read in place (host_value)
  for (size_t i = 0; i < formal_.size(); ++i)
    set_host(st, ids_.at(formal_[i]), i < formal.size() ? formal[i] : Value());
  for (const auto& name : outer_) {
    auto it = outer.find(name);
    if (it == outer.end())
      throw Error(ErrorCode::Runtime,
                  where_ + ": outer-scope value '" + name + "' is not available");
    set_host(st, ids_.at(name), it->second);
  }
  std::vector<int> wanted;
  for (const auto& o : outputs_) wanted.push_back(ids_.at(o.name));
  execute(st, wanted, nullptr);
  std::vector<Value> out;
  for (int id : wanted) {
    const Value value = any_value(st, id, constants_);
    if (!value.defined())
      throw Error(ErrorCode::Runtime, where_ + ": output '" + names_[id] + "' has no value");
    out.push_back(detach(value, {}));
  }
  return out;
}

}  // namespace quilt

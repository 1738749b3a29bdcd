// A fixed pool of worker threads for data-parallel loops. The calling thread takes part.
// When another run already uses the pool, parallel_for runs inline instead of waiting, so
// concurrent Session::run calls never deadlock or queue behind each other.
//
// Workers spin (yielding the core to anything runnable) for a short while after a job before
// they sleep, and the caller spins before it sleeps on the job's end: during a run, loops come
// back to back, and a futex wake-up costs tens to hundreds of microseconds on a virtual machine
// — more than a small loop's whole work (measured: a 64 x 3136 x 576 GEMM split in two ran at
// one core's speed because the second thread woke too late).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace quilt::cpu {

// A callable's address and a call through it, owning nothing: the loop bodies handed to the pool
// live on the caller's stack for the whole call. std::function allocated for every closure
// beyond two captures, four times per parallel_for (a fifth of MNIST's allocations per run).
template <class Signature>
class FunctionRef;
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): converts at every call site
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }
  // Calls fn(begin, end) over disjoint ranges covering [0, n). Ranges have at least `grain`
  // items (except the last), so small loops stay on the calling thread. The ranges are dealt
  // as for_each_task's tasks: the first ones to the calling thread.
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) const;
  // Calls fn(t) once for every t in [0, tasks). The tasks are dealt in threads() contiguous
  // ranges: the calling thread starts on the first, each worker on another, and a thread done
  // with its own range takes the rest of the others'. So, when the threads keep pace, the same
  // thread runs the same tasks call after call, and a product's columns are read next by the
  // core that wrote them (ResNet-50 at 2 threads: 26.2 -> 24.9 ms against tasks claimed in one
  // queue); a late-waking worker's range is still taken over.
  void for_each_task(int64_t tasks, FunctionRef<void(int64_t)> fn) const;
  // The fewest multiply-adds (or comparable steps) a loop should have before it is split across
  // the pool. When every worker is awake (spinning after a job: during a run, loops come back to
  // back), handing one a share costs under half a microsecond (AMD EPYC: the worker starts 0.25
  // us after the job is posted, the caller returns 0.15 us after the last task ends); when one
  // sleeps, waking it costs tens to hundreds of microseconds on a virtual machine, and a loop
  // under ~1M multiply-adds is done before it arrives.
  int64_t split_work() const;
  // Wakes the workers that sleep, without a job: they spin for the next one. Called when a run
  // starts whose loops are worth sharing, so that they are awake by its first split loop.
  void wake() const;

 private:
  // fn(c, c + 1) for each c in [0, n), each chunk claimed by one thread; chunk 0 on the calling
  // thread. n < 2^16.
  void run_chunks(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) const;
  void worker_loop();
  // Claims and runs chunks of the job of generation `generation` until none is left.
  void work_on(uint64_t generation) const;
  void run_chunk(int64_t c) const;

  // A job is posted without a lock: the caller writes job_ and then one word holding the
  // generation (32 bits), the chunk count (16) and the next chunk to claim (16); a thread claims
  // a chunk by a compare-and-swap on the word that keeps the generation, so a claim can only
  // succeed on the job it read, and job_ is read after the claim (the job cannot end before the
  // claimed chunk does). Before, the job sat under a mutex that the worker had to lock after
  // seeing it posted, sometimes while the caller still held it (a futex sleep and wake-up).
  // ThreadPool.DISABLED_Latency, AMD EPYC, idle: the worker started 0.3-0.65 us after the call
  // (median; p90 0.7-0.78), now 0.20 (p90 0.23); a call of two chunks cost its work plus
  // 0.8 us, now plus 0.3. At 2 threads, 3 alternating rounds: the keyword spotter
  // 0.0301-0.0302 -> 0.0279-0.0293 ms, the 3-layer MLP 0.0107-0.0116 -> 0.0092-0.0096.
  static constexpr int kChunkBits = 16;
  static uint64_t generation_of(uint64_t word) { return word >> (2 * kChunkBits); }
  static int64_t chunks_of(uint64_t word) {
    return static_cast<int64_t>((word >> kChunkBits) & ((1u << kChunkBits) - 1));
  }
  static int64_t next_of(uint64_t word) {
    return static_cast<int64_t>(word & ((1u << kChunkBits) - 1));
  }

  int threads_;
  std::vector<std::thread> workers_;
  mutable std::mutex busy_;  // held by the caller that owns the pool during a parallel_for
  mutable const FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;  // the caller's, see above
  mutable uint64_t posted_ = 0;                                       // the caller's generation
  // Each on its own cache line: the workers spin on word_, the caller on finished_.
  alignas(64) mutable std::atomic<uint64_t> word_{0};
  alignas(64) mutable std::atomic<int64_t> finished_{0};
  alignas(64) mutable std::atomic<bool> failed_{false};  // error_ is set
  // Sleeping (the slow path only): workers wait on wake_ after kSpin without a job, the caller
  // on done_ after kSpin without the job's end. mutex_ guards the waits and error_.
  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;
  mutable std::condition_variable done_;
  mutable std::atomic<bool> caller_asleep_{false};
  mutable uint64_t pokes_ = 0;  // wake() calls, under mutex_
  std::atomic<int> asleep_{0};  // workers waiting on wake_
  mutable std::exception_ptr error_;
  std::atomic<bool> stop_{false};
};

// Working buffers of a kernel run: per thread and slot, 64-byte aligned, grown to the largest
// request and kept for the thread's life. Allocating them per run page-faulted them in every
// time; taking them from the tensor buffer cache (then 64 MB) filled it with input-sized copies
// on YOLOv5s (many distinct sizes), so the activations' own buffers fell out of it and were
// faulted in every run (59 -> 66 ms). Slots: 0 a conv's shifted input, 1 its wide product,
// 2 gemm_channels' accumulators, 3 the packed GEMM's A packed for one call, 4 its B panel,
// 5 a depthwise conv's band (or its flattened narrow planes), 6 a separable pooling's row maxima,
// 7 the bfloat16 GEMM's B panels, 8 its left operand converted for one call (gemm_bf16.cpp),
// 9 a blocked-layout conv's input offsets per depth step (kernels/conv_blocked.cpp; slots 2 and
// 5 hold its sums and its pixels' offsets).
// Throws std::bad_alloc when memory runs out (never aborts: thread_pool.cpp says why these are not
// C++ thread_locals).
constexpr int kScratchSlots = 10;
float* thread_scratch(int slot, int64_t count);
void* thread_scratch_bytes(int slot, size_t bytes);

}  // namespace quilt::cpu

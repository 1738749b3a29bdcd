#include "backends/cpu/thread_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <utility>

namespace quilt::cpu {
namespace {

// How long a thread spins for the next job (worker) or the job's end (caller) before sleeping.
constexpr auto kSpin = std::chrono::microseconds(300);

// Spins until done() or kSpin passes; returns done().
template <class Done>
bool spin_until(Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 15) == 15) {
      if (std::chrono::steady_clock::now() > until) return done();
      sched_yield();  // let another runnable thread (BLAS, another session) have the core
    } else {
      __builtin_ia32_pause();
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::clamp(threads, 1, (1 << kChunkBits) - 1)) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunk(int64_t c) const {
  try {
    (*job_)(c, c + 1);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_relaxed);  // published by finished_ below
  }
  finished_.fetch_add(1);
  // The caller sleeps only after it stored caller_asleep_ and then found the job unfinished;
  // both sides use sequentially consistent operations, so either it sees this chunk finished or
  // this thread sees it asleep (and wakes it to look again).
  if (caller_asleep_.load()) {
    std::lock_guard lock(mutex_);
    done_.notify_all();
  }
}

void ThreadPool::work_on(uint64_t generation) const {
  uint64_t word = word_.load(std::memory_order_acquire);
  while (generation_of(word) == generation && next_of(word) < chunks_of(word)) {
    if (word_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                    std::memory_order_acquire))
      run_chunk(next_of(word));  // word holds the value before the claim
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  auto posted = [&] { return generation_of(word_.load(std::memory_order_acquire)) != seen; };
  while (true) {
    if (!spin_until([&] { return stop_.load(std::memory_order_relaxed) || posted(); })) {
      std::unique_lock lock(mutex_);
      const uint64_t poked = pokes_;
      // Sleeps only after counting itself asleep and then finding no job; run_chunks posts and
      // then reads asleep_ (both sequentially consistent): it sees this thread or it is seen.
      ++asleep_;
      wake_.wait(lock, [&] { return stop_ || posted() || pokes_ != poked; });
      --asleep_;
    }
    if (stop_) return;
    if (!posted()) continue;  // woken by wake(): spin for the next job
    seen = generation_of(word_.load(std::memory_order_acquire));
    work_on(seen);
  }
}

void ThreadPool::wake() const {
  if (asleep_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard lock(mutex_);
    ++pokes_;
  }
  wake_.notify_all();
}

int64_t ThreadPool::split_work() const {
  if (threads_ == 1) return std::numeric_limits<int64_t>::max();
  // Awake: 64K multiply-adds, about 0.7 us on one core. At 2 threads on the AMD EPYC (idle,
  // alternating rounds against 1M awake or asleep): the keyword spotter 0.0766 -> 0.070 ms, the
  // 3-layer MLP 0.0223 -> 0.0155, the OCR classifier 0.477 -> 0.454, MNIST 0.0277 -> 0.0262; 16K
  // measured the same as 64K. Asleep: 1M (mnist's 16 x 196 x 200 conv took 43 us split, 25
  // alone, when its worker had to be woken).
  constexpr int64_t kAwake = int64_t{1} << 16, kAsleep = int64_t{1} << 20;
  return asleep_.load(std::memory_order_relaxed) == 0 ? kAwake : kAsleep;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              FunctionRef<void(int64_t, int64_t)> fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = std::min<int64_t>((n + grain - 1) / grain, threads_ * 4);
  if (threads_ == 1 || max_chunks <= 1) {
    fn(0, n);
    return;
  }
  // Chunks in per-thread ranges (for_each_task): the same thread takes the same part of a
  // tensor op after op, so it reads what it wrote. From one shared queue the threads took
  // alternate chunks, and half of every input came from the other core's cache.
  const int64_t chunk = (n + max_chunks - 1) / max_chunks;
  for_each_task((n + chunk - 1) / chunk,
                [&](int64_t c) { fn(c * chunk, std::min(n, (c + 1) * chunk)); });
}

void ThreadPool::run_chunks(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) const {
  if (threads_ == 1 || n <= 1) {
    fn(0, n);
    return;
  }
  std::unique_lock owner(busy_, std::try_to_lock);
  if (!owner.owns_lock()) {  // another thread is using the pool: run inline
    fn(0, n);
    return;
  }
  // No thread is in a job now: the last one ended with all its chunks finished, and a worker
  // that read its word can claim nothing from it (the generation changes below).
  job_ = &fn;
  finished_.store(0, std::memory_order_relaxed);
  posted_ = posted_ % 0xffffffffu + 1;  // 1 .. 2^32 - 1: a worker starts having seen 0
  const uint64_t generation = posted_;
  // Chunk 0 is the caller's: the word says chunk 1 is the next to claim.
  word_.store(generation << (2 * kChunkBits) | static_cast<uint64_t>(n) << kChunkBits | 1);
  if (asleep_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  run_chunk(0);
  work_on(generation);
  if (!spin_until([&] { return finished_.load() == n; })) {
    std::unique_lock lock(mutex_);
    caller_asleep_.store(true);
    done_.wait(lock, [&] { return finished_.load() == n; });
    caller_asleep_.store(false);
  }
  job_ = nullptr;
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    failed_.store(false, std::memory_order_relaxed);
    std::rethrow_exception(std::exchange(error_, nullptr));
  }
}

void ThreadPool::for_each_task(int64_t tasks, FunctionRef<void(int64_t)> fn) const {
  const int64_t ranges = std::min<int64_t>(threads_, tasks);
  if (ranges <= 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  struct alignas(64) Range {  // a line each: the threads claim from their own without sharing
    std::atomic<int64_t> next;
    int64_t end;
  };
  std::array<Range, 8> local;  // on the stack for up to 8 threads
  std::unique_ptr<Range[]> heap(ranges > 8 ? new Range[static_cast<size_t>(ranges)] : nullptr);
  Range* range = heap ? heap.get() : local.data();
  for (int64_t r = 0; r < ranges; ++r) {
    range[r].next = r * tasks / ranges;
    range[r].end = (r + 1) * tasks / ranges;
  }
  // run_chunks' chunk 0 runs on the calling thread (it claims it before any worker can).
  run_chunks(ranges, [&](int64_t first, int64_t last) {
    for (int64_t own = first; own < last; ++own)
      for (int64_t v = 0; v < ranges; ++v) {
        Range& r = range[(own + v) % ranges];
        for (int64_t t = r.next++; t < r.end; t = r.next++) fn(t);
      }
  });
}

namespace {

// The per-thread buffers hang off a pthread key, not a C++ thread_local with a destructor: glibc
// registers such a destructor (__cxa_thread_atexit) with a calloc the first time a thread touches
// the object, and when that calloc fails it aborts the process ("failed to register TLS
// destructor") instead of letting the allocation fail. Under an address-space cap, the first
// GEMM of a pool worker did exactly that. pthread_setspecific on one of the first 32 keys needs
// no allocation, and reports ENOMEM otherwise; the thread_local below is a plain pointer.
struct ScratchBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};
struct ThreadScratch {
  std::array<ScratchBuffer, kScratchSlots> slots;
  ~ThreadScratch() {
    for (auto& s : slots) std::free(s.data);
  }
};

pthread_key_t scratch_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    if (pthread_key_create(&k, [](void* p) { delete static_cast<ThreadScratch*>(p); }) != 0)
      throw std::bad_alloc();
    return k;
  }();
  return key;
}

ThreadScratch& this_thread_scratch() {
  thread_local ThreadScratch* mine = nullptr;  // owned by the key: freed at thread exit
  if (!mine) {
    const pthread_key_t key = scratch_key();
    auto owned = std::make_unique<ThreadScratch>();
    if (pthread_setspecific(key, owned.get()) != 0) throw std::bad_alloc();
    mine = owned.release();
  }
  return *mine;
}

}  // namespace

void* thread_scratch_bytes(int slot, size_t bytes) {
  ScratchBuffer& b = this_thread_scratch().slots.at(static_cast<size_t>(slot));
  if (b.bytes < bytes || !b.data) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::free(b.data);
    b.data = p;
    b.bytes = rounded;
  }
  return b.data;
}

float* thread_scratch(int slot, int64_t count) {
  return static_cast<float*>(
      thread_scratch_bytes(slot, static_cast<size_t>(count) * sizeof(float)));
}

}  // namespace quilt::cpu

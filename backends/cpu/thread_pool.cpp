#include "backends/cpu/thread_pool.hpp"

#include <algorithm>
#include <utility>

namespace quilt::cpu {

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
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

void ThreadPool::work_on_current_job() const {
  // Called with mutex_ held; releases it while running chunks.
  while (job_ && next_chunk_ < chunks_) {
    int64_t c = next_chunk_++;
    const auto* fn = job_;
    int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
    mutex_.unlock();
    std::exception_ptr error;
    try {
      (*fn)(begin, end);
    } catch (...) {
      error = std::current_exception();
    }
    mutex_.lock();
    if (error && !error_) error_ = error;
    if (++finished_ == chunks_) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  std::unique_lock lock(mutex_);
  uint64_t seen = 0;
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    work_on_current_job();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = std::min<int64_t>((n + grain - 1) / grain, threads_ * 4);
  if (threads_ == 1 || max_chunks <= 1) {
    fn(0, n);
    return;
  }
  std::unique_lock owner(busy_, std::try_to_lock);
  if (!owner.owns_lock()) {  // another thread is using the pool: run inline
    fn(0, n);
    return;
  }
  std::unique_lock lock(mutex_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = (n + max_chunks - 1) / max_chunks;
  chunks_ = (n + job_chunk_ - 1) / job_chunk_;
  next_chunk_ = 0;
  finished_ = 0;
  ++generation_;
  wake_.notify_all();
  error_ = nullptr;
  work_on_current_job();
  done_.wait(lock, [&] { return finished_ == chunks_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace quilt::cpu

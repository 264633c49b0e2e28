// A small fork-aware thread pool for the CPU kernels.
//
// The kernels used OpenMP's runtime before; GCC's libgomp hangs when a process that has used
// it forks and the child enters a parallel region again, which is exactly what MDAnalysis's
// 'multiprocessing' backend does after any serial run in the same script (seen on a 16-core
// machine). This pool records the process that made it: a forked child finds a pool whose
// threads do not exist in it, abandons it (without touching its locks, which may have been
// held at the fork) and makes its own.
#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sched.h>
#include <unistd.h>

#include "fastrdf/cpu.hpp"

namespace fastrdf {
namespace cpu {

namespace {

class Pool {
   public:
    explicit Pool(int n_workers) : pid_(getpid()) {
        for (int k = 0; k < n_workers; ++k) threads_.emplace_back([this, k] { work(k + 1); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : threads_) t.join();
    }
    pid_t pid() const { return pid_; }
    int workers() const { return static_cast<int>(threads_.size()); }

    // fn(tid) on the caller (tid 0) and on n - 1 workers; returns when all are done.
    void run(int n, const std::function<void(int)>& fn) {
        {
            std::lock_guard<std::mutex> lock(m_);
            fn_ = &fn;
            active_ = n - 1;
            remaining_ = n - 1;
            ++generation_;
        }
        wake_.notify_all();
        fn(0);
        std::unique_lock<std::mutex> lock(m_);
        done_.wait(lock, [this] { return remaining_ == 0; });
        fn_ = nullptr;
    }

   private:
    void work(int tid) {
        unsigned long long seen = 0;
        for (;;) {
            const std::function<void(int)>* fn;
            {
                std::unique_lock<std::mutex> lock(m_);
                wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
                if (tid > active_) continue;  // not needed this time
                fn = fn_;
            }
            (*fn)(tid);
            {
                std::lock_guard<std::mutex> lock(m_);
                if (--remaining_ == 0) done_.notify_one();
            }
        }
    }

    pid_t pid_;
    std::vector<std::thread> threads_;
    std::mutex m_;
    std::condition_variable wake_, done_;
    const std::function<void(int)>* fn_ = nullptr;
    unsigned long long generation_ = 0;
    int active_ = 0, remaining_ = 0;
    bool stop_ = false;
};

// Per-process state: a forked child finds the parent's (whose threads it lacks and whose
// lock may be held forever), abandons it and makes its own.
struct ProcessState {
    pid_t pid = getpid();
    std::mutex m;  // one frame at a time per process (also serialises Python threads)
    Pool* pool = nullptr;
};
ProcessState* g_state = nullptr;

}  // namespace

int hardware_threads() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_run(int n_threads, const std::function<void(int)>& fn) {
    if (n_threads <= 1) {
        fn(0);
        return;
    }
    if (!g_state || g_state->pid != getpid()) g_state = new ProcessState;  // old one abandoned
    std::lock_guard<std::mutex> lock(g_state->m);
    Pool*& pool = g_state->pool;
    if (!pool || pool->workers() < n_threads - 1) {
        delete pool;
        pool = new Pool(n_threads - 1);
    }
    pool->run(n_threads, fn);
}

}  // namespace cpu
}  // namespace fastrdf

#pragma once
// The shared-nothing worker model: IO_THREADS workers, each one thread running its own io_context. A
// connection, its requests and the backend connections they use stay on one worker; nothing on a request's
// path is handed to another thread. Control work (file watches, reloads, signals, the debug and Prometheus
// listeners) runs elsewhere, on the control io_context of main().

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sluice::core {

// Work for the workers that met the stop (per_worker::on_each): a debug page answers 503 "shutting down".
struct workers_stopped : std::runtime_error {
  workers_stopped() : std::runtime_error("shutting down") {}
};

namespace detail {
template <class U, class Get>
class fan_out;
}
template <class T>
class per_worker;

// The CPUs this process may use: its affinity mask, capped by a cgroup v2 cpu.max quota (rounded up).
unsigned usable_cpus();
// The quota part of usable_cpus(), from a cpu.max text ("max 100000" or "150000 100000"); 0 when unlimited.
unsigned cpus_of_quota(const std::string& cpu_max);

class worker_pool {
 public:
  explicit worker_pool(unsigned count);
  ~worker_pool();
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()); }
  // False from release() on: work sent to a worker then might never run.
  bool accepting() const { return accepting_.load(std::memory_order_acquire); }

  // Starts one thread per worker.
  void start();
  // Lets each worker's thread end once its io_context has nothing left to do.
  void release();
  // Workers whose thread is still running.
  unsigned running() const { return running_.load(std::memory_order_acquire); }
  // Stops every io_context at once (what is left is abandoned) and joins the threads.
  void stop();

 private:
  // Worker i's io_context: reached only through per_worker (core/per_worker.hpp), the one owner of "send this
  // to every worker", which knows about the stop.
  template <class U, class Get>
  friend class detail::fan_out;
  template <class T>
  friend class per_worker;
  boost::asio::io_context& context(unsigned i) { return workers_[i]->ioc; }

  struct worker {
    boost::asio::io_context ioc{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{ioc.get_executor()};
    std::thread thread;
  };
  std::vector<std::unique_ptr<worker>> workers_;
  std::atomic<unsigned> running_{0};
  std::atomic<bool> accepting_{true};
};

}  // namespace sluice::core

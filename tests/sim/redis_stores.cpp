#include "redis_stores.hpp"

#include <chrono>
#include <stdexcept>

namespace sluice::sim {

class redis_stores::quiet_store final : public sluice::redis::store {
 public:
  quiet_store(boost::asio::any_io_executor ex, const sluice::redis::connection_config& config)
      : pool_(std::move(ex), config, 1) {}
  std::size_t unanswered() const { return unanswered_; }

  void start(observer on_change) override { pool_.start(std::move(on_change)); }
  void stop() override { pool_.stop(); }
  void exec(std::shared_ptr<sluice::redis::pending_request> request, std::string_view key) override {
    ++unanswered_;
    request->done = [this, inner = std::move(request->done)](boost::system::error_code ec,
                                                             std::vector<sluice::redis::value>&& replies) {
      --unanswered_;
      if (inner) inner(ec, std::move(replies));
    };
    pool_.exec(std::move(request), key);
  }
  bool one_key_per_request() const override { return pool_.one_key_per_request(); }
  bool up() const override { return pool_.up(); }
  std::string describe(boost::system::error_code ec) const override { return pool_.describe(ec); }
  std::string last_error() const override { return pool_.last_error(); }
  sluice::redis::connection_stats stats() const override { return pool_.stats(); }

 private:
  sluice::redis::pool pool_;
  std::size_t unanswered_ = 0;
};

redis_stores::redis_stores(int workers, const core::clock& virtual_clock, checker& check)
    : memory_(still_, 10'000'000) {
  sluice::redis::connection_config config;
  config.address = server_.socket_path();
  config.unix_socket = true;
  config.request_timeout = std::chrono::seconds(30);  // (a busy machine must not fail a simulated decision)
  for (int w = 0; w < workers; ++w) {
    pools_.push_back(std::make_unique<quiet_store>(io_.get_executor(), config));
    pools_.back()->start([] {});
    backends_.push_back(std::make_unique<ratelimit::backends::redis::redis_backend>(io_.get_executor(),
                                                                                    *pools_.back(), nullptr));
    agreements_.push_back(
        std::make_unique<agreement_backend>(*backends_.back(), memory_, virtual_clock, check));
  }
  run_until([&] {
    for (const auto& p : pools_)
      if (!p->up()) return false;
    return true;
  });
}

redis_stores::~redis_stores() {
  for (auto& p : pools_) p->stop();
  io_.restart();
  io_.poll();
}

void redis_stores::run_until(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto quiet = [&] {
    for (const auto& p : pools_)
      if (p->unanswered() > 0) return false;
    return true;
  };
  while (!done() || !quiet()) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("Redis did not answer within 30 s of real time");
    if (io_.stopped()) io_.restart();
    io_.run_one_for(std::chrono::milliseconds(100));
  }
}

}  // namespace sluice::sim

#pragma once
// The debug listener's pages that read the workers' top lists — /top, /dashboard and /dashboard/data
// (docs/guides/observe/dashboard.md). The top lists are copied on each worker's own thread
// (per_worker::on_each) and merged here, on the control thread; the series history is sampled on the control
// thread once a second from the first /dashboard/data on.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/health.hpp"
#include "core/per_worker.hpp"
#include "net/http/debug_pages.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "stats/series_history.hpp"
#include "stats/top_descriptors.hpp"

namespace sluice::ratelimit::api {

// What the pages read (all outlive them).
struct operator_sources {
  std::optional<core::worker_view<stats::top_recorder>> tops;  // none when TOP_DESCRIPTORS_CAPACITY is 0
  const service::rules_source& rules;
  const core::health& health;
  stats::store& stats;
  const core::clock& clock;  // the workers' wall clock: the top lists' slots are its seconds
  std::string backend_type;
};

class operator_pages {
 public:
  operator_pages(operator_sources sources, boost::asio::io_context& control);
  std::vector<net::http::debug_page> pages();
  // Stops sampling (the control loop can then end).
  void stop();

 private:
  boost::asio::awaitable<stats::top_lists> gather_top(std::size_t n);
  boost::asio::awaitable<net::http::response> top_page(const net::http::request& req);
  boost::asio::awaitable<net::http::response> dashboard_data(const net::http::request& req);
  void start_sampling();
  void sample_now();
  void sample_later();

  operator_sources sources_;
  stats::series_history history_;
  boost::asio::steady_timer timer_;
  bool sampling_ = false;
  bool stopped_ = false;
};

}  // namespace sluice::ratelimit::api

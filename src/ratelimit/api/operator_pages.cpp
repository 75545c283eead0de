#include "ratelimit/api/operator_pages.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <charconv>

#include "core/strings.hpp"
#include "net/http/query.hpp"
#include "ratelimit/api/dashboard.hpp"

namespace sluice::ratelimit::api {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr std::chrono::seconds sample_interval{1};
constexpr std::size_t max_top = 1000;
// The dashboard merges this many per list: its utilisation looks for each rule's busiest descriptor there.
constexpr std::size_t dashboard_top_merged = 200;

}  // namespace

operator_pages::operator_pages(operator_sources sources, asio::io_context& control)
    : sources_(std::move(sources)),
      history_(
          sources_.stats,
          {std::string(dashboard_totals::grpc_requests), std::string(dashboard_totals::json_requests),
           std::string(dashboard_totals::backend_errors), std::string(dashboard_totals::fail_open)},
          {std::string(dashboard_totals::latency_timer), std::string(dashboard_totals::json_latency_timer)}),
      timer_(control) {}

std::vector<net::http::debug_page> operator_pages::pages() {
  return {
      {"/top", "the descriptors with the most over-limit answers and hits, last minute (JSON; ?n=10)",
       [this](const net::http::request& req) { return top_page(req); }},
      {"/dashboard", "the live dashboard (HTML)",
       [](const net::http::request& req) -> asio::awaitable<net::http::response> {
         co_return net::http::make_response(req, http::status::ok, "text/html; charset=utf-8",
                                            std::string(dashboard_html));
       }},
      {"/dashboard/data", "what the dashboard shows (JSON)",
       [this](const net::http::request& req) { return dashboard_data(req); }},
  };
}

// In two steps of tasks on each worker's own thread: the counts (no text), a slot a task, ranked here; then
// the texts of the ranked ids only. Throws core::workers_stopped at a stop.
asio::awaitable<stats::top_lists> operator_pages::gather_top(std::size_t n) {
  const std::int64_t now = sources_.clock.now_seconds();
  const auto& tops = sources_.tops;
  std::vector<stats::top_recorder::counts> copies(tops ? tops->size() : 0);
  for (std::size_t slot = 0; tops && slot < stats::top_recorder::slots; ++slot) {
    if (stopped_) throw core::workers_stopped{};
    co_await tops->on_each([now, slot, &copies](const stats::top_recorder& top, unsigned i) {
      auto& copy = copies[i];
      if (slot == 0) {
        copy.hits.reserve(top.capacity() * stats::top_recorder::slots);
        copy.over_limit.reserve(top.capacity() * stats::top_recorder::slots);
      }
      top.add_counts(now, slot, copy);
    });
  }
  const auto ranking = stats::rank_top(copies, n + stats::top_ranking_slack);
  auto texts = stats::texts_wanted(ranking);
  // One worker at a time: each fills what the ones before did not have.
  if (tops) {
    if (stopped_) throw core::workers_stopped{};
    co_await tops->on_each([now, &texts](const stats::top_recorder& top) { top.find_texts(now, texts); });
  }
  co_return stats::name_top(ranking, texts, n, now);
}

asio::awaitable<net::http::response> operator_pages::top_page(const net::http::request& req) {
  if (!sources_.tops) {
    co_return net::http::json_error(req, http::status::not_found,
                                    "top descriptors are off (TOP_DESCRIPTORS_CAPACITY=0)");
  }
  std::size_t n = 10;
  if (auto text = net::http::query_param(req.target(), "n")) {
    const auto* end = text->data() + text->size();
    auto [ptr, ec] = std::from_chars(text->data(), end, n);
    if (ec != std::errc{} || ptr != end || n < 1 || n > max_top) {
      co_return net::http::json_error(
          req, http::status::bad_request,
          core::cat("n: '", *text, "' is not a whole number from 1 to ", max_top));
    }
  }
  const auto lists = co_await gather_top(n);
  co_return net::http::make_response(req, http::status::ok, "application/json", top_json(lists));
}

asio::awaitable<net::http::response> operator_pages::dashboard_data(const net::http::request& req) {
  start_sampling();
  const auto lists = co_await gather_top(dashboard_top_merged);
  const dashboard_inputs in{history_,
                            sources_.rules,
                            sources_.health,
                            lists,
                            10,
                            sources_.backend_type,
                            static_cast<double>(sources_.clock.now_micros()) / 1e6,
                            static_cast<double>(sample_interval.count()),
                            &sources_.stats};
  co_return net::http::make_response(req, http::status::ok, "application/json", dashboard_json(in));
}

// From the first request on: nobody pays for the history before someone looks.
void operator_pages::start_sampling() {
  if (sampling_ || stopped_) return;
  sampling_ = true;
  sample_now();
  sample_later();
}

void operator_pages::sample_now() {
  const auto steady = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch());
  history_.sample(static_cast<double>(sources_.clock.now_micros()) / 1e6, steady.count());
}

void operator_pages::sample_later() {
  timer_.expires_after(sample_interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    sample_now();
    sample_later();
  });
}

void operator_pages::stop() {
  stopped_ = true;
  timer_.cancel();
}

}  // namespace sluice::ratelimit::api

#include "net/http/debug_pages.hpp"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <memory>
#include <optional>

#include "core/profiler.hpp"
#include "core/strings.hpp"
#include "core/workers.hpp"
#include "net/http/query.hpp"

namespace sluice::net::http {

namespace bhttp = boost::beast::http;

namespace {

constexpr std::uint64_t max_profile_seconds = 300;

// Profiles a window of `seconds` (query parameter, else `def`), answering 400 on a bad value and 409 while
// another profile of the same kind runs.
handler profile_page(std::uint64_t def,
                     boost::asio::awaitable<core::profile_result> (*take)(std::chrono::seconds)) {
  return [def, take](const request& req) -> boost::asio::awaitable<response> {
    std::uint64_t seconds = def;
    if (auto text = query_param(req.target(), "seconds")) {
      auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), seconds);
      if (ec != std::errc() || end != text->data() + text->size() || seconds == 0 ||
          seconds > max_profile_seconds) {
        co_return json_error(req, bhttp::status::bad_request,
                             core::cat("invalid seconds '", *text, "': expected 1 to ", max_profile_seconds));
      }
    }
    auto result = co_await take(std::chrono::seconds(seconds));
    if (!result.data) co_return json_error(req, bhttp::status::conflict, result.error);
    auto res = make_response(req, bhttp::status::ok, "application/octet-stream", std::move(*result.data));
    res.set(bhttp::field::content_disposition, "attachment; filename=\"profile\"");
    co_return res;
  };
}

response listing(const request& req, const std::vector<std::pair<std::string, std::string>>& index) {
  std::string body;
  for (const auto& [path, help] : index) body += core::cat(path, ": ", help, "\n");
  return make_response(req, bhttp::status::ok, "text/plain; charset=utf-8", std::move(body));
}

}  // namespace

std::vector<debug_page> pprof_pages() {
  std::vector<debug_page> pages;
  pages.push_back({"/debug/pprof/", "root of various pprof endpoints. hit for help.",
                   [](const request& req) -> boost::asio::awaitable<response> {
                     co_return make_response(
                         req, bhttp::status::ok, "text/plain; charset=utf-8",
                         "/debug/pprof/profile?seconds=N: CPU profile of N seconds (default 30)\n"
                         "/debug/pprof/heap?seconds=N: allocations made in N seconds (default 10) and still "
                         "live at its end\n"
                         "Read them with google-pprof (Debian package google-perftools): "
                         "google-pprof --text /path/to/sluice profile\n");
                   }});
  pages.push_back({"/debug/pprof/profile", "CPU profiling endpoint", profile_page(30, &core::cpu_profile)});
  pages.push_back({"/debug/pprof/heap", "heap profiling endpoint", profile_page(10, &core::heap_profile)});
  return pages;
}

void add_debug_pages(router& routes, std::vector<debug_page> pages, host_check hosts) {
  std::sort(pages.begin(), pages.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  auto index = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  auto checked = std::make_shared<const host_check>(std::move(hosts));
  auto guard = [checked](handler h) -> handler {
    return [checked, h = std::move(h)](const request& req) -> boost::asio::awaitable<response> {
      if (auto why = checked->refuse(req[boost::beast::http::field::host]))
        co_return json_error(req, boost::beast::http::status::forbidden, *why);
      std::optional<response> res;
      try {
        res = co_await h(req);
      } catch (const core::workers_stopped& e) {
        // A page that reads the workers, asked while they stop.
        res = json_error(req, boost::beast::http::status::service_unavailable, e.what());
      }
      co_return std::move(*res);
    };
  };
  for (auto& page : pages) {
    index->emplace_back(page.path, page.help);
    routes.add(page.path, guard(std::move(page.handle)));
  }
  handler list = guard(
      [index](const request& req) -> boost::asio::awaitable<response> { co_return listing(req, *index); });
  routes.add("/", list);
  routes.set_fallback(std::move(list));
}

}  // namespace sluice::net::http

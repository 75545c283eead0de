#include <doctest/doctest.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "stats/stdout_sink.hpp"

using namespace sluice::stats;

namespace {

std::vector<std::string> read_lines(int fd) {
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  std::vector<std::string> lines;
  for (std::size_t start = 0, nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(all.substr(start, nl - start));
  }
  return lines;
}

}  // namespace

TEST_CASE("stdout sink: gostats' logging sink lines") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  store s;
  {
    stdout_sink k({{"app", "x.y"}}, fds[1]);
    s.set_timer_observer(&k);
    s.get_counter("ratelimit.service.config_load_success").add(2);
    s.get_gauge("ratelimit.redis_pool.cx_active").set(3);
    s.get_timer("ratelimit_server.ShouldRateLimit.response_time").record(1.25);
    s.get_counter("odd \"<name>\"").inc();
    k.flush(s);
    s.set_timer_observer(nullptr);
  }
  ::close(fds[1]);
  auto lines = read_lines(fds[0]);
  ::close(fds[0]);
  REQUIRE(lines.size() == 5);

  // Exact shape, up to the timestamp.
  auto prefix = std::string(R"({"level":"debug","ts":)");
  std::string counter_line;
  for (const auto& l : lines) {
    CHECK(l.starts_with(prefix));
    if (l.find("config_load_success") != std::string::npos) counter_line = l;
  }
  auto ts_end = counter_line.find(',', prefix.size());
  auto ts = counter_line.substr(prefix.size(), ts_end - prefix.size());
  CHECK(ts.size() == 17);  // 10 digits, '.', 6 decimals
  CHECK(counter_line.substr(ts_end) ==
        R"(,"logger":"gostats.loggingsink","msg":"flushing counter","json":{"name":)"
        R"("ratelimit.service.config_load_success.__app=x_y","type":"counter","value":"2.000000"}})");

  std::vector<boost::json::object> objects;
  for (const auto& l : lines) objects.push_back(boost::json::parse(l).as_object());
  auto find = [&](std::string_view msg) -> boost::json::object {
    std::vector<boost::json::object> found;
    for (const auto& o : objects) {
      if (o.at("msg").as_string() == msg) found.push_back(o.at("json").as_object());
    }
    return found.empty() ? boost::json::object{} : found.back();
  };
  CHECK(find("flushing gauge") == boost::json::parse(R"({"name":"ratelimit.redis_pool.cx_active.__app=x_y",
                                     "type":"gauge","value":"3.000000"})"));
  CHECK(find("flushing timer") ==
        boost::json::parse(R"({"name":"ratelimit_server.ShouldRateLimit.response_time.__app=x_y",
                               "type":"timer","value":"1.250000"})"));
  CHECK(objects.back().at("json") == boost::json::parse(R"({"type":"all stats","value":"0.000000"})"));
  // Go escapes <, > and & too.
  bool escaped = false;
  for (const auto& l : lines)
    escaped = escaped || l.find(R"("odd \"\u003cname\u003e\"")") != std::string::npos;
  CHECK(escaped);
}

#include "stats/stdout_sink.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "stats/line_text.hpp"

namespace sluice::stats {

namespace {

// One write(2) of at most PIPE_BUF bytes is never interleaved with the log lines other threads write.
constexpr std::size_t atomic_write_bytes = 4096;

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    auto n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report it: stderr is where errors go
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

void append_go_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || c == '<' || c == '>' || c == '&') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

stdout_sink::stdout_sink(tag_list extra_tags, int fd) : extra_tags_(std::move(extra_tags)), fd_(fd) {}

void stdout_sink::line(std::string_view msg, const std::string* name, std::string_view type, double value) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  lines_ += R"({"level":"debug","ts":)";
  append_fixed(lines_, std::chrono::duration<double>(now).count(), 6);
  lines_ += R"(,"logger":"gostats.loggingsink","msg":)";
  append_go_json_string(lines_, msg);
  lines_ += R"(,"json":{)";
  if (name != nullptr) {
    lines_ += R"("name":)";
    append_go_json_string(lines_, statsd_tagged_name(*name, extra_tags_));
    lines_ += ',';
  }
  lines_ += R"("type":)";
  append_go_json_string(lines_, type);
  lines_ += R"(,"value":")";
  append_fixed(lines_, value, 6);
  lines_ += "\"}}\n";
}

void stdout_sink::on_counter(const std::string& name, std::uint64_t delta) {
  line("flushing counter", &name, "counter", static_cast<double>(delta));
}

void stdout_sink::on_gauge(const std::string& name, std::int64_t value) {
  line("flushing gauge", &name, "gauge", static_cast<double>(value));
}

void stdout_sink::on_timer(const std::string& name, double milliseconds, double) {
  line("flushing timer", &name, "timer", milliseconds);
}

void stdout_sink::on_flush_end() {
  line("flushing all stats", nullptr, "all stats", 0);
  for (auto chunk : split_lines(lines_, atomic_write_bytes)) write_all(fd_, chunk);
  lines_.clear();
}

}  // namespace sluice::stats

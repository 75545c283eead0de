#pragma once
// Small string helpers shared by every module (g++ 12 has no std::format).

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::core {

namespace detail {
inline void append(std::string& out, std::string_view s) {
  out.append(s);
}
inline void append(std::string& out, const char* s) {
  out.append(s);
}
inline void append(std::string& out, const std::string& s) {
  out.append(s);
}
inline void append(std::string& out, char c) {
  out.push_back(c);
}
inline void append(std::string& out, bool b) {
  out.append(b ? "true" : "false");
}
template <std::integral T>
void append(std::string& out, T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(end - buf));
}
void append(std::string& out, double v);
}  // namespace detail

// Concatenates strings and numbers: cat("port ", 8080) == "port 8080".
template <typename... Args>
std::string cat(const Args&... args) {
  std::string out;
  (detail::append(out, args), ...);
  return out;
}

// Appends strings and numbers to `out` without a temporary: append_to(body, "count ", 3).
template <typename... Args>
void append_to(std::string& out, const Args&... args) {
  (detail::append(out, args), ...);
}

// An integer's decimal text in a buffer of its own, for a command built from views without allocating:
// `const decimal hits(3);` then `hits.text()`.
class decimal {
 public:
  template <std::integral T>
  explicit decimal(T v)
      : size_(static_cast<unsigned char>(std::to_chars(buf_, buf_ + sizeof buf_, v).ptr - buf_)) {}
  std::string_view text() const { return {buf_, size_}; }

 private:
  char buf_[24];
  unsigned char size_;
};

// "host:port", with an IPv6 host in brackets: "[::1]:8081".
template <typename Port>
std::string host_port(std::string_view host, const Port& port) {
  return host.find(':') == std::string_view::npos ? cat(host, ":", port) : cat("[", host, "]:", port);
}

// The parts of `s` between each `separator`, empty ones kept, as Go's strings.Split: split("a,,b", ',')
// has 3.
std::vector<std::string_view> split(std::string_view s, char separator);
// `s` with ASCII letters in lower case (other bytes as they are).
std::string ascii_lower(std::string_view s);
// `s` without leading and trailing ASCII whitespace.
std::string_view trim_space(std::string_view s);
// Equal but for the case of ASCII letters ("Minute" and "MINUTE").
bool iequals(std::string_view a, std::string_view b);

// The parts with `separator` between them: join({"a", "b"}, ",") == "a,b".
template <typename Range>
std::string join(const Range& parts, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto& part : parts) {
    if (!first) out.append(separator);
    out.append(part);
    first = false;
  }
  return out;
}

// Parses a whole decimal unsigned integer; false on any stray character or overflow.
template <std::unsigned_integral T>
bool parse_unsigned(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

// The host (without an IPv6 address's brackets) and the port ("" when there is none) of a URL's authority:
// "host:port", "[::1]:port", "host" or "[::1]".
std::pair<std::string_view, std::string_view> split_host_port(std::string_view authority);

// `s` with each %XX escape decoded. A malformed escape is kept as it is and sets `malformed` when given.
std::string percent_decode(std::string_view s, bool* malformed = nullptr);

// The escapes JSON and Go's quoted strings share (\" \\ \n \r \t): appends c's and answers true, or false
// for any other character (each format escapes the rest its own way).
bool append_short_escape(std::string& out, char c);

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629), 0 if there is none.
std::size_t utf8_sequence(std::string_view s, std::size_t i);

}  // namespace sluice::core

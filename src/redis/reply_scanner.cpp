#include "redis/reply_scanner.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "redis/resp.hpp"

namespace sluice::redis {

namespace {

bool to_int(std::string_view text, std::int64_t& n) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

}  // namespace

// One element at pos_: a scalar whole, or an aggregate's header. pos_ moves past what was scanned.
reply_scanner::step reply_scanner::scan_one(std::string_view data) {
  if (pos_ >= data.size()) return step::need_more;
  const char type = data[pos_];
  if (std::string_view("+-,(:#_$=!*~>%|").find(type) == std::string_view::npos) return step::ask_parser;
  // An unfinished line is searched on from where the last call stopped, not from its start.
  const std::size_t cr = data.find('\r', std::max(pos_ + 1, searched_));
  const bool numeric = type != '+' && type != '-' && type != ',' && type != '(';
  if (cr == std::string_view::npos || cr + 1 == data.size()) {
    searched_ = cr == std::string_view::npos ? data.size() : cr;
    // A number line that runs past the decoder's limit without a CR is malformed: the parser says so.
    const std::size_t seen = data.size() - pos_ - 1;
    return numeric && seen >= resp_limits::max_number_length ? step::ask_parser : step::need_more;
  }
  if (data[cr + 1] != '\n') return step::ask_parser;
  const std::string_view line = data.substr(pos_ + 1, cr - pos_ - 1);
  const std::size_t next = cr + 2;
  if (numeric && line.size() >= resp_limits::max_number_length) return step::ask_parser;
  std::int64_t n = 0;
  switch (type) {
    case '+':
    case '-':
    case ',':
    case '(':
      pos_ = next;
      return step::element_done;
    case ':':
      if (!to_int(line, n)) return step::ask_parser;
      pos_ = next;
      return step::element_done;
    case '#':
      if (line != "t" && line != "f") return step::ask_parser;
      pos_ = next;
      return step::element_done;
    case '_':
      if (!line.empty()) return step::ask_parser;
      pos_ = next;
      return step::element_done;
    case '$':
    case '=':
    case '!': {
      if (!to_int(line, n) || n < -1 || n > resp_limits::max_bulk_length) return step::ask_parser;
      if (n == -1) {
        pos_ = next;
        return step::element_done;
      }
      const auto size = static_cast<std::size_t>(n);
      if (data.size() - next < size + 2) return step::need_more;  // pos_ stays at the header
      if (data[next + size] != '\r' || data[next + size + 1] != '\n') return step::ask_parser;
      if (type == '=' && (size < 4 || data[next + 3] != ':')) return step::ask_parser;
      pos_ = next + size + 2;
      return step::element_done;
    }
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
      if (!to_int(line, n) || n < -1) return step::ask_parser;
      if (n == -1 && type != '|') {
        pos_ = next;
        return step::element_done;
      }
      if (n == -1 || remaining_.size() >= resp_limits::max_depth) return step::ask_parser;
      auto count = static_cast<std::uint64_t>(n);
      if (type == '%' || type == '|') {
        if (count > std::numeric_limits<std::uint64_t>::max() / 4) return step::ask_parser;
        count *= 2;
      }
      // Attributes annotate the value after them: the pairs and that value make one element.
      if (type == '|') count += 1;
      pos_ = next;
      if (count == 0) return step::element_done;
      remaining_.push_back(count);
      return step::aggregate_opened;
    }
    default:
      return step::ask_parser;
  }
}

bool reply_scanner::ready(std::string_view data) {
  for (;;) {
    switch (scan_one(data)) {
      case step::need_more:
        return false;
      case step::ask_parser:
        return true;
      case step::aggregate_opened:
        continue;
      case step::element_done:
        while (!remaining_.empty() && --remaining_.back() == 0) remaining_.pop_back();
        if (remaining_.empty()) return true;
        continue;
    }
  }
}

}  // namespace sluice::redis

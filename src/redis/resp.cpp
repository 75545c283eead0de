#include "redis/resp.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/strings.hpp"

namespace sluice::redis {

namespace {

using core::cat;

constexpr std::size_t max_depth = resp_limits::max_depth;
constexpr std::int64_t max_bulk_length = resp_limits::max_bulk_length;
constexpr std::size_t max_number_length = resp_limits::max_number_length;
// The smallest encoded value ("_\r\n"): bounds what a declared element count may make us reserve.
constexpr std::size_t min_value_size = 3;

// Server bytes quoted in an error message: printable, and short whatever the server sent.
std::string quote(std::string_view text) {
  constexpr std::size_t max_quoted = 32;
  constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char c : text.substr(0, max_quoted)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out.append("\\x");
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  out.append(text.size() > max_quoted ? "'..." : "'");
  return out;
}

// Decodes one value at a time from `data`, recursing into aggregates; `pos_` is where the next byte is read.
class parser {
 public:
  parser(std::string_view data, std::string& error_message) : data_(data), error_(error_message) {}

  std::size_t position() const { return pos_; }

  // `depth` is the number of aggregates enclosing the value.
  parse_status parse(value& out, std::size_t depth) {
    out.type = value::kind::null;
    out.text.clear();
    out.integer = 0;
    out.elements.clear();
    // A loop, not recursion, over attributes: a run of them cannot grow the stack.
    for (;;) {
      if (pos_ >= data_.size()) return parse_status::need_more;
      const char type = data_[pos_++];
      switch (type) {
        case '+':
        case ',':  // double, kept as its text
        case '(':  // big number, kept as its text
          return simple(out, value::kind::simple_string);
        case '-':
          return simple(out, value::kind::error);
        case ':':
          out.type = value::kind::integer;
          return number(out.integer, "integer");
        case '#':
          return boolean(out);
        case '_':
          return null(out);
        case '$':
          return bulk(out, value::kind::bulk_string, false);
        case '=':
          return bulk(out, value::kind::bulk_string, true);
        case '!':  // RESP3 blob error
          return bulk(out, value::kind::error, false);
        case '*':
        case '~':  // set
        case '>':  // push
          return aggregate(out, depth, false);
        case '%':  // map: n pairs
          return aggregate(out, depth, true);
        case '|': {
          // Attributes annotate the value that follows; nobody here uses them.
          value attributes;
          if (auto status = aggregate(attributes, depth, true); status != parse_status::complete)
            return status;
          continue;
        }
        default:
          return unknown_type(static_cast<unsigned char>(type));
      }
    }
  }

 private:
  parse_status fail(std::string message) {
    error_ = std::move(message);
    return parse_status::protocol_error;
  }

  parse_status unknown_type(unsigned char type) {
    constexpr char hex[] = "0123456789abcdef";
    std::string message = "unknown RESP type byte ";
    if (type >= 0x20 && type < 0x7f) message.append({'\'', static_cast<char>(type), '\'', ' ', '('});
    message.append({'0', 'x', hex[type >> 4], hex[type & 0xf]});
    if (type >= 0x20 && type < 0x7f) message.push_back(')');
    return fail(std::move(message));
  }

  // Reads the rest of the line up to CRLF and moves past it.
  parse_status line(std::string_view& text) {
    const std::string_view rest = data_.substr(pos_);
    const std::size_t cr = rest.find('\r');
    if (cr == std::string_view::npos || cr + 1 == rest.size()) return parse_status::need_more;
    if (rest[cr + 1] != '\n') return fail("RESP line not terminated by CRLF");
    text = rest.substr(0, cr);
    pos_ += cr + 2;
    return parse_status::complete;
  }

  parse_status number(std::int64_t& n, std::string_view what) {
    const std::string_view rest = data_.substr(pos_);
    const std::size_t cr = rest.substr(0, max_number_length).find('\r');
    if (cr == std::string_view::npos && rest.size() < max_number_length) return parse_status::need_more;
    if (cr != std::string_view::npos && cr + 1 == rest.size()) return parse_status::need_more;
    // Without a CR the token is max_number_length bytes: too many digits to fit, or not a number at all.
    const std::string_view token = rest.substr(0, std::min(cr, max_number_length));
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), n);
    if (ec == std::errc::result_out_of_range) return fail(cat("RESP integer overflow ", quote(token)));
    if (ec != std::errc{} || end != token.data() + token.size() || cr == std::string_view::npos) {
      return fail(cat("invalid RESP ", what, " ", quote(token)));
    }
    if (rest[cr + 1] != '\n') return fail("RESP line not terminated by CRLF");
    pos_ += cr + 2;
    return parse_status::complete;
  }

  // A length: -1 means null, anything below is malformed.
  parse_status length(std::int64_t& n) {
    if (auto status = number(n, "length"); status != parse_status::complete) return status;
    if (n < -1) return fail(cat("invalid RESP length '", n, "'"));
    return parse_status::complete;
  }

  parse_status simple(value& out, value::kind type) {
    std::string_view text;
    if (auto status = line(text); status != parse_status::complete) return status;
    out.type = type;
    out.text.assign(text);
    return parse_status::complete;
  }

  parse_status boolean(value& out) {
    std::string_view text;
    if (auto status = line(text); status != parse_status::complete) return status;
    if (text != "t" && text != "f") return fail(cat("invalid RESP boolean ", quote(text)));
    out.type = value::kind::integer;
    out.integer = text == "t" ? 1 : 0;
    return parse_status::complete;
  }

  parse_status null(value& out) {
    std::string_view text;
    if (auto status = line(text); status != parse_status::complete) return status;
    if (!text.empty()) return fail(cat("invalid RESP null ", quote(text)));
    out.type = value::kind::null;
    return parse_status::complete;
  }

  parse_status bulk(value& out, value::kind type, bool verbatim) {
    std::int64_t n = 0;
    if (auto status = length(n); status != parse_status::complete) return status;
    if (n == -1) return parse_status::complete;  // out is already null
    if (n > max_bulk_length) return fail(cat("RESP bulk string of ", n, " bytes exceeds the 512 MB limit"));
    // Checked before anything is scanned: an incomplete large bulk string costs O(1) per call.
    const auto size = static_cast<std::size_t>(n);
    if (data_.size() - pos_ < size + 2) return parse_status::need_more;
    if (data_[pos_ + size] != '\r' || data_[pos_ + size + 1] != '\n') {
      return fail(cat("RESP bulk string of ", size, " bytes not followed by CRLF"));
    }
    std::string_view text = data_.substr(pos_, size);
    if (verbatim) {
      // "txt:" or "mkd:": the format says how to display the text, which does not matter here.
      if (text.size() < 4 || text[3] != ':') return fail("RESP verbatim string without a format prefix");
      text.remove_prefix(4);
    }
    out.type = type;
    out.text.assign(text);
    pos_ += size + 2;
    return parse_status::complete;
  }

  parse_status aggregate(value& out, std::size_t depth, bool pairs) {
    std::int64_t n = 0;
    if (auto status = length(n); status != parse_status::complete) return status;
    if (n == -1) return parse_status::complete;  // out is already null
    if (depth == max_depth) return fail(cat("RESP nesting deeper than ", max_depth, " levels"));
    if (pairs) {
      if (n > std::numeric_limits<std::int64_t>::max() / 2)
        return fail(cat("RESP integer overflow '", n, "'"));
      n *= 2;
    }
    const auto count = static_cast<std::uint64_t>(n);
    out.type = value::kind::array;
    // The declared count is the server's word: reserve only what the bytes at hand can hold.
    out.elements.reserve(
        static_cast<std::size_t>(std::min<std::uint64_t>(count, (data_.size() - pos_) / min_value_size)));
    for (std::uint64_t i = 0; i < count; ++i) {
      if (auto status = parse(out.elements.emplace_back(), depth + 1); status != parse_status::complete) {
        return status;
      }
    }
    return parse_status::complete;
  }

  std::string_view data_;
  std::string& error_;
  std::size_t pos_ = 0;
};

std::size_t decimal_digits(std::size_t n) {
  std::size_t digits = 1;
  for (; n >= 10; n /= 10) ++digits;
  return digits;
}

char* write_header(char* out, char type, std::size_t n) {
  *out++ = type;
  out = std::to_chars(out, out + 20, n).ptr;
  *out++ = '\r';
  *out++ = '\n';
  return out;
}

}  // namespace

parse_status parse_reply(std::string_view data, std::size_t& consumed, value& out,
                         std::string& error_message) {
  consumed = 0;
  parser p(data, error_message);
  const parse_status status = p.parse(out, 0);
  if (status == parse_status::complete) consumed = p.position();
  return status;
}

void request::push(std::initializer_list<std::string_view> args) {
  push(std::span<const std::string_view>(args.begin(), args.size()));
}

void request::push(std::span<const std::string_view> args) {
  // Redis silently ignores an empty command ("*0\r\n") and sends no reply, which would break FIFO matching.
  if (args.empty()) return;
  std::size_t size = 3 + decimal_digits(args.size());
  for (std::string_view arg : args) size += 5 + decimal_digits(arg.size()) + arg.size();
  const std::size_t old_size = payload_.size();
  if (old_size + size > payload_.capacity())
    payload_.reserve(std::max(old_size + size, 2 * payload_.capacity()));
  // Written in place: a command is encoded per counter per decision, so appending piece by piece shows up.
  payload_.resize(old_size + size);
  char* out = write_header(payload_.data() + old_size, '*', args.size());
  for (std::string_view arg : args) {
    out = write_header(out, '$', arg.size());
    out = std::copy(arg.begin(), arg.end(), out);
    *out++ = '\r';
    *out++ = '\n';
  }
  ++commands_;
}

void request::push_auth(std::string_view username, std::string_view password) {
  if (password.empty()) return;
  if (username.empty()) {
    push({"AUTH", password});
  } else {
    push({"AUTH", username, password});
  }
}

}  // namespace sluice::redis

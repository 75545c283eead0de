#include "memcache/protocol.hpp"

#include <charconv>

#include "core/strings.hpp"

namespace sluice::memcache {

namespace {

void append_number(std::string& out, std::uint64_t v) {
  core::append_to(out, v);
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size();
}

// The next space-separated word of `line`, removed from it.
std::string_view next_word(std::string_view& line) {
  const auto space = line.find(' ');
  const auto word = line.substr(0, space);
  line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
  return word;
}

// One line without its CRLF, or nothing yet (`bad` set when no CRLF can be coming).
std::optional<std::string_view> read_line(std::string_view data, bool& bad) {
  const auto end = data.find("\r\n");
  if (end == std::string_view::npos) {
    // A line of the longest length may still be waiting for its CRLF, or for the LF after its CR.
    bad = data.size() > limits::max_line_length + (data.ends_with('\r') ? 1 : 0);
    return std::nullopt;
  }
  bad = end > limits::max_line_length;
  if (bad) return std::nullopt;
  return data.substr(0, end);
}

// The replies any command may get instead of its own.
bool error_line(std::string_view line, reply& out) {
  if (line == "ERROR") {
    out.result = reply::status::error;
    return true;
  }
  for (auto [prefix, status] : {std::pair{std::string_view("CLIENT_ERROR"), reply::status::client_error},
                                std::pair{std::string_view("SERVER_ERROR"), reply::status::server_error}}) {
    if (line.starts_with(prefix) && (line.size() == prefix.size() || line[prefix.size()] == ' ')) {
      out.result = status;
      out.message = line.substr(std::min(line.size(), prefix.size() + 1));
      return true;
    }
  }
  return false;
}

parse_status fail(std::string& error_message, std::string message) {
  error_message = std::move(message);
  return parse_status::protocol_error;
}

parse_status parse_values(std::string_view data, std::size_t& consumed, reply& out,
                          std::string& error_message) {
  std::size_t at = 0;
  while (true) {
    bool bad = false;
    const auto line = read_line(data.substr(at), bad);
    if (bad) return fail(error_message, "memcached sent a line without an end");
    if (!line) return parse_status::need_more;
    if (*line == "END") {
      consumed = at + line->size() + 2;
      out.result = reply::status::values;
      return parse_status::complete;
    }
    if (at == 0 && error_line(*line, out)) {
      consumed = line->size() + 2;
      return parse_status::complete;
    }
    std::string_view rest = *line;
    if (next_word(rest) != "VALUE") return fail(error_message, "memcached sent an unexpected line to get");
    const auto key = next_word(rest);
    std::uint32_t flags = 0;
    std::uint64_t length = 0;
    if (key.empty() || key.size() > limits::max_key_length || !parse_number(next_word(rest), flags) ||
        !parse_number(next_word(rest), length)) {
      return fail(error_message, "memcached sent a malformed VALUE line");
    }
    // A fourth field is the CAS unique of `gets`; nothing else may follow.
    if (std::uint64_t cas = 0; !rest.empty() && (!parse_number(next_word(rest), cas) || !rest.empty())) {
      return fail(error_message, "memcached sent a malformed VALUE line");
    }
    if (length > limits::max_value_length) return fail(error_message, "memcached sent a value over 1 MiB");
    const std::size_t data_at = at + line->size() + 2;
    if (data.size() - data_at < length + 2) return parse_status::need_more;
    if (data.substr(data_at + length, 2) != "\r\n")
      return fail(error_message, "memcached sent a value without its end");
    out.items.push_back({std::string(key), flags, std::string(data.substr(data_at, length))});
    at = data_at + length + 2;
  }
}

}  // namespace

core::problem key_problem(std::string_view key) {
  if (key.empty()) return "the key is empty";
  if (key.size() > limits::max_key_length) {
    return "the key is " + std::to_string(key.size()) + " bytes long (memcached takes at most 250)";
  }
  for (unsigned char c : key) {
    if (c <= 0x20 || c == 0x7f)
      return "the key holds a space or a control character, which memcached refuses";
  }
  return std::nullopt;
}

std::uint32_t exptime_for(std::uint32_t ttl_seconds, std::int64_t now) {
  if (ttl_seconds <= limits::max_relative_exptime) return ttl_seconds;
  const std::int64_t at = now + ttl_seconds;
  return at > static_cast<std::int64_t>(UINT32_MAX) ? UINT32_MAX : static_cast<std::uint32_t>(at);
}

void add_get_key(std::string& key_list, std::string_view key) {
  key_list += ' ';
  key_list += key;
}

void encode_get(std::string& out, std::string_view key_list) {
  out += "get";
  out += key_list;
  out += "\r\n";
}

namespace {
void encode_arith(std::string& out, std::string_view command, std::string_view key, std::uint64_t delta) {
  out += command;
  out += key;
  out += ' ';
  append_number(out, delta);
  out += "\r\n";
}
}  // namespace

void encode_incr(std::string& out, std::string_view key, std::uint64_t delta) {
  encode_arith(out, "incr ", key, delta);
}

void encode_decr(std::string& out, std::string_view key, std::uint64_t delta) {
  encode_arith(out, "decr ", key, delta);
}

namespace {
void encode_storage(std::string& out, std::string_view command, std::string_view key, std::string_view value,
                    std::uint32_t exptime) {
  out += command;
  out += key;
  out += " 0 ";
  append_number(out, exptime);
  out += ' ';
  append_number(out, value.size());
  out += "\r\n";
  out += value;
  out += "\r\n";
}
}  // namespace

void encode_add(std::string& out, std::string_view key, std::string_view value, std::uint32_t exptime) {
  encode_storage(out, "add ", key, value, exptime);
}

void encode_set(std::string& out, std::string_view key, std::string_view value, std::uint32_t exptime) {
  encode_storage(out, "set ", key, value, exptime);
}

void encode_delete(std::string& out, std::string_view key) {
  out += "delete ";
  out += key;
  out += "\r\n";
}

parse_status parse_reply(std::string_view data, reply_kind kind, std::size_t& consumed, reply& out,
                         std::string& error_message) {
  out = reply{};
  if (kind == reply_kind::values) return parse_values(data, consumed, out, error_message);
  bool bad = false;
  const auto line = read_line(data, bad);
  if (bad) return fail(error_message, "memcached sent a line without an end");
  if (!line) return parse_status::need_more;
  consumed = line->size() + 2;
  if (error_line(*line, out)) return parse_status::complete;
  if (kind == reply_kind::incr) {
    if (*line == "NOT_FOUND") {
      out.result = reply::status::not_found;
      return parse_status::complete;
    }
    // memcached pads a decremented number with spaces; incr never shortens it, but accept them anyway.
    std::string_view number = *line;
    while (!number.empty() && number.back() == ' ') number.remove_suffix(1);
    if (!parse_number(number, out.number))
      return fail(error_message, "memcached sent an unexpected reply to incr");
    out.result = reply::status::number;
    return parse_status::complete;
  }
  if (kind == reply_kind::erase) {
    if (*line == "DELETED") {
      out.result = reply::status::deleted;
    } else if (*line == "NOT_FOUND") {
      out.result = reply::status::not_found;
    } else {
      return fail(error_message, "memcached sent an unexpected reply to delete");
    }
    return parse_status::complete;
  }
  if (*line == "STORED") {
    out.result = reply::status::stored;
  } else if (*line == "NOT_STORED") {
    out.result = reply::status::not_stored;
  } else {
    return fail(error_message, "memcached sent an unexpected reply to add or set");
  }
  return parse_status::complete;
}

}  // namespace sluice::memcache

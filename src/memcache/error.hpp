#pragma once
// The memcached client's error codes, as a boost::system error category. Timeouts are distinct codes.

#include <boost/system/error_code.hpp>
#include <type_traits>

namespace sluice::memcache {

enum class error {
  protocol_error = 1,  // the server sent bytes that are not a reply to what was asked
  connect_timeout,     // no connection within the connect timeout
  request_timeout,     // no reply within the request timeout
  not_connected,       // no live connection to the key's node and the request could not wait for one
  connection_lost,     // the request was written but the connection dropped before its reply
  shutting_down,       // the client is stopping
  no_servers,          // the node list is empty (an SRV name that resolved to nothing)
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(error e) {
  return {static_cast<int>(e), category()};
}

}  // namespace sluice::memcache

namespace boost::system {
template <>
struct is_error_code_enum<sluice::memcache::error> : std::true_type {};
}  // namespace boost::system

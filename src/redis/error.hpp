#pragma once
// The Redis client's error codes, as a boost::system error category. Timeouts are distinct codes.

#include <boost/system/error_code.hpp>
#include <type_traits>

namespace sluice::redis {

enum class error {
  protocol_error = 1,  // the server sent bytes that are not RESP
  connect_timeout,     // no connection within the connect timeout
  request_timeout,     // no reply within the request timeout
  not_connected,       // no live connection and the request could not wait for one
  connection_lost,     // the request was written but the connection dropped before its reply
  auth_failed,         // AUTH/HELLO was refused
  shutting_down,       // the client is stopping
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(error e) {
  return {static_cast<int>(e), category()};
}

// Whether Redis may have run a request that failed with `ec`: only one that was never written (there was no
// connection to write it to) certainly did not; any other failure may have come after Redis ran it.
bool may_have_run(boost::system::error_code ec);

}  // namespace sluice::redis

namespace boost::system {
template <>
struct is_error_code_enum<sluice::redis::error> : std::true_type {};
}  // namespace boost::system

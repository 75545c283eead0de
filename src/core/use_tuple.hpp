#pragma once
// The completion token of every coroutine I/O loop: the error code comes back beside the result instead of as
// an exception (`auto [ec, n] = co_await socket.async_read_some(buffer, core::use_tuple);`). One declaration,
// not one per file: several in anonymous namespaces clash when files are compiled together (a unity build).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sluice::core {
inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
}  // namespace sluice::core

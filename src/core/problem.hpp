#pragma once
// The result of a check, of a parse into an out-parameter, or of a load: what is wrong, in a message for the
// user, or nothing. A function that yields a value and may fail returns boost::system::result<T, E> instead
// (memcache/srv_lookup.hpp); std::optional<std::string> alone means an optional value, never an error.

#include <optional>
#include <string>

namespace sluice::core {

using problem = std::optional<std::string>;

}  // namespace sluice::core

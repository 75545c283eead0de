#pragma once
// JSON text with numbers as people write them: Boost.JSON writes every double in exponent form (1.0 as "1E0",
// a unix time as "1.79E9"); here a double is its shortest plain decimal ("1.0", "1790000000.5", "0.25").

#include <boost/json/value.hpp>
#include <string>

namespace sluice::ratelimit::api {

std::string plain_json(const boost::json::value& v);

}  // namespace sluice::ratelimit::api

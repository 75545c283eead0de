#pragma once
// The v2 API's response envelope in json and xml: meta {requests, timestamp, status, message, method_id,
// version, method} then data. The data part depends only on the holiday list, so it is rendered once per
// list version; a response splices it behind the meta it renders.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "holidays/holiday_csv.hpp"

namespace sluice::holidays {

inline constexpr int method_id = 1423;
inline constexpr std::string_view api_version = "2.07";  // a JSON number, written as the API wrote it
inline constexpr std::string_view success_message = "Request successful";

struct meta {
  std::int64_t requests = -1;  // the key's request count; -1 without a key
  std::int64_t timestamp = 0;  // Unix seconds
  unsigned status = 200;
  std::string_view message = success_message;
};

// JSON as the API printed it: two-space indents, no space after a colon, an empty object as "{\n\n  }".
std::string json_data(const std::vector<holiday>& holidays);  // the value of "data": an array
std::string json_document(const meta& m, std::string_view data);
inline constexpr std::string_view json_no_data = "{\n\n  }";  // `data` of an error

// <response><meta>...</meta><data><item><name/><date/></item>...</data></response>; a null field is an empty
// element.
std::string xml_data(const std::vector<holiday>& holidays);  // the whole <data> element
std::string xml_document(const meta& m, std::string_view data);
inline constexpr std::string_view xml_no_data = "<data></data>";

}  // namespace sluice::holidays

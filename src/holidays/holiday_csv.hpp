#pragma once
// The holiday list's CSV file (RFC 4180, UTF-8): a header naming a `name` (or the data steward's `holiday`)
// column and a `date` column, in either order, then one holiday per record. Parsing only; holiday_list owns
// reading and reloading.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::holidays {

// Either field may be null (an empty cell), as the API documents.
struct holiday {
  std::optional<std::string> name;
  std::optional<std::string> date;  // Y-m-d, a real calendar date
};

struct holiday_csv {
  std::vector<holiday> holidays;  // in file order
  std::string error;              // empty on success; otherwise "line N: what is wrong"
};

// Accepts LF or CRLF line ends, a UTF-8 byte order mark, quoted fields with "" escapes and line breaks,
// extra columns (ignored) and blank lines; unquoted fields are trimmed of spaces and tabs. Rejects invalid
// UTF-8, a record whose field count differs from the header's, a date that is not a Y-m-d calendar date,
// a control character in a name, and a file without holidays.
holiday_csv parse_holiday_csv(std::string_view text);

}  // namespace sluice::holidays

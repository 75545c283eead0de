#pragma once
// The served holiday list: the CSV file of HOLIDAYS_CSV (or the built-in copy of etc/holidays/holidays.csv),
// parsed and rendered in every format once per version. Requests take an immutable snapshot without a lock;
// a watched file is reloaded when it changes or is replaced, and a bad file keeps the previous version (the
// error, with its line, is logged).

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.hpp"
#include "core/problem.hpp"
#include "core/watched_file.hpp"
#include "holidays/holiday_csv.hpp"

namespace sluice::holidays {

// One version of the list with its formats rendered.
struct rendered_list {
  std::vector<holiday> holidays;
  std::string json_data;  // envelope.hpp: the value of "data"
  std::string xml_data;   // the <data> element
  std::string ics;        // the whole calendar
  std::int64_t loaded_at = 0;
};

// Renders every format; `loaded_at` (Unix seconds) is the calendar's DTSTAMP.
std::shared_ptr<const rendered_list> render(std::vector<holiday> holidays, std::int64_t loaded_at);

// The shipped list, compiled in.
extern const std::string_view builtin_holidays_csv;

class holiday_list {
 public:
  // `file` empty: the built-in list. Otherwise loads the file now; throws std::runtime_error
  // "<file>: line N: <what is wrong>".
  holiday_list(std::string file, const core::clock& clock);
  holiday_list(const holiday_list&) = delete;
  holiday_list& operator=(const holiday_list&) = delete;

  std::shared_ptr<const rendered_list> current() const { return current_.load(); }
  // "built-in" or the file's path.
  const std::string& source() const { return source_; }

  // Reloads the file after each burst of changes in its directory; nothing to do for the built-in list.
  void watch(boost::asio::any_io_executor ex,
             std::chrono::milliseconds debounce = std::chrono::milliseconds(100));
  // Re-reads the file now; the error (also logged) when it is refused.
  core::problem reload();
  void stop();

 private:
  core::problem apply(std::string_view text);

  const core::clock& clock_;
  std::string source_;
  std::atomic<std::shared_ptr<const rendered_list>> current_;
  std::unique_ptr<core::watched_file> file_;
};

}  // namespace sluice::holidays

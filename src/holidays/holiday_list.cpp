#include "holidays/holiday_list.hpp"

#include <stdexcept>

#include "core/log.hpp"
#include "holidays/envelope.hpp"
#include "holidays/ics_calendar.hpp"

namespace sluice::holidays {

std::shared_ptr<const rendered_list> render(std::vector<holiday> holidays, std::int64_t loaded_at) {
  auto out = std::make_shared<rendered_list>();
  out->json_data = json_data(holidays);
  out->xml_data = xml_data(holidays);
  out->ics = ics_calendar(holidays, loaded_at);
  out->holidays = std::move(holidays);
  out->loaded_at = loaded_at;
  return out;
}

holiday_list::holiday_list(std::string file, const core::clock& clock)
    : clock_(clock), source_(file.empty() ? "built-in" : file) {
  if (file.empty()) {
    if (auto error = apply(builtin_holidays_csv))
      throw std::runtime_error("the built-in holiday list: " + *error);  // a build error
    return;
  }
  file_ = std::make_unique<core::watched_file>(std::move(file),
                                               [this](const std::string& text) { return apply(text); });
}

core::problem holiday_list::apply(std::string_view text) {
  auto parsed = parse_holiday_csv(text);
  if (!parsed.error.empty()) return parsed.error;
  std::size_t count = parsed.holidays.size();
  current_.store(render(std::move(parsed.holidays), clock_.now_seconds()));
  core::log_info(source(), ": loaded ", count, " holidays");
  return std::nullopt;
}

void holiday_list::watch(boost::asio::any_io_executor ex, std::chrono::milliseconds debounce) {
  if (file_) file_->watch(std::move(ex), debounce);
}

core::problem holiday_list::reload() {
  return file_ ? file_->reload() : std::nullopt;
}

void holiday_list::stop() {
  if (file_) file_->stop();
}

}  // namespace sluice::holidays

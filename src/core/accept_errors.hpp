#pragma once
// One listening socket's episodes of accept errors (typically out of file descriptors): said once when an
// episode starts and once when it ends, however long it lasts, and told to `on_accepting` (the process
// health) each time.

#include <boost/system/error_code.hpp>
#include <functional>
#include <string>
#include <utility>

#include "core/log.hpp"

namespace sluice::core {

class accept_errors {
 public:
  // `listener` names it in the log ("HTTP", "gRPC").
  accept_errors(std::string listener, std::function<void(bool accepting)> on_accepting)
      : listener_(std::move(listener)), on_accepting_(std::move(on_accepting)) {}

  void failed(const boost::system::error_code& ec) {
    if (std::exchange(failing_, true)) return;
    log_warn(listener_, " accept failed: ", ec.message(), " (retrying)");
    if (on_accepting_) on_accepting_(false);
  }
  // A connection was accepted, or none is waiting and no error came.
  void accepting() {
    if (!std::exchange(failing_, false)) return;
    log_warn(listener_, " accepts connections again");
    if (on_accepting_) on_accepting_(true);
  }

 private:
  std::string listener_;
  std::function<void(bool)> on_accepting_;
  bool failing_ = false;
};

}  // namespace sluice::core

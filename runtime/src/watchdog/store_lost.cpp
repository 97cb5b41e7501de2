#include "ddx/watchdog/store_lost.h"

#include "ddx/text/clock_time.h"

namespace ddx {

StoreLost::StoreLost(std::string store, std::string cause, Clock::time_point since)
    : std::runtime_error(line(store, cause, since)), store_(std::move(store)), cause_(std::move(cause)) {}

std::string StoreLost::line(const std::string& store, const std::string& cause, Clock::time_point since) {
  return store + " is unreachable since " + log::clock_time(since) + " (" + cause + ")";
}

}  // namespace ddx

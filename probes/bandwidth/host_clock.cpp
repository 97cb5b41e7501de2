#include <chrono>

#include "bandwidth/engine.h"

namespace ddx::bw {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void HostIterationClock::begin(int i) {
  if (static_cast<size_t>(i) >= begin_.size()) {
    begin_.resize(i + 1);
    end_.resize(i + 1);
  }
  begin_[i] = now_seconds();
}

void HostIterationClock::end(int i) {
  if (static_cast<size_t>(i) >= end_.size()) {
    begin_.resize(i + 1);
    end_.resize(i + 1);
  }
  end_[i] = now_seconds();
}

std::vector<double> HostIterationClock::seconds(int n) const {
  std::vector<double> out;
  for (int i = 0; i < n && static_cast<size_t>(i) < begin_.size(); ++i) out.push_back(end_[i] - begin_[i]);
  return out;
}

}  // namespace ddx::bw

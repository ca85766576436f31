#include "runtime/stop_matcher.h"

#include <algorithm>

namespace pllm {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string_view StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  return release(false);
}

std::string_view StopMatcher::finish(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  return release(true);
}

std::string_view StopMatcher::release(bool all) {
  // Everything released so far was no stop string and no start of one, so a stop string can
  // only begin in the pending text.
  size_t end = pending_.size();
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos && at < end) {
      end = at;
      stopped_ = true;
    }
  }
  if (!stopped_ && !all) {
    size_t hold = 0;  // the longest tail that is a proper prefix of a stop string
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    end -= hold;
  }
  released_.assign(pending_, 0, end);
  pending_.erase(0, end);
  if (stopped_) pending_.clear();
  return released_;
}

}  // namespace pllm

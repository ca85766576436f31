// Stop strings over streamed text, for generate() and the server: text is released as it
// comes except a tail that may still grow into a stop string (held back until the next piece
// says), and nothing from the first completed stop string on is ever released.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pllm {

class StopMatcher {
 public:
  // Empty strings are ignored (they would match everywhere; callers reject them first).
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends text and returns what can be released now: everything before the first stop
  // string when one completed (then stopped() is true), else all but the longest tail that is
  // a proper prefix of a stop string. The view is valid until the next call.
  std::string_view push(std::string_view text);
  // The end of the stream: appends text and releases everything held back (up to a stop
  // string that completes in it). Nothing after a stop.
  std::string_view finish(std::string_view text = {});
  bool stopped() const { return stopped_; }

 private:
  std::string_view release(bool all);

  std::vector<std::string> stops_;
  std::string pending_;   // appended and not released yet
  std::string released_;  // what the last call released (reused: no allocation per token)
  bool stopped_ = false;
};

}  // namespace pllm

// StopMatcher: text goes out as it comes except a tail that may still become a stop string;
// nothing from a completed stop string on; a stop string split across pieces, across the
// bytes of a UTF-8 character, several stop strings, the held tail released at the end, a stop
// string at the very start.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/stop_matcher.h"

namespace pllm {
namespace {

// Pushes each piece and returns what was released, piece by piece.
std::vector<std::string> feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.emplace_back(m.push(p));
  return out;
}

TEST(StopMatcher, WithoutStopStringsEverythingGoesOutAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(feed(m, {"Hello", ", ", "world"}), (std::vector<std::string>{"Hello", ", ", "world"}));
  EXPECT_EQ(m.finish(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopStringSplitAcrossPieces) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(feed(m, {"ab S", "T", "O", "P and more"}), (std::vector<std::string>{"ab ", "", "", ""}));
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("later"), "");
  EXPECT_EQ(m.finish("tail"), "");
}

TEST(StopMatcher, HeldTailGoesOutWhenItCannotBecomeAStopString) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(feed(m, {"a <", "/", "x>"}), (std::vector<std::string>{"a ", "", "</x>"}));
  // A tail that restarts a stop string is held again.
  EXPECT_EQ(feed(m, {"<<", "/"}), (std::vector<std::string>{"<", ""}));
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HeldTailIsReleasedAtTheEnd) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("the EN"), "the ");
  EXPECT_EQ(m.finish(), "EN");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, TheEndCanCompleteAStopString) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("the EN"), "the ");
  EXPECT_EQ(m.finish("D!"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, StopStringAtTheVeryStart) {
  StopMatcher m({"User:"});
  EXPECT_EQ(m.push("User: hi"), "");
  EXPECT_TRUE(m.stopped());
  StopMatcher split({"User:"});
  EXPECT_EQ(feed(split, {"Us", "er", ":"}), (std::vector<std::string>{"", "", ""}));
  EXPECT_TRUE(split.stopped());
}

TEST(StopMatcher, TheEarliestOfSeveralStopStringsWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.push("hello world"), "hel");
  EXPECT_TRUE(m.stopped());
  // Overlapping candidates: the longest tail that starts any of them is held.
  StopMatcher o({"abc", "bcd"});
  EXPECT_EQ(o.push("xab"), "x");
  EXPECT_EQ(o.push("c"), "");
  EXPECT_TRUE(o.stopped());
  StopMatcher later({"abc", "bcd"});
  EXPECT_EQ(later.push("xa"), "x");
  EXPECT_EQ(later.push("bx"), "abx");  // neither completed: all out
  EXPECT_EQ(later.push("bcd"), "");
  EXPECT_TRUE(later.stopped());
}

TEST(StopMatcher, Utf8CharacterSplitAcrossPieces) {
  // "é!" is C3 A9 21: a lone lead byte C3 may start it, so it is held.
  StopMatcher m({"\xC3\xA9!"});
  EXPECT_EQ(m.push("caf\xC3"), "caf");
  EXPECT_EQ(m.push("\xA9"), "");
  EXPECT_EQ(m.push("?"), "\xC3\xA9?");  // "é?" is no stop string
  // "è" (C3 A8) shares the lead byte only.
  EXPECT_EQ(m.push("\xC3"), "");
  EXPECT_EQ(m.push("\xA8"), "\xC3\xA8");
  EXPECT_FALSE(m.stopped());
  // A stop string of one three-byte character, its bytes in two pieces.
  StopMatcher snow({"\xE2\x98\x83"});
  EXPECT_EQ(snow.push("a\xE2\x98"), "a");
  EXPECT_EQ(snow.push("\x83" "b"), "");
  EXPECT_TRUE(snow.stopped());
}

TEST(StopMatcher, WholeCharactersInWholeCharactersOut) {
  // Pieces of complete characters (what StreamDecoder gives): the cut before a held tail falls
  // on a character boundary, so every released piece is whole characters too.
  StopMatcher m({"\xC3\xA9!"});
  EXPECT_EQ(m.push("a\xC3\xA9"), "a");
  EXPECT_EQ(m.push("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(m.finish(), "\xC3\xA9");
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  StopMatcher m({"", "x"});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_FALSE(m.stopped());
}

}  // namespace
}  // namespace pllm

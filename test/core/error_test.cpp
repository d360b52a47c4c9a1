#include <gtest/gtest.h>

#include <string>

#include "hetrain/error.hpp"

using namespace hetrain;

TEST(Quoted, ShortValuesAppearWhole) {
  EXPECT_EQ(quoted("hetrain-dataset"), "'hetrain-dataset'");
  EXPECT_EQ(quoted(""), "''");
  EXPECT_EQ(quoted(std::string(kQuotedChars, 'a')), "'" + std::string(kQuotedChars, 'a') + "'");
  EXPECT_EQ(clipped("resnet20"), "resnet20");
}

TEST(Quoted, LongValuesAreClippedWithTheirSize) {
  const std::string big(50 << 20, 'x');
  const std::string q = quoted(big);
  EXPECT_EQ(q, "'" + std::string(kQuotedChars, 'x') + "\u2026' (" + std::to_string(big.size()) + " bytes)");
  EXPECT_EQ(clipped(big), std::string(kQuotedChars, 'x') + "\u2026");
  // One character over the limit is already clipped.
  EXPECT_NE(quoted(std::string(kQuotedChars + 1, 'y')).find(" bytes)"), std::string::npos);
}

TEST(Quoted, ControlCharactersKeepTheMessageOnOneLine) {
  EXPECT_EQ(quoted("a\nb\tc\rd\x01"), "'a\\nb\\tc\\rd\\x01'");
}

TEST(Quoted, NeverSplitsAUtf8Character) {
  // "é" is two bytes; an odd number of ASCII bytes in front puts the limit inside one of them.
  std::string v = "a";
  while (v.size() < 2 * kQuotedChars) v += "\u00e9";
  const std::string c = clipped(v);
  const std::string kept = c.substr(0, c.size() - std::string("\u2026").size());
  EXPECT_LE(kept.size(), kQuotedChars);
  EXPECT_EQ(kept.size() % 2, 1u);  // "a" and whole "é"s only
  EXPECT_EQ(v.compare(0, kept.size(), kept), 0);
}

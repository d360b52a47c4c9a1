// The local side of the asynchronous modes' elastic trade (src/train/elastic_trade.cpp): the difference
// moves the local weights toward the center by alpha, and what the center receives is exactly what the
// local weights gave up.
#include <gtest/gtest.h>

#include <vector>

#include "train/elastic_trade.hpp"

using namespace hetrain::train;

TEST(ElasticDifference, MovesTheWeightsTowardTheCenterByAlpha) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f, 3.0f};
  const std::vector<float> center = {0.0f, 2.0f, 0.5f, -1.0f};
  std::vector<float> delta(4);
  elastic_difference(w.data(), center.data(), delta.data(), 4, 0.25f);
  EXPECT_EQ(delta, (std::vector<float>{0.25f, -1.0f, 0.0f, 1.0f}));
  EXPECT_EQ(w, (std::vector<float>{0.75f, -1.0f, 0.5f, 2.0f}));
}

TEST(ElasticDifference, AlphaOneTakesTheCenterAndGivesAllTheDifference) {
  std::vector<float> w = {4.0f, -8.0f};
  const std::vector<float> center = {1.0f, 1.0f};
  std::vector<float> delta(2);
  elastic_difference(w.data(), center.data(), delta.data(), 2, 1.0f);
  EXPECT_EQ(w, center);
  EXPECT_EQ(delta, (std::vector<float>{3.0f, -9.0f}));
}

TEST(ElasticDifference, NothingMovesWhereTheWeightsAreTheCenter) {
  std::vector<float> w = {0.1f, 0.2f, 0.3f};
  const std::vector<float> center = w;
  std::vector<float> delta(3, 7.0f);
  elastic_difference(w.data(), center.data(), delta.data(), 3, 0.2f);
  EXPECT_EQ(w, center);
  EXPECT_EQ(delta, (std::vector<float>(3, 0.0f)));
}

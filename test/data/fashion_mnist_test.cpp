// Packs the real Fashion-MNIST from Debian's dataset-fashion-mnist package when it is installed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

TEST(FashionMnist, PacksTrainAndTestWithBalancedClasses) {
  const std::string d = "/usr/share/datasets/fashion-mnist/";
  struct stat st;
  if (::stat((d + "t10k-labels-idx1-ubyte.gz").c_str(), &st) != 0)
    GTEST_SKIP() << "Debian package dataset-fashion-mnist is not installed (" << d << ")";
  TempDir dir;
  for (auto [prefix, n] : {std::pair<std::string, int64_t>{"train", 60000}, {"t10k", 10000}}) {
    auto src = open_idx(d + prefix + "-images-idx3-ubyte.gz", d + prefix + "-labels-idx1-ubyte.gz", 10, {});
    PackOptions o;
    o.output = dir / (prefix + ".h5");
    o.progress = false;
    pack(*src, o);
    auto ds = Dataset::open(o.output);
    EXPECT_EQ(ds->info().num_samples, n);
    EXPECT_EQ(ds->info().height, 28);
    auto labels = ds->all_labels();
    std::vector<int64_t> hist(10, 0);
    for (int32_t l : labels) ++hist[l];
    for (int k = 0; k < 10; ++k) EXPECT_EQ(hist[k], n / 10) << prefix << " class " << k;
    EXPECT_NEAR(ds->info().mean[0], 0.286, 0.002);  // the published Fashion-MNIST statistics
    EXPECT_NEAR(ds->info().std[0], 0.353, 0.002);
  }
}

// nn/init.cpp
#include "nn/init.hpp"

#include <cmath>

#include "hetrain/error.hpp"

namespace hetrain::nn {

double PortableRng::uniform01() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

double PortableRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

double PortableRng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform01();  // (0, 1]: log is finite
  const double u2 = uniform01();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

void init_parameters(ParamBuffer& pb, uint64_t seed, ConvInit conv) {
  HT_CHECK(pb.finalized(), "init_parameters: parameter buffer not finalized");
  PortableRng rng(seed);
  int64_t last_fan_in = 0;
  for (size_t i = 0; i < pb.specs().size(); ++i) {
    const ParamSpec& s = pb.specs()[i];
    float* p = pb.values().data() + s.offset;
    const int64_t n = s.numel();
    switch (s.kind) {
      case ParamKind::ConvWeight: {  // [K, C, R, S]
        HT_CHECK(s.shape.size() == 4, "init: conv weight '", s.name, "' is not 4-D: ", shape_str(s.shape));
        const int64_t fan_out = s.shape[0] * s.shape[2] * s.shape[3];
        last_fan_in = s.shape[1] * s.shape[2] * s.shape[3];
        if (conv == ConvInit::PyTorchDefault) {
          const double bound = 1.0 / std::sqrt(static_cast<double>(last_fan_in));
          for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(rng.uniform(-bound, bound));
        } else {
          const double stddev = std::sqrt(2.0 / static_cast<double>(fan_out));
          for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(stddev * rng.normal());
        }
        break;
      }
      case ParamKind::LinearWeight: {  // [O, I]
        HT_CHECK(s.shape.size() == 2, "init: linear weight '", s.name, "' is not 2-D: ", shape_str(s.shape));
        last_fan_in = s.shape[1];
        const double bound = 1.0 / std::sqrt(static_cast<double>(last_fan_in));
        for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(rng.uniform(-bound, bound));
        break;
      }
      case ParamKind::Bias: {
        HT_CHECK(last_fan_in > 0, "init: bias '", s.name, "' does not follow a weight");
        const double bound = 1.0 / std::sqrt(static_cast<double>(last_fan_in));
        for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(rng.uniform(-bound, bound));
        break;
      }
      case ParamKind::BnWeight:
        for (int64_t j = 0; j < n; ++j) p[j] = 1.0f;
        break;
      case ParamKind::BnBias:
        for (int64_t j = 0; j < n; ++j) p[j] = 0.0f;
        break;
    }
  }
  pb.reset_states();
}

}  // namespace hetrain::nn

// nn/init.hpp — portable random numbers and torchvision-style parameter initialisation.
//
// std::mt19937_64's output sequence is fixed by the C++ standard, but std::normal_distribution and
// friends are not: libstdc++ and libc++ give different numbers. So uniforms are built from 53 raw bits and
// normals by our own Box–Muller transform: the same seed gives the same bits on every rank and machine
// (given a libm whose log/sqrt/cos/sin agree, as glibc's do across x86-64 hosts).
#pragma once

#include <cstdint>
#include <random>

#include "hetrain/nn.hpp"

namespace hetrain::nn {

class PortableRng {
 public:
  explicit PortableRng(uint64_t seed) : gen_(seed) {}
  double uniform01();                  // [0, 1), 53 random bits
  double uniform(double lo, double hi);  // [lo, hi)
  double normal();                     // N(0, 1); Box–Muller, the second value of each pair is kept for the next call

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// How convolution weights start: torchvision's ResNets re-initialise them; YOLOv5 keeps PyTorch's default.
enum class ConvInit {
  KaimingNormalFanOut,  // N(0, 2 / (K·R·S)): Kaiming normal, mode fan_out, ReLU gain (torchvision ResNet)
  PyTorchDefault,       // U(−1/√(C·R·S), 1/√(C·R·S)): kaiming_uniform with a = √5 (YOLOv5's detectors)
};

// Initialises every parameter in declaration order from one stream seeded with `seed`, and resets the
// states (BN running statistics):
//   ConvWeight   as `conv` says
//   LinearWeight U(−1/√fan_in, 1/√fan_in)   (PyTorch default: kaiming_uniform with a = √5)
//   Bias         U(−1/√fan_in, 1/√fan_in) with the fan_in of the weight declared just before it
//   BnWeight 1, BnBias 0
void init_parameters(ParamBuffer& pb, uint64_t seed, ConvInit conv = ConvInit::KaimingNormalFanOut);

}  // namespace hetrain::nn

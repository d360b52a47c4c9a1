// ops/conv2d/dnnl_absent/dnnl_conv_absent.cpp — what a build without oneDNN gets instead of ../dnnl/: the
// same functions, never chosen (available() is false) and failing loudly if called.
#include "ops/conv2d/dnnl_conv.hpp"
#include "hetrain/error.hpp"

namespace hetrain::ops::cpu::dnnl_conv {

bool available() { return false; }
const char* isa_name() { return "none"; }
int64_t workspace_floats(const Conv2dGeom&) { return 0; }
void forward(float*, const float*, const float*, const Conv2dGeom&, float*) {
  HT_THROW("conv2d: this hetrain was built without oneDNN (install libdnnl-dev and rebuild)");
}
void backward(float*, float*, const float*, const float*, const float*, const Conv2dGeom&, float*) {
  HT_THROW("conv2d: this hetrain was built without oneDNN (install libdnnl-dev and rebuild)");
}

}  // namespace hetrain::ops::cpu::dnnl_conv

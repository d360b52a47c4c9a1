// ops/dispatch.cpp — the errors of the op dispatch, and the registry of filled slots.
#include "ops/dispatch.hpp"

#include "hetrain/cuda.hpp"

namespace hetrain::ops {

namespace {
// A function-local static: registrations run during static initialisation, in any order between units.
std::vector<RegisteredSlot>& slots() {
  static std::vector<RegisteredSlot> list;
  return list;
}
}  // namespace

void register_slot(const char* table, Device device) { slots().push_back({table, device}); }
const std::vector<RegisteredSlot>& registered_slots() { return slots(); }

void throw_no_implementation(const char* op, Device device) {
  if (device == Device::CUDA && !cuda_built())
    HT_THROW(op, ": a CUDA tensor, but hetrain was built without CUDA: rebuild with CUDA=1");
  HT_THROW(op, ": no ", device_name(device), " implementation (src/ops/ lists each op's implementations)");
}

Device common_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t || !t->defined()) continue;
    if (!first) {
      first = t;
    } else if (t->device() != first->device()) {
      HT_THROW(op, ": tensors on different devices (", device_name(first->device()), " and ",
               device_name(t->device()), ")");
    }
  }
  HT_CHECK(first, op, ": no tensor given");
  return first->device();
}

void check_shape(const char* op, const char* what, const Tensor& t, const Shape& expected) {
  HT_CHECK(t.shape() == expected, op, ": ", what, " is ", shape_str(t.shape()), ", expected ", shape_str(expected));
}

}  // namespace hetrain::ops

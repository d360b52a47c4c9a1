// ops/dispatch.hpp — the tables through which every op chooses between its CPU and GPU implementations.
//
// Each op is a folder src/ops/<op>/ and a CUDA twin kernels/<op>.cu (docs/architecture.md, "Ops"):
//   <op>.hpp        the Tensor-level entry points layers call (they pick the device from the tensors), and
//                   the op's Dispatch tables;
//   <op>.cpp        the CPU implementation, the entry points, and the CPU slot of each table;
//   kernels/<op>.cu the CUDA twin, which fills the CUDA slots. Only a CUDA build compiles it.
// A table's slot is filled while the program starts (HT_OP_IMPLEMENTATION); the ops archive is linked
// whole, so no registration is dropped. In a CPU-only build the CUDA slots stay empty and a CUDA tensor
// given to the op fails with "<op>: built without CUDA" — no stub has to be written for a new op.
// Every filled slot is also recorded, by table name and device, in one registry (registered_slots), which
// the tests walk: test/support/nan_rules.hpp holds each table's NaN rule and fails for a table without one.
#pragma once

#include <initializer_list>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain::ops {

[[noreturn]] void throw_no_implementation(const char* op, Device device);

// One filled slot of one Dispatch table.
struct RegisteredSlot {
  const char* table;  // the table's name, as Dispatch::name() gives it
  Device device;
};
// Records a filled slot (Dispatch::define calls it while the program starts).
void register_slot(const char* table, Device device);
// Every slot filled so far, in the order they were filled; after start-up, every op of the program.
const std::vector<RegisteredSlot>& registered_slots();

// The implementations of one op function, one slot per device. Defined by the op's unit as a namespace-scope
// object; its constexpr constructor makes it constant-initialised, so it exists before any registration
// runs, whatever the order of static initialisation between the unit's files.
template <typename Fn>
class Dispatch {
 public:
  constexpr explicit Dispatch(const char* name) : name_(name) {}
  bool define(Device device, Fn* fn) {
    slots_[slot(device)] = fn;
    register_slot(name_, device);
    return true;
  }
  bool has(Device device) const { return slots_[slot(device)] != nullptr; }
  Fn* on(Device device) const {
    Fn* fn = slots_[slot(device)];
    if (!fn) throw_no_implementation(name_, device);
    return fn;
  }
  const char* name() const { return name_; }

 private:
  static int slot(Device device) { return device == Device::CUDA ? 1 : 0; }
  const char* name_;
  Fn* slots_[2] = {nullptr, nullptr};
};

#define HT_OP_CONCAT_(a, b) a##b
#define HT_OP_CONCAT(a, b) HT_OP_CONCAT_(a, b)
// Fills `table`'s slot for `device` with `fn` while the program starts. At namespace scope in the op's
// .cpp (Device::CPU) or .cu (Device::CUDA).
#define HT_OP_IMPLEMENTATION(table, device, fn) \
  [[maybe_unused]] static const bool HT_OP_CONCAT(ht_op_registered_, __COUNTER__) = (table).define((device), (fn))

// The device all `tensors` share (undefined tensors are skipped: e.g. an optional bias); throws naming `op`
// when they are on different devices.
Device common_device(const char* op, std::initializer_list<const Tensor*> tensors);
// Throws naming `op` and `what` when `t`'s shape is not `expected`.
void check_shape(const char* op, const char* what, const Tensor& t, const Shape& expected);

}  // namespace hetrain::ops

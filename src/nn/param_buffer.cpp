// nn/param_buffer.cpp — two-phase flat parameter / gradient / state buffers.
#include <cmath>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"

namespace hetrain::nn {

namespace {
void check_new_name(const std::vector<ParamSpec>& a, const std::vector<ParamSpec>& b, const std::string& name) {
  HT_CHECK(!name.empty(), "ParamBuffer: empty parameter name");
  for (const auto* list : {&a, &b})
    for (const auto& s : *list) HT_CHECK(s.name != name, "ParamBuffer: duplicate name '", name, "'");
}
}  // namespace

int ParamBuffer::declare(const std::string& name, Shape shape, ParamKind kind) {
  HT_CHECK(!finalized_, "ParamBuffer: declare('", name, "') after finalize()");
  check_new_name(specs_, state_specs_, name);
  // Each parameter starts on a 64-float (256-byte) boundary, the alignment cudaMalloc gives a buffer:
  // cuDNN and cuBLAS take every view as its own tensor, and a bias of 255 floats (a Detect head with 80
  // classes) would leave every later weight only 4-byte aligned. The padding is zero and stays zero
  // (docs/architecture.md, "Parameters in one buffer").
  ParamSpec s{name, std::move(shape), kind, (count_ + kParamAlignment - 1) / kParamAlignment * kParamAlignment};
  count_ = s.offset + s.numel();
  parameters_ += s.numel();
  specs_.push_back(std::move(s));
  return static_cast<int>(specs_.size()) - 1;
}

int ParamBuffer::declare_state(const std::string& name, Shape shape, float initial_value) {
  HT_CHECK(!finalized_, "ParamBuffer: declare_state('", name, "') after finalize()");
  check_new_name(specs_, state_specs_, name);
  // The kind of a state is not used; BnWeight is a placeholder.
  ParamSpec s{name, std::move(shape), ParamKind::BnWeight, state_count_};
  state_count_ += s.numel();
  state_specs_.push_back(std::move(s));
  state_init_.push_back(initial_value);
  return static_cast<int>(state_specs_.size()) - 1;
}

void ParamBuffer::finalize() {
  HT_CHECK(!finalized_, "ParamBuffer: finalize() called twice");
  values_ = Tensor({count_});
  grads_ = Tensor({count_});
  states_ = Tensor({state_count_});
  reset_states();
  finalized_ = true;
}

void ParamBuffer::reset_states() {
  Tensor host = states_.device() == Device::CPU ? states_ : Tensor({state_count_});
  for (size_t i = 0; i < state_specs_.size(); ++i) {
    const ParamSpec& s = state_specs_[i];
    float* p = host.data() + s.offset;
    for (int64_t j = 0; j < s.numel(); ++j) p[j] = state_init_[i];
  }
  if (host.data() != states_.data()) states_.copy_from(host);
}

void ParamBuffer::to(Device device) {
  HT_CHECK(finalized_, "ParamBuffer: to() before finalize()");
  values_ = values_.to(device);
  grads_ = grads_.to(device);
  states_ = states_.to(device);
}

Tensor ParamBuffer::param(int index) const {
  HT_CHECK(finalized_, "ParamBuffer: param() before finalize()");
  HT_CHECK(index >= 0 && index < static_cast<int>(specs_.size()), "ParamBuffer: no parameter #", index);
  const ParamSpec& s = specs_[index];
  return Tensor::view_of(values_.data() + s.offset, s.shape, values_.device());
}

Tensor ParamBuffer::grad(int index) const {
  HT_CHECK(finalized_, "ParamBuffer: grad() before finalize()");
  HT_CHECK(index >= 0 && index < static_cast<int>(specs_.size()), "ParamBuffer: no parameter #", index);
  const ParamSpec& s = specs_[index];
  return Tensor::view_of(grads_.data() + s.offset, s.shape, grads_.device());
}

Tensor ParamBuffer::state(int index) const {
  HT_CHECK(finalized_, "ParamBuffer: state() before finalize()");
  HT_CHECK(index >= 0 && index < static_cast<int>(state_specs_.size()), "ParamBuffer: no state #", index);
  const ParamSpec& s = state_specs_[index];
  return Tensor::view_of(states_.data() + s.offset, s.shape, states_.device());
}

int ParamBuffer::find(const std::string& name) const {
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return static_cast<int>(i);
  return -1;
}

int ParamBuffer::find_state(const std::string& name) const {
  for (size_t i = 0; i < state_specs_.size(); ++i)
    if (state_specs_[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string describe_nonfinite(const std::vector<ParamSpec>& specs, const float* flat) {
  for (const ParamSpec& spec : specs) {
    const float* v = flat + spec.offset;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < spec.numel(); ++i)
      if (!std::isfinite(v[i])) first = first < 0 ? i : first, ++bad;
    if (bad > 0)
      return spec.name + " (" + std::to_string(bad) + " of " + std::to_string(spec.numel()) +
             " values are NaN/Inf, the first at element " + std::to_string(first) + ")";
  }
  return "";
}

}  // namespace hetrain::nn

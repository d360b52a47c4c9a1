// nn/weight_average.cpp — YOLOv5's moving average of the weights over ops::ema_update (any device).
#include <cmath>
#include <exception>
#include <utility>

#include "hetrain/error.hpp"
#include "hetrain/optim.hpp"
#include "ops/ema/ema.hpp"

namespace hetrain::optim {

WeightAverage::WeightAverage(const nn::ParamBuffer& params, float decay, float ramp)
    : decay_(decay), ramp_(ramp), values_(params.values().clone()), states_(params.states().clone()) {
  HT_CHECK(params.finalized(), "weight average: parameter buffer not finalized");
  HT_CHECK(std::isfinite(decay) && decay > 0.0f && decay < 1.0f, "weight average: decay must be in (0, 1), got ",
           decay);
  HT_CHECK(std::isfinite(ramp) && ramp > 0.0f, "weight average: ramp must be > 0 updates, got ", ramp);
}

float WeightAverage::decay_at(int64_t updates) const {
  return float(double(decay_) * (1.0 - std::exp(-double(updates) / double(ramp_))));
}

void WeightAverage::update(const nn::ParamBuffer& params) {
  HT_CHECK(params.count() == values_.numel() && params.state_count() == states_.numel(),
           "weight average: built for another model");
  const Device device = params.device();
  if (values_.device() != device) values_ = values_.to(device);  // moved at the first update there
  if (states_.device() != device) states_ = states_.to(device);
  const float d = decay_at(++updates_);
  ops::ema_update(values_, params.values(), d);
  if (states_.numel() > 0) ops::ema_update(states_, params.states(), d);
}

void WeightAverage::update_towards(const Tensor& values, int64_t times) {
  HT_CHECK(values.numel() == values_.numel(), "weight average: built for another model");
  if (times <= 0) return;
  double product = 1.0;
  for (int64_t k = 0; k < times; ++k) product *= double(decay_at(++updates_));
  const Tensor target = values.device() == values_.device() ? values : values.to(values_.device());
  ops::ema_update(values_, target, float(product));
}

void WeightAverage::exchange(nn::ParamBuffer& params) {
  for (auto [mine, model] : {std::pair<Tensor*, Tensor*>{&values_, &params.values()}, {&states_, &params.states()}}) {
    if (mine->numel() == 0) continue;
    if (mine->device() != model->device()) *mine = mine->to(model->device());
    const Tensor held = model->clone();
    model->copy_from(*mine);
    mine->copy_from(held);
  }
}

AverageSwappedIn::AverageSwappedIn(WeightAverage& average, nn::ParamBuffer& params)
    : average_(average), params_(params) {
  average_.exchange(params_);
}
// A failed copy back can only come from a failing device, which ends the run anyway: not thrown from here.
AverageSwappedIn::~AverageSwappedIn() {
  try {
    average_.exchange(params_);
  } catch (const std::exception&) {
  }
}

}  // namespace hetrain::optim

#include <sstream>

#include "hetrain/train.hpp"

namespace hetrain::train {

std::string TrainConfig::canonical() const {
  std::ostringstream os;
  auto list = [](const auto& v) {
    std::ostringstream o;
    for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
    return o.str();
  };
  // Everything that changes the math or the sample order. Output paths and verbosity may differ per rank.
  os << "data=" << data_path << "\nval=" << val_path << "\nsynthetic=" << synthetic
     << "\nsynthetic_val=" << synthetic_val << "\nsynthetic_shape=" << list(synthetic_shape)
     << "\nsynthetic_classes=" << synthetic_classes << "\naugment=" << augment << "\nresized_crop=" << resized_crop << "\nno_augment=" << no_augment
     << "\ndetect_augment=" << detect_augment.describe() << "\nprefetch=" << prefetch_depth << "\ncache=" << node_cache
     << "\nval_every_samples=" << val_every_samples << "\nlast_batch=" << last_batch << "\nmodel=" << model << "\nglobal_batch=" << global_batch << "\naccumulate=" << accumulate
     << "\nepochs=" << epochs << "\nmax_steps=" << max_steps << "\nstop_at_step=" << stop_at_step << "\nlr=" << lr << "\nlinear_scaling=" << linear_scaling
     << "\nwarmup_epochs=" << warmup_epochs << "\nwarmup_min_steps=" << warmup_min_steps
     << "\nwarmup_bias_lr=" << warmup_bias_lr << "\nwarmup_momentum=" << warmup_momentum << "\nschedule=" << schedule << "\nmilestones=" << list(milestones)
     << "\ngamma=" << gamma << "\nmomentum=" << momentum << "\nnesterov=" << nesterov
     << "\nweight_decay=" << weight_decay << "\ndecay_bn_and_bias=" << decay_bn_and_bias
     << "\nlabel_smoothing=" << label_smoothing << "\nema_decay=" << ema_decay << "\nema_ramp=" << ema_ramp << "\nbn=" << batch_norm << "\nprecision=" << precision_name(precision) << "\nseed=" << seed << "\nbalance=" << balance
     << "\nmode=" << mode << "\ngroups=" << groups << "\nelastic_alpha=" << elastic_alpha
     << "\nelastic_every=" << elastic_every << "\nlocal_batch=" << local_batch
     << "\nrebalance_every=" << rebalance_every << "\nmax_local_batch=" << max_local_batch
     << "\nemulate_speed=" << emulate_speed << "\nemulate_schedule=" << emulate_schedule
     << "\nsplit=" << fixed_split << "\nbucket_mb=" << bucket_mb << "\nhierarchical=" << hierarchical
     << "\nreduce_precision=" << reduce_precision << "\ncompress=" << compress << "\ncompress_start=" << compress_start
     << "\ndebug_consistency=" << debug_consistency
     << "\ncheckpoint_every=" << checkpoint_every << "\ncheckpoint_minutes=" << checkpoint_minutes
     << "\nkeep_checkpoints=" << keep_checkpoints << "\nresume=" << resume << "\ninit_from=" << init_from << "\nstall_timeout=" << stall_timeout
     << "\n";
  return os.str();
}

}  // namespace hetrain::train

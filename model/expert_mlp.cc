#include "model/expert_mlp.h"

namespace conveyor {

ExpertMlp::ExpertMlp(const Ops* ops, ParameterStore* store, const std::string& name, int64_t hidden,
                     int64_t ffn, bool swiglu, float init_std, float output_std,
                     const TensorParallel& tp)
    : ops_(ops),
      local_ffn_(ffn / tp.size()),
      swiglu_(swiglu),
      fc1_(ops, store, name + ".fc1", hidden, swiglu ? 2 * ffn : ffn, /*bias=*/false, init_std,
           LinearParallelism::kColumn, Fc1Sharding(ffn, swiglu, tp)),
      fc2_(ops, store, name + ".fc2", ffn, hidden, /*bias=*/false, output_std,
           LinearParallelism::kRow, Sharding::Block(1, ffn, tp.size(), tp.rank())) {}

void ExpertMlp::Forward(const Tensor& x, ExpertStash* stash, Tensor* y) const {
  const int64_t rows = x.dim(0);
  stash->fc1_out = ops_->NewActivation({rows, fc1_.local_out()});
  stash->act = ops_->NewActivation({rows, local_ffn_});
  if (rows == 0) return;
  if (swiglu_) {
    fc1_.Forward(x, &stash->fc1_out);
    ops_->SwigluForward(stash->fc1_out, &stash->act);
  } else {
    fc1_.ForwardGelu(x, &stash->fc1_out, &stash->act);
  }
  fc2_.Forward(stash->act, y);
}

void ExpertMlp::BackwardInput(const Tensor& dy, ExpertStash* stash, Tensor* dx) const {
  const int64_t rows = dy.dim(0);
  stash->dy = dy;
  stash->d_fc1 = ops_->NewActivation({rows, fc1_.local_out()});
  if (rows == 0) return;
  if (swiglu_) {
    Tensor d_act = ops_->NewActivation({rows, local_ffn_});
    fc2_.BackwardInput(dy, &d_act);
    ops_->SwigluBackward(stash->fc1_out, d_act, &stash->d_fc1);
  } else {
    fc2_.BackwardInputGelu(dy, stash->fc1_out, &stash->d_fc1);
  }
  fc1_.BackwardInput(stash->d_fc1, dx);
  stash->fc1_out = Tensor();  // W needs the activation, not fc1's output
}

void ExpertMlp::BackwardWeight(const Tensor& x, ExpertStash* stash) {
  if (x.dim(0) > 0) {
    fc2_.BackwardWeight(stash->act, stash->dy);
    fc1_.BackwardWeight(x, stash->d_fc1);
  }
  *stash = ExpertStash();
}

}  // namespace conveyor

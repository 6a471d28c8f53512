#include "tests/trainer/config_fixtures.h"

#include "tests/trainer/layout_runs.h"

namespace conveyor {
namespace testing_util {

Config SmallestValidConfig() {
  Config c;
  c.mutable_data()->set_mock_data(true);
  c.mutable_model()->set_vocab_size(1000);
  return c;
}

Config ConstantBatchSegment(int32_t global_batch, int32_t last, const std::string& dir) {
  Config c = TinyConfig(Layout{});
  c.mutable_training()->set_global_batch_size(global_batch);
  c.mutable_training()->set_num_micro_batches(0);
  c.mutable_training()->set_train_iters(last);
  c.mutable_optimizer()->set_lr_decay_style("constant");
  c.mutable_optimizer()->set_lr_warmup_iters(0);
  c.mutable_optimizer()->set_lr_decay_iters(last);
  c.mutable_checkpoint()->set_save(dir);
  c.mutable_checkpoint()->set_load(dir);
  return c;
}

}  // namespace testing_util
}  // namespace conveyor

// Prints docs/hf_config_fields.md from the field tables:
//   bazel run //tests/trainer/hf:hf_config_fields_doc > docs/hf_config_fields.md
// (hf_config_fields_test fails until the file equals this output).
#include <iostream>

#include "trainer/hf/hf_config_fields.h"

int main() {
  std::cout << conveyor::HfConfigFieldsMarkdown();
  return 0;
}

// Setting Conveyor's model flags from a Hugging Face config.json while keeping those the
// user gave: a flag already set (on the command line or by --config) to another value
// than the file's is a contradiction, collected with every feature the file asks for
// that Conveyor lacks, so that one message lists them all.
#ifndef CONVEYOR_TRAINER_HF_MODEL_FLAGS_FROM_FILE_H_
#define CONVEYOR_TRAINER_HF_MODEL_FLAGS_FROM_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/config.pb.h"

namespace conveyor {

class ModelFlagsFromFile {
 public:
  // `path` (config.json, named in messages) and `model` must outlive this object.
  ModelFlagsFromFile(const std::string& path, ModelConfig* model);

  // `field` (a ModelConfig field) takes `value`, which config.json's `key` says.
  void Int(const char* field, const std::string& key, int64_t value);
  void Float(const char* field, const std::string& key, double value);
  // `says` is how the file's choice reads in a message ("SwiGLU").
  void Bool(const char* field, const std::string& key, bool value, const std::string& says);
  void String(const char* field, const std::string& key, const std::string& value);
  // A feature the file asks for that Conveyor lacks.
  void Unsupported(const std::string& what) { problems_.push_back(what); }

  // InvalidArgument listing every contradiction and unsupported feature; OK without.
  absl::Status Status() const;

 private:
  const google::protobuf::FieldDescriptor* Field(const char* name) const;
  bool Given(const google::protobuf::FieldDescriptor* f) const;
  void Contradiction(const google::protobuf::FieldDescriptor* f, const std::string& flag_value,
                     const std::string& key, const std::string& file_value);

  const std::string& path_;
  ModelConfig* model_;
  const google::protobuf::Reflection& reflection_;
  std::vector<std::string> problems_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MODEL_FLAGS_FROM_FILE_H_

#include "trainer/hf/model_flags_from_file.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flags/proto_flags.h"
#include "trainer/hf/json_text.h"

namespace conveyor {

using google::protobuf::FieldDescriptor;

ModelFlagsFromFile::ModelFlagsFromFile(const std::string& path, ModelConfig* model)
    : path_(path), model_(model), reflection_(*model->GetReflection()) {}

void ModelFlagsFromFile::Int(const char* field, const std::string& key, int64_t value) {
  const FieldDescriptor* f = Field(field);
  if (Given(f) && reflection_.GetInt32(*model_, f) != value) {
    Contradiction(f, absl::StrCat(reflection_.GetInt32(*model_, f)), key, absl::StrCat(value));
  } else {
    reflection_.SetInt32(model_, f, static_cast<int32_t>(value));
  }
}

void ModelFlagsFromFile::Float(const char* field, const std::string& key, double value) {
  const FieldDescriptor* f = Field(field);
  const float wanted = static_cast<float>(value);
  if (Given(f) && reflection_.GetFloat(*model_, f) != wanted) {
    Contradiction(f, JsonFloat(reflection_.GetFloat(*model_, f)), key, PythonFloat(value));
  } else {
    reflection_.SetFloat(model_, f, wanted);
  }
}

void ModelFlagsFromFile::Bool(const char* field, const std::string& key, bool value,
                              const std::string& says) {
  const FieldDescriptor* f = Field(field);
  if (Given(f) && reflection_.GetBool(*model_, f) != value) {
    Contradiction(f, reflection_.GetBool(*model_, f) ? "true" : "false", key, says);
  } else {
    reflection_.SetBool(model_, f, value);
  }
}

void ModelFlagsFromFile::String(const char* field, const std::string& key,
                                const std::string& value) {
  const FieldDescriptor* f = Field(field);
  if (Given(f) && reflection_.GetString(*model_, f) != value) {
    Contradiction(f, reflection_.GetString(*model_, f), key, value);
  } else {
    reflection_.SetString(model_, f, value);
  }
}

absl::Status ModelFlagsFromFile::Status() const {
  if (problems_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--load-hf: ", path_, " cannot configure this model:\n  ", absl::StrJoin(problems_, "\n  ")));
}

const FieldDescriptor* ModelFlagsFromFile::Field(const char* name) const {
  return ModelConfig::descriptor()->FindFieldByName(name);
}

bool ModelFlagsFromFile::Given(const FieldDescriptor* f) const {
  return reflection_.HasField(*model_, f);
}

void ModelFlagsFromFile::Contradiction(const FieldDescriptor* f, const std::string& flag_value,
                                       const std::string& key, const std::string& file_value) {
  problems_.push_back(absl::StrCat(FlagName(*f), " ", flag_value, " contradicts ", key, " = ",
                                   file_value, " in ", path_,
                                   ": drop the flag (the file sets it) or load another model"));
}

}  // namespace conveyor

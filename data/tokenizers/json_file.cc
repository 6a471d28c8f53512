#include "data/tokenizers/json_file.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/mapped_file.h"

namespace conveyor {

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  const char* begin = file->data() == nullptr ? "" : file->data();
  try {
    return nlohmann::json::parse(begin, begin + file->size());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
}

}  // namespace conveyor

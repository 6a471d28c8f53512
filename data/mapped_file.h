// A read-only memory map of a whole file. Token files can be far larger than
// RAM; mapping them lets the page cache serve only the samples touched.
#ifndef CONVEYOR_DATA_MAPPED_FILE_H_
#define CONVEYOR_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace conveyor {

class MappedFile {
 public:
  // Errors name `path`: NotFound when it does not exist, FailedPrecondition
  // when it is a directory.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const char* data_;  // nullptr for an empty file (mmap rejects length 0)
  size_t size_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_MAPPED_FILE_H_

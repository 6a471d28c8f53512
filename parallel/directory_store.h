// A key-value store in a directory shared by the ranks, used for rendezvous (gloo
// addresses, the NCCL unique id). It replaces gloo's FileStore, which in Debian's
// gloo (git 2022-05-18) waits a fixed 30 s in get() whatever the group's timeout,
// measures timeouts in whole seconds, refuses to overwrite a key and cannot tell
// whether a key exists without blocking, which is what names a missing rank.
#ifndef CONVEYOR_PARALLEL_DIRECTORY_STORE_H_
#define CONVEYOR_PARALLEL_DIRECTORY_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"

namespace conveyor {

class DirectoryStore : public gloo::rendezvous::Store {
 public:
  // Creates `dir` (and parents) if needed. `timeout` bounds get() and wait(keys).
  static absl::StatusOr<std::unique_ptr<DirectoryStore>> Open(const std::string& dir,
                                                              std::chrono::milliseconds timeout);

  // gloo's interface; failures throw gloo::IoException (gloo expects that), with the
  // directory and the missing keys in the message.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Never blocks.
  bool Has(const std::string& key) const;
  const std::string& dir() const { return dir_; }

 private:
  DirectoryStore(std::string dir, std::chrono::milliseconds timeout)
      : dir_(std::move(dir)), timeout_(timeout) {}
  std::string PathOf(const std::string& key) const;

  std::string dir_;
  std::chrono::milliseconds timeout_;
};

// A file-system-safe name for `text` (percent-encodes all but [A-Za-z0-9_-[],] and
// interior dots), so group names such as "tp[0,1]" name directories as they are.
std::string EncodeFileName(const std::string& text);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_DIRECTORY_STORE_H_

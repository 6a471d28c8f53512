// MD5 (RFC 1321) as lowercase hex. Megatron names its cached index files by
// the MD5 of a description of the parameters; Conveyor does the same, and no
// crypto library is in the build for one digest. Not for security.
#ifndef CONVEYOR_DATA_MD5_H_
#define CONVEYOR_DATA_MD5_H_

#include <string>

#include "absl/strings/string_view.h"

namespace conveyor {

std::string Md5Hex(absl::string_view data);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_MD5_H_

#include "common/version.hpp"

#include "velox_version.hpp"

namespace velox {
const char* version() { return VELOX_VERSION; }
const char* git_commit() { return VELOX_GIT_COMMIT; }
}  // namespace velox

#pragma once
namespace velox {
const char* version();     // semantic version of this build
const char* git_commit();  // short git commit at configure time, or "unknown"
}  // namespace velox

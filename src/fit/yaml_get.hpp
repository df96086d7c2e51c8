// Reading a section of a YAML config file and its optional keys (config.cpp, select.cpp,
// build_config.cpp).
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

#include "common/error.hpp"

namespace velox {

// The `section` node of the YAML file at `path` (a null node when the section is absent).
// Throws ConfigError "PATH: cannot read YAML config: reason".
inline YAML::Node yaml_section(const std::string& path, const char* section) {
  try {
    return YAML::LoadFile(path)[section];
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": cannot read YAML config: " + e.what());
  }
}

// Sets `out` from n[key] if present; throws ConfigError "PATH: SECTION.KEY: reason".
template <class T>
void yaml_get(const YAML::Node& n, const char* section, const char* key, T& out,
              const std::string& path) {
  if (!n[key]) return;
  try {
    out = n[key].as<T>();
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": " + section + "." + key + ": " + e.what());
  }
}

}  // namespace velox

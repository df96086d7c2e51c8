// Reading one optional key of a YAML config section (config.cpp, select.cpp).
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

#include "common/error.hpp"

namespace velox {

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

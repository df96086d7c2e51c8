// Reading a section of a YAML config file key by key (config.cpp, select.cpp,
// build_config.cpp), strictly: a section or key that no loader reads is an error (exit 2) that
// names the nearest valid one, so a typo never silently falls back to a default.
#pragma once
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace velox {

// The sections a velox config file may hold (one file may serve `velox fit` and
// `velox templates build`); any other top-level key is an error.
inline const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> s = {"fit", "select", "templates"};
  return s;
}

// The name in `valid` closest to `name` by edit distance (Levenshtein; ties: first listed).
inline std::string nearest_name(const std::string& name, const std::vector<std::string>& valid) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& v : valid) {
    std::vector<size_t> row(v.size() + 1);
    for (size_t j = 0; j <= v.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= name.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= v.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (name[i - 1] != v[j - 1])});
        diag = up;
      }
    }
    if (row[v.size()] < best_d) best_d = row[v.size()], best = v;
  }
  return best;
}

// One section of a YAML config file. The loader's own get() / operator[] calls are the list of
// valid keys: check_unknown(), called once the loader has read every key, rejects any other key
// of the section. Adding a key therefore takes one get() line in the loader and nothing else.
class YamlSection {
 public:
  // Loads `section` of the YAML file at `path` (a null section when absent or the file is
  // empty). Throws ConfigError "PATH: cannot read YAML config: reason", and for a top-level key
  // that is not one of config_sections() ("PATH: unknown section 'fitt:' (did you mean
  // 'fit:'?)").
  YamlSection(std::string path, const char* section) : path_(std::move(path)), section_(section) {
    YAML::Node root;
    try {
      root = YAML::LoadFile(path_);
    } catch (const YAML::Exception& e) {
      throw ConfigError(path_ + ": cannot read YAML config: " + e.what());
    }
    if (!root || root.IsNull()) return;
    if (!root.IsMap())
      throw ConfigError(path_ + ": a velox config is a YAML mapping of sections (fit:, ...)");
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (std::find(config_sections().begin(), config_sections().end(), key) ==
          config_sections().end())
        throw ConfigError(path_ + ": unknown section '" + key + ":' (did you mean '" +
                          nearest_name(key, config_sections()) + ":'?)");
    }
    node_ = root[section_];
    if (node_ && !node_.IsNull() && !node_.IsMap())
      throw ConfigError(path_ + ": section '" + section_ + ":' must be a mapping of keys");
    if (node_ && node_.IsNull()) node_ = YAML::Node();
  }

  explicit operator bool() const { return node_.IsDefined() && node_.IsMap(); }

  // The node of `key` (undefined when absent); `key` becomes a valid key.
  YAML::Node operator[](const char* key) {
    known_.emplace_back(key);
    const YAML::Node& n = node_;  // const lookup: never adds the key
    return *this ? n[key] : YAML::Node();
  }

  // Sets `out` from the key if present; throws ConfigError "PATH: SECTION.KEY: reason".
  template <class T>
  void get(const char* key, T& out) {
    const YAML::Node n = (*this)[key];
    if (!n) return;
    try {
      out = n.as<T>();
    } catch (const YAML::Exception& e) {
      throw ConfigError(path_ + ": " + section_ + "." + key + ": " + e.what());
    }
  }

  // Throws ConfigError "PATH: SECTION.KEY: unknown key (did you mean SECTION.NEAREST?)" for the
  // first key of the section that was never asked for.
  void check_unknown() const {
    if (!*this) return;
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      if (std::find(known_.begin(), known_.end(), key) == known_.end())
        throw ConfigError(path_ + ": " + section_ + "." + key + ": unknown key (did you mean " +
                          section_ + "." + nearest_name(key, known_) + "?)");
    }
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_, section_;
  YAML::Node node_;
  std::vector<std::string> known_;
};

}  // namespace velox

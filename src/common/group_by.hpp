// Grouping items by a key in the order they come (--epochs: spectra into stars, app/epochs.cpp;
// input files into input groups, app/job_plan.cpp).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace velox {

// The indices of `keys` grouped by equal key, groups in the order of their first item, items in
// order; an empty key makes a group of its own item.
inline std::vector<std::vector<size_t>> group_by_key(const std::vector<std::string>& keys) {
  std::vector<std::vector<size_t>> groups;
  std::map<std::string, size_t> index;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (keys[k].empty()) {
      groups.push_back({k});
      continue;
    }
    const auto [it, fresh] = index.emplace(keys[k], groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(k);
  }
  return groups;
}

}  // namespace velox

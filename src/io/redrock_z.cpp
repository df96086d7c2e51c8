#include "io/redrock_z.hpp"

#include <filesystem>

#include "common/error.hpp"
#include "io/fits.hpp"

namespace velox {

namespace fs = std::filesystem;

std::string find_redrock_file(const std::string& input) {
  const fs::path p(input);
  std::string name = p.filename().string();
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0)
    name.resize(name.size() - 3);
  for (const char* pre : {"coadd-", "spectra-"}) {
    const std::string pr(pre);
    if (name.compare(0, pr.size(), pr) != 0) continue;
    const std::string rest = name.substr(pr.size());
    for (const char* zpre : {"redrock-", "zbest-"})
      for (const char* post : {"", ".gz"}) {
        const fs::path cand = p.parent_path() / (std::string(zpre) + rest + post);
        std::error_code ec;
        if (fs::is_regular_file(cand, ec)) return cand.string();
      }
  }
  return "";
}

std::map<int64_t, RedrockZ> read_redrock_z(const std::string& path) {
  auto f = fits::File::open_read(path);
  if (f.has_hdu("REDSHIFTS"))
    f.move_to("REDSHIFTS");
  else if (f.has_hdu("ZBEST"))
    f.move_to("ZBEST");
  else
    throw IoError(path + ": no REDSHIFTS (or ZBEST) HDU: not a redrock file");
  for (const char* c : {"TARGETID", "Z", "SPECTYPE"})
    if (!f.has_column(c)) f.fail(std::string("column ") + c + ": not found (not a redrock file)");
  const auto id = f.read_column_int64("TARGETID");
  const auto z = f.read_column_double("Z");
  const auto type = f.read_column_string("SPECTYPE");
  std::map<int64_t, RedrockZ> out;
  for (size_t i = 0; i < id.size() && i < z.size() && i < type.size(); ++i)
    out[id[i]] = {z[i], type[i]};
  return out;
}

}  // namespace velox

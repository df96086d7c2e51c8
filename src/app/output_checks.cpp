#include "app/output_checks.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "app/fit_outputs.hpp"
#include "app/job_outputs.hpp"
#include "common/error.hpp"
#include "io/fits.hpp"
#include "io/h5.hpp"

namespace velox {

namespace fs = std::filesystem;

namespace {


// Can a new file be created in `dir`? Tried for real (a probe file, removed at once): the
// permission bits do not tell for root, read-only mounts or full quotas.
bool can_create_in(const fs::path& dir, std::string& why) {
  const fs::path probe = dir / fmt::format(".velox-write-test.{}", getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

fs::path folder_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

// The root attribute velox_kind of an HDF5 file; empty if it is not a velox HDF5 file.
std::string velox_kind_of(const std::string& path) {
  try {
    const auto f = h5::File::open_read(path);
    return f.has_attr("/", "velox_kind") ? f.attr_string("/", "velox_kind") : "";
  } catch (const IoError&) {
    return "";
  }
}

// A FITS file velox wrote with --output-format fits (it has an RVTAB table).
bool is_rvtab_fits(const std::string& path) {
  try {
    return fits::File::open_read(path).has_hdu("RVTAB");
  } catch (const IoError&) {
    return false;
  }
}

// An RVTAB table velox wrote: rvspecfit's tables have the same layout and names
// (rvtab_coadd-*.fits), so the primary header's software list tells (DEPNAM00 = velox).
bool is_velox_rvtab(const std::string& path) {
  try {
    auto f = fits::File::open_read(path);
    return f.has_hdu("RVTAB") && f.key_string("DEPNAM00", "") == "velox";
  } catch (const IoError&) {
    return false;
  }
}

// The root attributes of an HDF5 file that say what a velox catalog is; empty when unreadable.
// "readable" is "1" when the file opened as HDF5 (its attributes are then what it has).
std::map<std::string, std::string> catalog_attrs(const std::string& path) {
  std::map<std::string, std::string> out;
  try {
    const auto f = h5::File::open_read(path);
    out["readable"] = "1";
    for (const char* k : {"velox_kind", "input_path", kMergeOfAttr, "merge_command_line"})
      if (f.has_attr("/", k)) out[k] = f.attr_string("/", k);
  } catch (const IoError&) {
  }
  return out;
}

// What velox may not replace at an input's per-input catalog name: an HDF5 file that is not a
// velox catalog, a merge, or another input's catalog. Empty when it may (its own catalog, or a
// file that does not open as HDF5: a damaged catalog, which the resume refits).
std::string foreign_catalog(const std::string& path, const std::string& input) {
  auto a = catalog_attrs(path);
  if (a["readable"].empty()) return "";
  if (a["velox_kind"] != "catalog") return "not a velox catalog";
  if (!a[kMergeOfAttr].empty() || !a["merge_command_line"].empty()) return "a merged catalog";
  if (!a["input_path"].empty() && input_stem(a["input_path"]) != input_stem(input))
    return "the per-input catalog of " + a["input_path"];
  return "";
}


using FileId = std::pair<dev_t, ino_t>;
std::optional<FileId> file_id(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

const char* describe_kind(const std::string& velox_kind) {
  return velox_kind == "catalog"            ? "velox catalog"
         : velox_kind == "template-library" ? "velox template library"
                                            : "velox file";
}

}  // namespace

void check_output_file(const std::string& option, const std::string& path,
                       const std::string& velox_kind, bool overwrite) {
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw ConfigError(fmt::format("{} {}: is a folder; give a file name (e.g. {}/{})", option, path,
                                  path,
                                  velox_kind == "catalog" ? "catalog.h5"
                                  : velox_kind.empty()    ? "table.csv"
                                                          : "lib.h5"));
  const fs::path dir = folder_of(path);
  if (!fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("{} {}: folder {} does not exist (create it first)", option, path,
                                  dir.string()));
  std::string why;
  if (!can_create_in(dir, why))
    throw ConfigError(
        fmt::format("{} {}: cannot write in folder {}: {}", option, path, dir.string(), why));
  if (!overwrite && fs::exists(path, ec)) {
    const std::string kind = velox_kind_of(path);
    if (kind != velox_kind)
      throw ConfigError(fmt::format(
          "{} {}: the file exists and is not a {} ({}); velox replaces only its own outputs: "
          "choose another name, or add --overwrite to replace it",
          option, path, describe_kind(velox_kind),
          kind.empty() ? "not a velox HDF5 file" : "velox_kind " + kind));
  }
}

void check_output_folder(const std::string& option, const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("{} {}: exists and is not a folder", option, dir));
  fs::create_directories(dir, ec);
  if (ec)
    throw ConfigError(
        fmt::format("{} {}: cannot create the folder: {}", option, dir, ec.message()));
  std::string why;
  if (!can_create_in(dir, why))
    throw ConfigError(fmt::format("{} {}: cannot write in the folder: {}", option, dir, why));
}

std::string catalog_path_for(const std::string& option, const std::string& path,
                             const std::string& output_format) {
  if (path.empty() || ends_with(path, ".h5") || ends_with(path, ".hdf5")) return path;
  if (output_format == "fits" && ends_with(path, ".fits"))
    return path.substr(0, path.size() - 5) + ".h5";
  const fs::path stem = fs::path(path).replace_extension("");
  if (ends_with(path, ".fits") || ends_with(path, ".fit"))
    throw ConfigError(fmt::format(
        "{} {}: the catalog is an HDF5 file: name it {}.h5, or add --output-format fits to "
        "write an rvspecfit-layout FITS table ({}.fits) beside it",
        option, path, stem.string(), stem.string()));
  throw ConfigError(
      fmt::format("{} {}: the catalog is an HDF5 file: name it NAME.h5 (or .hdf5){}", option, path,
                  option == "--output" ? "; with --output-format fits, NAME.fits" : ""));
}

void check_fit_outputs(const FitOptions& opt, const std::vector<JobInput>& inputs) {
  const std::string fits_table =
      !opt.output.empty() && opt.output_format == "fits" ? FitOutputs::fits_path(opt.output) : "";

  // What the job reads, by file identity, with a name for the message.
  std::map<FileId, std::string> reads;
  auto add = [&](const std::string& path, const std::string& what) {
    if (const auto id = file_id(path)) reads.emplace(*id, what);
  };
  add(opt.templates, "the template library (--templates)");
  add(opt.config, "the --config file");
  add(opt.input_list, "the --input-list file");
  add(opt.targetid_file, "the --targetid-file");
  for (size_t i = 0; i < inputs.size(); ++i)
    add(inputs[i].path, fmt::format("input {} of {} ({})", i + 1, inputs.size(), inputs[i].path));
  auto guard = [&](const std::string& option, const std::string& path) {
    const auto id = file_id(path);
    if (!id) return;
    const auto it = reads.find(*id);
    if (it != reads.end())
      throw ConfigError(
          fmt::format("{} {}: this file is {}; velox never overwrites what it reads "
                      "(not even with --overwrite): choose another output name",
                      option, path, it->second));
  };
  guard("--output", opt.output);
  guard("--output-format fits: table", fits_table);
  guard("--merge", opt.merge);
  if (!opt.output_dir.empty()) {
    guard("--output-dir: status file", (fs::path(opt.output_dir) / "status.tsv").string());
    // --merge inside the output dir must not take a per-input catalog's name.
    std::error_code ec;
    const bool merge_in_dir =
        !opt.merge.empty() &&
        fs::weakly_canonical(folder_of(opt.merge), ec) == fs::weakly_canonical(opt.output_dir, ec);
    const auto merge_name = fs::path(opt.merge).filename();
    for (const auto& in : inputs) {
      if (in.catalog.empty()) continue;
      guard("--output-dir: per-input catalog", in.catalog);
      if (merge_in_dir && fs::path(in.catalog).filename() == merge_name)
        throw ConfigError(fmt::format(
            "--merge {}: this is the per-input catalog of {}; give the merged catalog another name",
            opt.merge, in.path));
    }
  }

  // Folders exist and are writable; existing files are velox outputs (or --overwrite).
  check_output_file("--output", opt.output, "catalog", opt.overwrite);
  if (!fits_table.empty() && !opt.overwrite && fs::exists(fits_table) && !is_rvtab_fits(fits_table))
    throw ConfigError(fmt::format(
        "--output-format fits: {} exists and is not a velox rvspecfit-layout table (no RVTAB "
        "HDU); choose another --output name, or add --overwrite to replace it",
        fits_table));
  // An existing --output catalog (and its FITS table) is never replaced silently, not even a
  // velox catalog: a rerun that writes fewer rows would lose the others (issue 24).
  std::error_code ec_out;
  for (const auto& [what, path] : {std::pair<const char*, std::string>{"--output", opt.output},
                                   {"--output-format fits: table", fits_table}})
    if (!opt.overwrite && !path.empty() && fs::exists(path, ec_out))
      throw ConfigError(fmt::format(
          "{} {}: the file exists; velox never replaces a catalog silently: choose another "
          "name, or add --overwrite to replace it",
          what, path));
  check_output_folder("--output-dir", opt.output_dir);
  check_merge_target(opt);
  check_output_folder("--log-dir", opt.log_dir);
  if (opt.output_dir.empty() || opt.overwrite) return;
  // What an --output-dir run would replace: only velox's own per-input files. A foreign file
  // under a per-input name (an rvspecfit rvtab_coadd-*.fits, another program's HDF5) is refused.
  std::vector<std::string> foreign;
  for (const auto& in : inputs) {
    if (in.catalog.empty()) continue;
    std::error_code ec;
    if (fs::exists(in.catalog, ec))
      if (const std::string why = foreign_catalog(in.catalog, in.path); !why.empty())
        foreign.push_back(in.catalog + " (" + why + ")");
    if (opt.output_format != "fits") continue;
    const std::string rvtab = per_input_rvtab(opt.output_dir, in.path, !opt.desi_root.empty());
    if (fs::exists(rvtab, ec) && !is_velox_rvtab(rvtab))
      foreign.push_back(rvtab + " (not written by velox: no DEPNAM00 = velox; an rvspecfit table?)");
  }
  if (!foreign.empty())
    throw ConfigError(fmt::format(
        "--output-dir {}: {} file(s) velox would replace are not its own outputs, first: {}; "
        "velox replaces only what it wrote: choose another --output-dir, move them away, or add "
        "--overwrite to replace them",
        opt.output_dir, foreign.size(), foreign.front()));
}

void check_merge_target(const OutputOptions& opt) {
  if (opt.merge.empty()) return;
  check_output_file("--merge", opt.merge, "catalog", opt.overwrite);
  std::error_code ec;
  const std::string here = merge_folder_id(opt.output_dir);
  if (!opt.overwrite && fs::exists(opt.merge, ec)) {
    auto a = catalog_attrs(opt.merge);
    const bool legacy_merge = a["velox_kind"] == "catalog" && a[kMergeOfAttr].empty() &&
                              a["input_path"].empty() && !a["merge_command_line"].empty();
    if (legacy_merge)
      spdlog::warn("--merge {}: a merge written by a velox before 2026-11 (it does not say which "
                   "folder it merges): replaced",
                   opt.merge);
    else if (a[kMergeOfAttr] != here) {
      const std::string what =
          !a["input_path"].empty()
              ? "the per-input catalog of " + a["input_path"]
              : !a[kMergeOfAttr].empty() ? "a merge of another folder, " + a[kMergeOfAttr]
                                         : "a velox catalog that is not a merge of " + here +
                                               " (an --output catalog, or a merge by an older "
                                               "velox)";
      throw ConfigError(fmt::format(
          "--merge {}: the file exists and is {}; velox replaces only an earlier merge of the "
          "same folder: choose another name, or add --overwrite to replace it",
          opt.merge, what));
    }
  }
  // A merge is never named like a per-input catalog (in this folder or another one's): a merge
  // or resume there would read it back as one input.
  if (ends_with(fs::path(opt.merge).filename().string(), ".velox.h5"))
    throw ConfigError(fmt::format(
        "--merge {}: names ending in .velox.h5 are per-input catalogs; name the merged catalog "
        "otherwise (e.g. {}/merged.h5)",
        opt.merge, opt.output_dir.empty() ? "." : opt.output_dir));
  if (opt.overwrite || opt.output_format != "fits") return;
  const std::string table = FitOutputs::fits_path(opt.merge);
  if (fs::exists(table, ec) && (!is_velox_rvtab(table) || !fs::exists(opt.merge, ec)))
    throw ConfigError(fmt::format(
        "--merge {}: its table {} exists and is not the table of an earlier merge of this "
        "folder; choose another name, or add --overwrite to replace it",
        opt.merge, table));
}

}  // namespace velox

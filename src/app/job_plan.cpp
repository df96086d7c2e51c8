#include "app/job_plan.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iterator>
#include <map>

#include "app/fit_identity.hpp"
#include "app/fit_outputs.hpp"
#include "app/job_outputs.hpp"
#include "app/output_checks.hpp"
#include "common/error.hpp"
#include "common/group_by.hpp"
#include "io/fits_guard.hpp"

namespace velox {

namespace fs = std::filesystem;

void validate_job_options(FitOptions& opt) {
  const bool any_input = !opt.inputs.empty() || !opt.input_list.empty() || !opt.input_dir.empty() ||
                         !opt.desi_root.empty();
  if (!opt.merge.empty() && opt.output_dir.empty())
    throw ConfigError("--merge needs --output-dir (the per-input catalogs it merges)");
  if (!opt.output.empty() && !opt.output_dir.empty())
    throw ConfigError(
        "give either --output (one catalog) or --output-dir (one per input, "
        "merged with --merge)");
  if (opt.output.empty() && opt.output_dir.empty())
    throw ConfigError("no output: give --output FILE or --output-dir DIR");
  if (!any_input && opt.merge.empty())
    throw ConfigError("no input files (give FILES, --input-list or --input-dir/--glob)");
  if (any_input && opt.templates.empty()) throw ConfigError("--templates is required to fit");
  if (!opt.epochs && opt.group_by != "TARGETID")
    throw ConfigError("--group-by " + opt.group_by + " needs --epochs");
  if (opt.epochs && opt.group_by.empty()) throw ConfigError("--group-by: empty key");
  if (opt.epochs && opt.save_models)
    throw ConfigError(
        "--epochs with --save-models: not supported (the models are per spectrum, "
        "the catalog per star)");
  check_fit_config(opt.config);
  // The select: section with --objtypes, --targetid-file, --output-format.
  FitOutputs check(opt, opt.config, opt);
  opt.output = catalog_path_for("--output", opt.output, opt.output_format);
  opt.merge = catalog_path_for("--merge", opt.merge, "h5");
}

bool merge_only(const FitOptions& o) {
  return o.inputs.empty() && o.input_list.empty() && o.input_dir.empty() && o.desi_root.empty() &&
         !o.merge.empty();
}

bool wants_merged(const OutputOptions& o) { return !o.output.empty() || !o.merge.empty(); }

size_t chunk_min_spectra(int threads) {
  return threads <= 1 ? 1 : 4 * static_cast<size_t>(threads);
}

std::vector<std::string> group_inputs(const std::vector<std::string>& paths,
                                      const std::string& key) {
  std::vector<std::string> values(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].find('\n') != std::string::npos)
      throw ConfigError("input file name with a newline: " + paths[i]);
    values[i] = fits::primary_header_value(paths[i], key);  // the header only, not the whole file
  }
  std::vector<std::string> out;
  for (const auto& g : group_by_key(values)) {
    std::vector<std::string> members;
    for (size_t i : g) members.push_back(paths[i]);
    out.push_back(join_members(members));
  }
  spdlog::info("fit --epochs: {} input files in {} stars by header key {}", paths.size(),
               out.size(), key);
  return out;
}

std::vector<JobInput> plan_inputs(const FitOptions& opt) {
  auto paths = collect_inputs(opt);
  if (paths.empty())
    throw ConfigError("no input files (give FILES, --input-list or --input-dir/--glob)");
  if (groups_files(opt)) paths = group_inputs(paths, opt.group_by);
  std::vector<JobInput> inputs;
  std::map<std::string, std::string> by_catalog;
  for (const auto& p : paths) {
    JobInput in{p, 0, ""};
    for (const auto& m : input_members(p)) {
      std::error_code ec;
      if (fs::is_directory(m, ec))
        throw ConfigError(
            fmt::format("{}: is a directory: use --input-dir {} (with --glob) to fit "
                        "the files in it",
                        m, m));
      const uintmax_t bytes = fs::file_size(m, ec);
      if (!ec) in.bytes += bytes;  // unreadable: the reader reports it as a failed input
    }
    if (!opt.output_dir.empty()) {
      in.catalog = per_input_catalog(opt.output_dir, p, !opt.desi_root.empty());
      auto [it, fresh] = by_catalog.emplace(in.catalog, p);
      if (!fresh)
        throw ConfigError(
            fmt::format("inputs {} and {} would both write {}", it->second, p, in.catalog));
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

int merge_existing(const OutputOptions& opt, const JobOptions& job) {
  check_merge_target(opt);  // before reading them all
  const auto found = catalogs_in(opt.output_dir, opt.merge);
  if (found.empty()) throw ConfigError(opt.output_dir + ": no *.velox.h5 catalogs to merge");
  std::vector<CatalogRow> rows;
  std::vector<std::string> inputs;  // each catalog's input, for /provenance/inputs
  std::vector<std::string> files;   // the per-input catalogs merged
  std::vector<size_t> start;        // each catalog's first row in `rows`
  std::vector<CatalogRow> epochs;   // --epochs: every catalog's /epochs rows
  std::vector<std::string> bad;     // "file: why" of catalogs that fail their check
  size_t n_unsealed = 0;            // catalogs of a velox before the row seal, merged unchecked
  Provenance prov;
  for (const auto& f : found) {
    Provenance p;
    bool sealed = false;
    std::vector<CatalogRow> part;
    try {
      part = read_catalog(f, &p, &sealed);
    } catch (const IoError& e) {
      bad.push_back(e.what());
      continue;
    }
    // A merge (of any folder) is never read back as an input.
    if (p.count(kMergeOfAttr) || !p.count("input_path")) {
      spdlog::warn("merge: {} is not a per-input catalog ({}); not merged", f,
                   p.count(kMergeOfAttr) ? "a merge of " + p[kMergeOfAttr]
                                         : "no input_path attribute");
      continue;
    }
    if (!sealed && part.empty()) {
      bad.push_back(f + ": has no seal of its rows (written by a velox before 2026-11) and no "
                        "rows (what a write lost at close left then)");
      continue;
    }
    n_unsealed += !sealed;
    files.push_back(f);
    if (prov.empty()) prov = p;
    // Rows of two libraries or configurations are never merged (fit_identity.hpp).
    const std::string diff = identity_difference(identity_of(p), identity_of(prov), files.front());
    if (!diff.empty())
      throw ConfigError(fmt::format(
          "--merge: {} was fitted differently from {}: {}; velox never mixes them silently. "
          "Rerun the fit over these inputs with --refit-changed, then merge",
          f, files.front(), diff));
    inputs.push_back(p.count("input_path") ? p["input_path"] : f);
    start.push_back(rows.size());
    split_epoch_rows(part, &rows, &epochs);  // --epochs: the epochs follow all stars
  }
  // No row is dropped silently: a catalog that fails its check stops the merge, by name.
  if (!bad.empty())
    throw IoError(fmt::format(
        "--merge: {} of the {} per-input catalogs in {} fail their check, so the merge is not "
        "written; first: {}. Rerun the fit over their inputs (the same velox fit command "
        "resumes and refits them), then merge",
        bad.size(), found.size(), opt.output_dir, bad.front()));
  if (files.empty()) throw ConfigError(opt.output_dir + ": no per-input catalogs to merge");
  if (n_unsealed)
    spdlog::warn(
        "merge: {} per-input catalogs were written by a velox before 2026-11, without a seal of "
        "their rows: merged as they read (refit them with --overwrite to seal them)",
        n_unsealed);
  start.push_back(rows.size());
  for (const char* k : {"input_path", "mpi_rank"}) prov.erase(k);
  prov[kMergeOfAttr] = merge_folder_id(opt.output_dir);
  prov["merge_command_line"] = job.command_line;
  prov["n_input_files"] = std::to_string(files.size());
  // FIBERMAP/SCORES from the inputs themselves (side_tables), as a fitting run writes them.
  const bool fits = opt.output_format == "fits";
  std::vector<InputRows> per_input;
  for (size_t i = 0; i < files.size(); ++i)
    per_input.push_back({inputs[i], rows.data() + start[i], start[i + 1] - start[i]});
  const SideTables side = side_tables(per_input, fits);
  const size_t n_stars = rows.size();
  try {
    if (fits) write_rvtab_fits(FitOutputs::fits_path(opt.merge), rows, prov, side, epochs);
    rows.insert(rows.end(), epochs.begin(), epochs.end());
    write_catalog(opt.merge, rows, prov, [&](h5::File& h) {
      write_input_list(h, inputs);
      write_side_h5(h, side);
    });
  } catch (const IoError& e) {
    std::error_code ec;
    if (fits) std::filesystem::remove(FitOutputs::fits_path(opt.merge), ec);  // both or neither
    spdlog::error("merge: {} not written: {}; exit code {}: free space, then merge again",
                  opt.merge, e.what(), int(kExitOutputFailed));
    return kExitOutputFailed;
  }
  spdlog::info("merge: {} rows from {} catalogs in {} -> {}", n_stars, files.size(), opt.output_dir,
               opt.merge);
  return kExitOk;
}

}  // namespace velox

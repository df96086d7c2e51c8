// Checks of every path a job will write, made before any work (issue 11; docs/running.md
// "Outputs"): a bad output path must never cost a fit, and nothing but an output is ever
// overwritten. Every check throws ConfigError (exit 2) with one plain line naming the option,
// the path and what to do.
#pragma once
#include <string>
#include <vector>

#include "app/fit_run.hpp"
#include "app/job_plan.hpp"

namespace velox {

// Checks a file a command will write: not a directory; its folder exists and a file can be
// created in it; an existing file there must be a velox HDF5 file whose root attribute
// velox_kind equals `velox_kind` ("catalog", "template-library"), unless `overwrite`.
// `option` names the path in messages ("--output").
void check_output_file(const std::string& option, const std::string& path,
                       const std::string& velox_kind, bool overwrite);

// Checks a folder a command will write into, creating it (and its parents) if needed.
void check_output_folder(const std::string& option, const std::string& dir);

// The file-name rule of --output and --merge: the catalog is HDF5, NAME.h5 or NAME.hdf5. With
// --output-format fits, --output may also be NAME.fits: the catalog is then NAME.h5 and the
// rvspecfit table NAME.fits. Returns the HDF5 path; throws ConfigError for other names.
std::string catalog_path_for(const std::string& option, const std::string& path,
                             const std::string& output_format);

// Rank 0 of `velox fit`, after planning the inputs and before loading the library: every
// output (--output and its FITS table, --output-dir and its per-input catalogs and status.tsv,
// --merge, --log-dir) passes the checks above, and none of them is the same file as an input,
// the template library, the --config, --input-list or --targetid-file (compared by device and
// inode, so links and relative paths are caught). An input or the library is refused even with
// --overwrite. An existing --output catalog or its FITS table is refused without --overwrite,
// whatever it holds (a velox catalog too: it is never replaced silently).
// With --output-dir and without --overwrite, an existing file at a per-input catalog's or
// rvtab's name that velox did not write (not a velox catalog; an rvtab without DEPNAM00 =
// velox, e.g. rvspecfit's own) is refused.
void check_fit_outputs(const FitOptions& opt, const std::vector<JobInput>& inputs);

// The --merge target, in every mode (merge-only too): check_output_file, and without
// --overwrite an existing file must be an earlier merge of the same --output-dir (root attribute
// kMergeOfAttr, job_outputs.hpp), its FITS table (--output-format fits) velox's too; a name
// ending in .velox.h5 inside --output-dir is refused (it would read back as a per-input
// catalog). Throws ConfigError naming what the file is.
void check_merge_target(const OutputOptions& opt);

}  // namespace velox

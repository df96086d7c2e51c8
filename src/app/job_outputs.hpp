// Outputs of a `velox fit` job other than the fit itself: per-input catalog paths, the status
// file and the merged catalog. Used by rank 0's RootJob (app/job.hpp). Layouts:
// docs/running.md.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "app/fit_run.hpp"

namespace velox {

// An input group (--epochs with a --group-by header key, job_plan.hpp): the files of one star, in
// one input whose path joins them with newlines (no file name the job accepts holds one). A
// plain input is a group of one.
std::vector<std::string> input_members(const std::string& input);
std::string join_members(const std::vector<std::string>& members);

// "spec-1-2.fits.gz" -> "spec-1-2": the file name without .gz/.fz/.bz2 and then .fits/.fit/.fts.
// An input group: the first member's stem + "+<number of other members>".
std::string input_stem(const std::string& path);
// True when `s` ends with `suffix` (file-name suffixes).
bool ends_with(const std::string& s, const std::string& suffix);
// DIR/<input stem>.velox.h5; `tree` (inputs from --desi-root): DIR/PIXGROUP/PIXNUM/<stem>.velox.h5,
// the input's two parent folders, as rvspecfit's desi_fit.py mirrors the healpix tree.
std::string per_input_catalog(const std::string& dir, const std::string& input, bool tree = false);
// DIR/rvtab_<input stem>.fits (same folder as the catalog): the per-input rvspecfit-layout table,
// named as rvspecfit's desi_fit.py names it (rvtab_coadd-sv3-dark-26065.fits).
std::string per_input_rvtab(const std::string& dir, const std::string& input, bool tree = false);

// One line of DIR/status.tsv (tab-separated; tabs and newlines in the error become spaces).
struct StatusLine {
  std::string input;
  std::string status;  // ok | partial (an input group with a bad member) | failed | skipped
  size_t targets = 0;
  double seconds = 0.0;
  int rank = -1;       // -1 for skipped inputs
  std::string error;
};
StatusLine status_of(const FileResult& r);

// DIR/status.tsv, appended as inputs finish and written out after each batch of them (flush()),
// so a killed job leaves its progress behind, then rewritten atomically in input order by
// finish(). The file reserves its space when it is opened (fallocate, KEEP_SIZE: about
// kReserveBytesPerInput per input, at most 64 MiB), so that a full disk still gets every status line. The
// constructor throws IoError; a failed append/flush is logged once and retried at the next
// flush, and finish() falls back to rewriting the reserved file in place when the atomic
// rewrite fails (no space for a second file), throwing IoError only when both fail.
class StatusFile {
 public:
  static constexpr size_t kReserveBytesPerInput = 1024;
  StatusFile(const std::string& dir, size_t n_inputs);
  ~StatusFile();
  StatusFile(const StatusFile&) = delete;
  StatusFile& operator=(const StatusFile&) = delete;
  void append(const StatusLine& line);
  void flush();
  void finish(const std::vector<StatusLine>& in_input_order);

 private:
  std::string path_;
  int fd_ = -1;
  off_t reserve_ = 0;    // bytes reserved with fallocate
  std::string pending_;  // lines not yet written
  bool warned_ = false;
};

// The root attribute of a merged catalog (--merge) naming the folder it merges, as
// merge_folder_id gives it (the canonical path of --output-dir): only a merge of the same folder
// is replaced without --overwrite (output_checks.hpp check_merge_target), and a merge is never
// read back as a per-input catalog.
constexpr const char* kMergeOfAttr = "merge_of_output_dir";
std::string merge_folder_id(const std::string& dir);

// Remove DIR/*.velox.h5.tmp and *.fits.tmp (also in DIR/*/*/) left by a killed job; returns how many.
size_t remove_stale_temps(const std::string& dir);

// Every DIR/*.velox.h5 except `exclude`, sorted by name (for --merge without inputs).
std::vector<std::string> catalogs_in(const std::string& dir, const std::string& exclude);

}  // namespace velox

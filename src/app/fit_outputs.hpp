// DESI production-mode parts of `velox fit`, kept out of the driver (fit_run.cpp):
//  - target selection per input file (fit/select.hpp), with rows for unselected fibres under
//    --include-unselected (RVS_WARN NOT_FITTED, SUCCESS false);
//  - FIBERMAP columns of the catalog (TARGET_RA, TARGET_DEC, REF_ID, REF_CAT, FIBER, EXPID);
//  - /fibermap (whole FIBERMAP row per catalog row) and /models/<arm> (--save-models);
//  - the rvspecfit-layout FITS file (--output-format fits: HDUs RVTAB, FIBERMAP, SCORES).
// FIBERMAP and SCORES rows are re-read from the inputs when a catalog is written
// (side_tables), so any rank layout writes them and nothing is held during the fit.
// Data model: docs/data-model.md and docs/desi.md.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/fit_options.hpp"
#include "fit/fitter.hpp"
#include "fit/select.hpp"
#include "io/catalog.hpp"
#include "io/row_table.hpp"
#include "io/spectrum.hpp"

namespace velox {

// Best-fit models per arm, aligned with the catalog rows (NaN where not fitted).
class ModelStore {
 public:
  // Appends one row. spec/diag null: all NaN. The model goes back on the arm's full pixel grid
  // (NaN at unused pixels); an arm whose grid differs from the stored one is interpolated
  // linearly onto it.
  void add_row(const Spectrum* spec, const FitDiagnostics* diag);
  void write_h5(h5::File& f) const;  // /models/<arm> [n_rows][n_pix] float32, /models/<arm>_wave
  size_t n_rows() const { return n_; }

 private:
  struct Arm {
    std::string name;
    std::vector<double> wave;
    std::vector<float> data;  // [n_rows][wave.size()]
  };
  Arm& arm(const std::string& name, const std::vector<double>& wave);
  std::vector<Arm> arms_;
  size_t n_ = 0;
};

class FitOutputs {
 public:
  // Builds the selection from the config file's `select:` section (`config`, may be empty) and
  // `sel` (--objtypes, --targetid(-file), --min-sn, --include-unselected, --redrock); `out` says
  // what is written (--save-models, --output-format). Throws ConfigError.
  FitOutputs(const SelectOptions& sel, const std::string& config, const OutputOptions& out);
  const SelectConfig& selection() const { return sel_; }
  bool want_diagnostics() const { return save_models_; }

  // After reading a file: keeps its FIBERMAP / SCORES for the output rows and returns, per
  // spectrum, 1 if it is to be fitted. Logs the counts and reasons.
  // With --redrock, first sets meta RR_Z / RR_SPECTYPE of every spectrum from the redrock file
  // (a DESI input without one is fitted without the redrock cut, with a warning).
  std::vector<char> on_file(const std::string& path, SpectrumFile& sf);

  // Catalog rows of one chunk, in input order: the fitted rows (one per selected spectrum, in
  // order; diags empty or aligned with them) merged with rows for unselected fibres (only under
  // --include-unselected). Appends to `out` and fills the side tables; forgets these files'
  // FIBERMAPs.
  void collect(const std::vector<SpectrumFile>& chunk, const std::vector<std::vector<char>>& sel,
               std::vector<CatalogRow>&& fitted, const std::vector<FitDiagnostics>& diags,
               std::vector<CatalogRow>& out);
  // A row without a spectrum (unreadable file): /models gets a row of missing values.
  void add_failure_row() { add_side_row(nullptr, nullptr); }

  void write_h5(h5::File& f) const;  // /models (--save-models)
  // rvspecfit layout next to an HDF5 catalog (write_rvtab_fits): `h5_path` with .h5 replaced
  // by .fits.
  static std::string fits_path(const std::string& h5_path);

 private:
  void add_side_row(const Spectrum* spec, const FitDiagnostics* diag);
  SelectConfig sel_;
  bool save_models_ = false;
  std::string redrock_;  // --redrock: "auto", a file, or empty
  ModelStore models_;
};

// The `fit:` and `select:` sections of the YAML config `config` (none when empty), checked as
// `velox fit --config` checks them (load_fit_config, FitOutputs' selection), for every command
// that takes the file (`templates build` and `templates validate` read other sections of it).
// Throws ConfigError naming the file and key.
void check_fit_config(const std::string& config);

// One input's catalog rows (in file order; n rows from `rows`, e.g. its span of a merged
// catalog), for side_tables.
struct InputRows {
  std::string path;
  const CatalogRow* rows;
  size_t n;
  bool side_hdus = true;  // false: the input's format has none (FileResult::side_hdus), not opened
};
// FIBERMAP (and SCORES) rows aligned with the concatenated rows of `inputs`: each input's HDUs
// re-read (they are small) and indexed by ROW_IN_FILE. Inputs without them (LAMOST, SDSS) and
// failure rows give missing values; with no DESI input at all the tables have no columns.
struct SideTables {
  RowTable fibermap, scores;
};
SideTables side_tables(const std::vector<InputRows>& inputs, bool with_scores);
void write_side_h5(h5::File& f, const SideTables& side);  // /fibermap, if it has columns

// The rvspecfit-layout FITS file at `path`, atomically: primary HDU with rvspecfit's provenance
// keywords from `prov` (RVS_CMD, RVS_CONF, TMPLCON0/TMPLREV0/TMPLSVR0, DEPNAMnn/DEPVERnn),
// RVTAB (the DESI MWS DR1 model's columns, then velox's), FIBERMAP and SCORES (TARGETID only
// for inputs without them); CHECKSUM/DATASUM on every HDU. With `epochs` (--epochs, not empty):
// RVTAB also has N_EPOCHS, VRAD_CHISQ_CONST, VRAD_LOGP_CONST, VRAD_MAXDIFF_SIG, and an HDU
// EPOCHS follows with one row per epoch (docs/epochs.md). Throws IoError.
void write_rvtab_fits(const std::string& path, const std::vector<CatalogRow>& rows,
                      const Provenance& prov, const SideTables& side,
                      const std::vector<CatalogRow>& epochs = {});

// Fills TARGET_RA, TARGET_DEC, REF_ID, REF_CAT, FIBER, EXPID from spec.meta.
void fill_fibermap_columns(const Spectrum& spec, CatalogRow& row);

}  // namespace velox

// `velox fit --epochs` (issue 28, docs/epochs.md): one input's per-spectrum rows become its stars
// and their epochs. A star is the spectra of one input (a DESI spectra file's exposures, an SDSS
// spec file's exposures, or the files of an input group, app/job_plan.hpp) that share the
// --group-by key. Its labels come from all its epochs (fit/epochs.hpp joint_labels), then each
// epoch's VRAD is fitted again with the labels held (pass 2: kern::fit_velocity_held, a batch of
// the star's epochs on the calling thread through the CPU backend's serial path).
#pragma once
#include <string>
#include <vector>

#include "fit/fitter.hpp"
#include "io/catalog.hpp"
#include "io/spectrum.hpp"

namespace velox {

// The group key of spectrum `s` fitted into `row`: TARGETID, or the spectrum's metadata
// `group_by` (a header key such as OBJNAME the reader kept); a spectrum without that key is a
// star of its own ("" is returned and the caller keeps it apart).
std::string epoch_group_key(const Spectrum& s, const CatalogRow& row, const std::string& group_by);

// rows[k] is the pass-1 row of file.spectra[spectrum_of_row[k]] (SIZE_MAX: a row without a
// spectrum, kept as a star of its own). Returns the stars (EPOCH -1, in order of their first
// epoch) followed by every star's epochs (EPOCH 0..n-1, TARGETID the star's).
// `prepared` (may be null; else one entry per spectrum of `file`, null where absent): the
// spectra as prepare_spectrum left them in step 1, taken (moved) for step 3 instead of preparing
// them again.
std::vector<CatalogRow> fit_epochs(const SpectrumFile& file,
                                   const std::vector<size_t>& spectrum_of_row,
                                   std::vector<CatalogRow>&& rows, const FitContext& ctx,
                                   const std::string& group_by,
                                   std::vector<PreparedSpectrum*>* prepared = nullptr);

}  // namespace velox

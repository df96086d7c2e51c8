// A redrock classification template (io/redrock.hpp reads them; a TemplateLibrary carries
// them, emulator/library.hpp). In io, below the emulator, so that the reader needs nothing above
// it (issue 27).
#pragma once
#include <string>
#include <vector>

namespace velox {

// A classification template (DESI redrock PCA basis, `templates build --classes DIR`): n_basis
// rest-frame basis spectra box-averaged onto bins uniform in ln(lambda_vac / A) (bin k covers
// [lnlam0 + k dlnlam, lnlam0 + (k+1) dlnlam)). Source: redrock-templates (Bailey et al., DESI),
// files rrtemplate-<SPECTYPE>-<SUBTYPE>-v*.fits.
struct ClassTemplate {
  std::string spectype, subtype;  // redrock's names: STAR + A/B/F/G/K/M/WD/CV, QSO + LOZ/HIZ
  int n_basis = 0, n_bin = 0;
  double lnlam0 = 0.0, dlnlam = 0.0;
  std::vector<float> basis;         // [n_basis][n_bin]
  double z_min = 0.0, z_max = 0.0;  // redshift range to scan (QSO); 0, 0: at the star's VRAD
};

}  // namespace velox

// A trained Cannon model (Ness et al. 2015, ApJ 808, 16; The Cannon 0.2.93 as used by the
// `thedoppler` package of D. Nidever): normalised flux per pixel as a polynomial in scaled
// labels. velox reads it from the HDF5 file that scripts/cannon-to-h5.py writes from the
// package's pickle (the pickle is never loaded here):
//   dispersion [n_pix] Angstrom (attr medium: air unless "vacuum"); theta [n_pix][n_terms];
//   powers [n_terms][3] (int); fiducials, scales [3]; training_set_labels [n][3]; attrs
//   label_names ("TEFF,LOGG,FEH"), lsf_fwhm_A. Exactly three labels (TEFF K, LOGG, FEH).
// flux(labels) = sum_j theta[:, j] * prod_l ((label_l - fiducials_l) / scales_l)^powers[j][l].
#pragma once
#include <string>
#include <vector>

namespace velox {

struct CannonModel {
  std::string name;                          // file stem, e.g. "coolstars"
  std::vector<double> wave_vac_A;            // [n_pix] VACUUM Angstrom (the file's air converted)
  std::vector<double> theta;                 // [n_pix][n_terms]
  std::vector<int> powers;                   // [n_terms][n_label]
  std::vector<double> fiducials, scales;     // [n_label]
  std::vector<double> label_min, label_max;  // [n_label] box of the training labels (Teff in K)
  std::vector<double> train_labels;          // [n_train][n_label]
  int n_pix = 0, n_terms = 0, n_label = 0;
  double lsf_fwhm_A = 0.0;  // the model spectra's own line spread (0: unresolved)

  // The polynomial terms [n_terms] at labels: prod_l ((label_l - fiducials_l) / scales_l)^p.
  std::vector<double> terms(const double* labels) const;
  // Normalised flux at labels (TEFF [K], LOGG [dex], FEH [dex]) on wave_vac_A, pixels [p0, p1),
  // clipped to [0, 1] (thedoppler clips at 1; saturated cores can fall below 0).
  std::vector<double> evaluate(const double* labels, int p0 = 0, int p1 = -1) const;
  // True if some training star lies within (dlog10teff, dlogg, dfeh) of the labels: the model
  // is trained near there.
  bool trained_near(const double* labels, double dlogt, double dlogg, double dfeh) const;
};

// Reads one converted model. It must carry velox's integrity seal (io/h5_seal.hpp, written by
// the converter), checked before libhdf5 parses anything; shapes are checked before any array is read (4..1e7 pixels, at
// most 64 terms, 1e6 training stars), values must be finite. Throws IoError naming the file.
CannonModel read_cannon_h5(const std::string& path);

}  // namespace velox

#include "model/template_model.hpp"

#include <cmath>

#include "kernels/fit_eval.hpp"
#include "kernels/team.hpp"

namespace velox {

std::vector<double> template_model(const TemplateLibrary& lib, const ArmModel& model,
                                   const double* labels, double vrad_kms, const double* wave_vac_A,
                                   size_t n, double vsini_kms, double limb_eps) {
  std::vector<double> out(n, NAN);
  const kern::GridView g = lib.grid();
  const double lnd = kern::ln_doppler(vrad_kms);
  // The pixels whose cubic stencil lies inside the grid (grid_stencil would clamp the others).
  std::vector<size_t> idx;
  std::vector<double> lnlam;
  for (size_t i = 0; i < n; ++i) {
    if (!(wave_vac_A[i] > 0) || !std::isfinite(wave_vac_A[i])) continue;
    const double ll = std::log(wave_vac_A[i]);
    const double u = (ll - lnd - g.lnlam0) / g.dlnlam;
    if (u < 1.0 || u >= g.n_tpix - 2.0) continue;
    idx.push_back(i);
    lnlam.push_back(ll);
  }
  if (idx.empty()) return out;
  kern::FitData d;
  d.n_pix = static_cast<int>(idx.size());
  d.n_arms = 1;
  d.arm_start[1] = d.n_pix;
  d.lnlam = lnlam.data();
  d.basis[0] = model.basis.data();
  const kern::EmulatorView em = lib.view();
  const int np = kern::n_fit_params(lib.n_label, 0);
  double theta[kern::kMaxParams] = {vrad_kms};
  for (int l = 0; l < lib.n_label; ++l) theta[1 + l] = labels[l];
  theta[kern::vsini_index(lib.n_label)] = vsini_kms;
  std::vector<double> emu(static_cast<size_t>(kern::emulator_scratch_size(em)));
  kern::EvalWork w;
  w.emu = emu.data();
  w.limb_eps = limb_eps;
  std::vector<double> T(idx.size()), dT(idx.size() * np);
  kern::template_at_pixels(kern::SerialTeam{}, &em, g, d, theta, false, &w, T.data(), dT.data());
  for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = T[k];
  return out;
}

}  // namespace velox

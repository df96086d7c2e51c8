// In-memory spectra as the readers return them: one Spectrum per target, one ArmData per
// spectrograph arm. Wavelengths are always VACUUM Angstrom (readers convert if needed).
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/uninit_vector.hpp"

namespace velox {

// A non-owning, read-only view of one arm's arrays: what the fit reads (fit/fitter.hpp). Made by
// ArmData::view() for spectra read from files, and by the Python bindings over NumPy buffers
// (python/src), so arrays in memory are fitted without a copy. Same units and conventions as
// ArmData; the arrays must outlive the view.
struct ArmView {
  std::string_view name;
  size_t n_pix = 0;
  const double* wave_vac_A = nullptr;  // [n_pix] vacuum wavelength, Angstrom, increasing
  const float* flux = nullptr;         // [n_pix]
  const float* ivar = nullptr;         // [n_pix] 1/flux^2; <= 0 unusable
  const int32_t* mask = nullptr;       // [n_pix] nonzero = bad pixel; null = no mask
  double resolution_R = std::nan("");  // NaN: from the resolution matrix or the config default
  int ndiag = 0;                       // resolution matrix diagonals; 0 = none
  const float* resolution = nullptr;   // [ndiag][n_pix] desispec layout (see ArmData)
};

// An arm's wavelengths [n_pix], shared by the arms that hold the same array (a DESI coadd's
// fibres: one array per file and arm, not a copy per fibre) and copied on write: the accessors
// are const (reading never copies); push_back, assign, resize and mut copy the array first while
// another arm shares it, and = gives the arm a new array. After a write, views made before it
// (ArmView's pointers) still show the old array, alive while another arm shares it. Writers run
// on one thread, while no other thread copies or releases an arm sharing the array (as the
// readers do; use_count() is not a synchronised uniqueness test).
class WaveArray {
 public:
  WaveArray() = default;
  WaveArray(std::vector<double> v) : v_(std::make_shared<std::vector<double>>(std::move(v))) {}
  WaveArray(std::initializer_list<double> l) : WaveArray(std::vector<double>(l)) {}
  WaveArray& operator=(std::vector<double> v) {
    v_ = std::make_shared<std::vector<double>>(std::move(v));
    return *this;
  }
  WaveArray& operator=(std::initializer_list<double> l) { return *this = std::vector<double>(l); }
  const std::vector<double>& vec() const { return v_ ? *v_ : none(); }
  operator const std::vector<double>&() const { return vec(); }
  size_t size() const { return vec().size(); }
  bool empty() const { return vec().empty(); }
  const double* data() const { return vec().data(); }
  const double& operator[](size_t i) const { return (*v_)[i]; }
  const double& front() const { return vec().front(); }
  const double& back() const { return vec().back(); }
  std::vector<double>::const_iterator begin() const { return vec().begin(); }
  std::vector<double>::const_iterator end() const { return vec().end(); }
  // This arm's own array, to write (a copy first if another arm shares it).
  std::vector<double>& mut() {
    if (!v_)
      v_ = std::make_shared<std::vector<double>>();
    else if (v_.use_count() > 1)
      v_ = std::make_shared<std::vector<double>>(*v_);
    return *v_;
  }
  void push_back(double x) { mut().push_back(x); }
  template <class It>
  void assign(It first, It last) {
    mut().assign(first, last);
  }
  void resize(size_t n) { mut().resize(n); }
  // Whether both hold the same array (not a copy of it).
  bool shares(const WaveArray& o) const { return v_ && v_ == o.v_; }

 private:
  static const std::vector<double>& none() {
    static const std::vector<double> e;
    return e;
  }
  std::shared_ptr<std::vector<double>> v_;
};

struct ArmData {
  std::string name;                // "B", "R", "Z" for DESI; "ALL" for single-arm formats
  WaveArray wave_vac_A;            // [n_pix] vacuum wavelength, Angstrom, increasing
  UninitVector<float> flux;        // [n_pix] flux (instrument units)
  UninitVector<float> ivar;        // [n_pix] inverse variance, 1/flux^2; <=0 means unusable
  UninitVector<int32_t> mask;      // [n_pix] nonzero = bad pixel
  // Nominal resolving power R = lambda/FWHM of the line-spread function; NaN if unknown
  // (the fit then uses the per-format default from the config).
  double resolution_R = std::nan("");
  // Optional DESI resolution matrix, desispec.resolution layout: res[d * n_pix + j] holds
  // A[j - offsets[d], j] with offsets = ndiag/2 ... -ndiag/2. Empty when absent.
  int ndiag = 0;
  UninitVector<float> resolution;
  size_t size() const { return wave_vac_A.size(); }
  // The view the fit reads; a resolution matrix whose size is not ndiag x n_pix is left out.
  ArmView view() const {
    ArmView v;
    v.name = name;
    v.n_pix = size();
    v.wave_vac_A = wave_vac_A.data();
    v.flux = flux.data();
    v.ivar = ivar.data();
    v.mask = mask.empty() ? nullptr : mask.data();
    v.resolution_R = resolution_R;
    if (ndiag > 0 && resolution.size() == size() * static_cast<size_t>(ndiag)) {
      v.ndiag = ndiag;
      v.resolution = resolution.data();
    }
    return v;
  }
};

struct Spectrum {
  int64_t targetid = -1;
  std::string source_file;   // basename of the input file
  int64_t row_in_file = 0;   // fibre / row index inside the file
  std::vector<ArmData> arms;
  // Free-form metadata (OBJTYPE, COADD_FIBERSTATUS, header Z, ...), as strings.
  std::map<std::string, std::string> meta;
  // Non-empty when the reader found this target unusable (e.g. NaN wavelengths); the fit then
  // writes a failure row carrying this message instead of fitting.
  std::string problem;
};

enum class SpectrumFormat { Auto, LamostDR8, LamostDR10, SdssSpec, DesiCoadd };

struct SpectrumFile {
  std::string path;
  SpectrumFormat format = SpectrumFormat::Auto;
  // The primary header's SURVEY (DESI coadds: main, sv3, ...; "" where absent): the key of a
  // survey's own calibration of its format (FitConfig, format_entry).
  std::string survey;
  std::vector<Spectrum> spectra;
};

}  // namespace velox

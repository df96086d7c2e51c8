// Internal helpers shared by the per-format readers (readers_*.cpp). Not a public API.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/fits.hpp"
#include "io/spectrum.hpp"

namespace velox::detail {

// Per-format readers: fill `out.spectra` from an open file. Whole-file problems throw IoError.
void read_lamost_dr8(fits::File& f, SpectrumFile& out);
void read_lamost_dr10(fits::File& f, SpectrumFile& out);
void read_sdss_spec(fits::File& f, SpectrumFile& out);
void read_sdss_exposures(fits::File& f, SpectrumFile& out);  // io/readers.hpp read_exposures
// Fibres [first, first + count) (clamped); Spectrum::row_in_file stays the row in the file.
void read_desi_coadd(fits::File& f, SpectrumFile& out, size_t first = 0,
                     size_t count = SIZE_MAX);

// Checks one arm (lengths agree, wavelengths finite and strictly increasing, not empty) and
// appends a readable reason to `problem` when it is unusable. Returns true if the arm is fine.
// wave_checked: its wavelengths passed already (an array other arms share); the rest is checked.
bool validate_arm(const ArmData& arm, std::string& problem, bool wave_checked = false);

// Copies elements [row * n, (row + 1) * n) of a row-major array (clipped to its size), as the
// arms hold them.
template <typename T, typename A>
UninitVector<T> row_slice(const std::vector<T, A>& data, size_t row, size_t n) {
  const size_t begin = std::min(data.size(), row * n), end = std::min(data.size(), begin + n);
  return UninitVector<T>(data.begin() + begin, data.begin() + end);
}

// Parses a decimal integer (blanks allowed around it); false if it is not one or overflows.
bool parse_int64(const std::string& text, int64_t& value);

std::string basename_of(const std::string& path);

// Copies the header keys that exist into `meta` (values as the header writes them).
void header_meta(const fits::File& f, const std::vector<std::string>& keys,
                 std::map<std::string, std::string>& meta);

}  // namespace velox::detail

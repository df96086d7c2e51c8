// Fuzz targets: each feeds one input (bytes) to a reader the way `velox fit` or `velox templates
// build` would meet it on disk. The libFuzzer harnesses (fuzz_main.cpp, one binary per target,
// built with -DVELOX_FUZZ=ON, run by scripts/fuzz.sh) and the tests of the fuzzing's findings
// (tests/unit/io/test_fuzz_regressions.cpp) share these functions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace velox::fuzz {

// The targets: the survey readers (lamost-dr8, lamost-dr10, sdss, desi), the template readers
// (miles, phoenix, stelib, kesseli), the converted Cannon model reader (cannon) and the
// template-library loader (library).
const std::vector<std::string>& target_names();

// Multi-file targets (miles, phoenix, kesseli) split their input at this marker: miles:
// [MILES_params.db text, marker,] one FITS file; phoenix: the WAVE_*.fits file, marker, one or
// more spectra; kesseli: [the dwarf Teff table text, marker,] one template file.
constexpr const char* kFileSeparator = "\n@@velox-fuzz-next-file@@\n";

// With a template library set (libFuzzer harnesses: env VELOX_FUZZ_LIBRARY, which
// scripts/fuzz.sh points at a small library), the survey targets also prepare every spectrum
// read for the fit (fit/fitter.hpp prepare_spectrum: masking, resolution, packing) with a fresh
// model cache. Throws IoError if the library cannot be loaded.
void set_fit_library(const std::string& path);

// Writes `data` to scratch file(s) and reads it with target `name`'s reader. A rejection with
// velox's own errors (IoError / ConfigError: the one-line message a user sees) returns normally;
// any other exception is a finding and aborts, as do crashes and sanitizer reports. Throws
// std::invalid_argument for an unknown target name.
void run_target(const std::string& name, const uint8_t* data, size_t size);

}  // namespace velox::fuzz

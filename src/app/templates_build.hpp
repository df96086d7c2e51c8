// `velox templates build` and the template side of `velox templates validate`: one template
// directory (MILES, PHOENIX, STELIB, Kesseli M dwarfs), or a survey preset that joins several
// sources (emulator/join.hpp; docs/templates.md gives the measurements behind each preset).
#pragma once
#include <string>
#include <vector>

#include "emulator/build.hpp"
#include "emulator/join.hpp"
#include "io/readers.hpp"

namespace velox {

struct TemplateInputOptions {
  std::string input;       // template directory (kind detected from its content)
  std::string preset;      // "lamost", "sdss", "desi": a joined library from data_dir
  std::string data_dir;    // default: $VELOX_DATA_DIR, else ../shared/data
  std::string teff_table;  // Kesseli: the dwarf Teff table (default: beside the data)
  std::string cannon_dir;  // converted Cannon models (coolstars.h5, hotdwarfs.h5); default:
                           // converted from data_dir's pickles into a temporary folder
};

// The build settings: a preset's (wider Teff range than the MILES default: 2300-31000 K) or the
// defaults, then the `templates:` keys of the YAML file `config` (if not empty) over them. The
// file's fit: and select: sections are checked as velox fit checks them (check_fit_config).
BuildConfig template_build_config(const TemplateInputOptions& opt, const std::string& config);

// The training set the options name: read_templates(input), or the preset's joined set (its
// "join.*" attributes in *attrs). Converted Cannon models are made with
// scripts/cannon-to-h5.py (run by $VELOX_PYTHON, default /usr/bin/python3) when cannon_dir is
// empty, in a temporary folder removed afterwards. Throws ConfigError / IoError.
// `bc` carries the join settings of the YAML config (join_grid, join_wave_min_A/max_A).
TemplateSet template_training_set(const TemplateInputOptions& opt, const BuildConfig& bc,
                                  std::map<std::string, std::string>* attrs);

// The redrock class-template folders a preset library stores by default (issue 23: presets
// include the classes): templates/redrock and templates/redrock_galaxy of the preset's data
// directory, those holding rrtemplate-*.fits (a warning names each one that does not). Empty
// without --preset.
std::vector<std::string> preset_class_dirs(const TemplateInputOptions& opt);

}  // namespace velox

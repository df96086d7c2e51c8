// The velox catalog in HDF5 (see catalog.hpp). Layout:
//   /catalog                        1-D compound dataset, one member per CatalogRow field
//   (kColumns) /catalog attributes             "<COL>_UNIT", "<COL>_DESC" (variable-length UTF-8
//   strings) /catalog.__table_column_meta__  astropy's serialized table header (ECSV YAML lines,
//   one
//                                   fixed-length string each), so Table.read(f, path="catalog")
//                                   gets units, descriptions and the provenance as table.meta
//   / attributes                    velox_kind = "catalog" and the provenance (strings)
#include "io/catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <variant>

#include "common/error.hpp"
#include "common/fnv.hpp"
#include "io/h5.hpp"
#include "io/rvs_warn.hpp"

namespace velox {
namespace {

constexpr size_t kSourceFileBytes = 128;  // fixed-length, null-padded; at most 127 characters
constexpr const char* kMetaSuffix = ".__table_column_meta__";  // astropy.io.misc.hdf5.META_KEY

// One line per catalog column; the column name is the CatalogRow field name.
#define VELOX_COLUMN(field, unit, desc) \
  CatalogColumn { #field, &CatalogRow::field, unit, desc }
const CatalogColumn kColumns[] = {
    VELOX_COLUMN(TARGETID, "", "Target identifier from the input file"),
    VELOX_COLUMN(SOURCE_FILE, "", "Input file basename (truncated to 127 bytes)"),
    VELOX_COLUMN(ROW_IN_FILE, "", "Fibre/row index of the target inside SOURCE_FILE"),
    VELOX_COLUMN(VRAD, "km/s", "Radial velocity, same frame as the input (heliocentric)"),
    VELOX_COLUMN(VRAD_ERR, "km/s", "Uncertainty of VRAD (statistical + systematic floor)"),
    VELOX_COLUMN(VRAD_CCF, "km/s", "Initial radial velocity from the cross-correlation"),
    VELOX_COLUMN(VRAD_SKEW, "", "Skewness of the VRAD posterior (rvspecfit's definition)"),
    VELOX_COLUMN(VRAD_KURT, "", "Kurtosis (not excess) of the VRAD posterior (rvspecfit's)"),
    VELOX_COLUMN(TEFF, "K", "Effective temperature"),
    VELOX_COLUMN(TEFF_ERR, "K", "Uncertainty of TEFF (statistical + systematic floor)"),
    VELOX_COLUMN(LOGG, "dex", "Surface gravity log10(g / cm s^-2)"),
    VELOX_COLUMN(LOGG_ERR, "dex", "Uncertainty of LOGG (statistical + systematic floor)"),
    VELOX_COLUMN(FEH, "dex", "Metallicity [Fe/H]"),
    VELOX_COLUMN(FEH_ERR, "dex", "Uncertainty of FEH (statistical + systematic floor)"),
    VELOX_COLUMN(ALPHAFE, "dex", "[alpha/Fe]; NaN when the template library has none"),
    VELOX_COLUMN(ALPHAFE_ERR, "dex", "Uncertainty of ALPHAFE (statistical + systematic floor)"),
    VELOX_COLUMN(VSINI, "km/s", "Projected rotational velocity; NaN when not fitted"),
    VELOX_COLUMN(VSINI_ERR, "km/s", "Statistical uncertainty of VSINI; NaN at VSINI_UPPER limits"),
    VELOX_COLUMN(
        VSINI_UPPER, "km/s",
        "Upper limit on VSINI when rotation is not detected (chi^2 rise of 2.71), else NaN"),
    VELOX_COLUMN(VRAD_ERR_STAT, "km/s", "Statistical part of VRAD_ERR"),
    VELOX_COLUMN(TEFF_ERR_STAT, "K", "Statistical part of TEFF_ERR"),
    VELOX_COLUMN(LOGG_ERR_STAT, "dex", "Statistical part of LOGG_ERR"),
    VELOX_COLUMN(FEH_ERR_STAT, "dex", "Statistical part of FEH_ERR"),
    VELOX_COLUMN(ALPHAFE_ERR_STAT, "dex", "Statistical part of ALPHAFE_ERR"),
    VELOX_COLUMN(VRAD_B, "km/s",
                 "VRAD of the blue arm (DESI B; blue half of LAMOST/SDSS), labels fixed"),
    VELOX_COLUMN(VRAD_B_ERR, "km/s", "Uncertainty of VRAD_B (statistical + per-arm floor)"),
    VELOX_COLUMN(VRAD_R, "km/s",
                 "VRAD of the red arm (DESI R; red half of LAMOST/SDSS), labels fixed"),
    VELOX_COLUMN(VRAD_R_ERR, "km/s", "Uncertainty of VRAD_R (statistical + per-arm floor)"),
    VELOX_COLUMN(VRAD_Z, "km/s", "VRAD of the DESI Z arm, labels fixed; NaN if not fitted"),
    VELOX_COLUMN(VRAD_Z_ERR, "km/s", "Uncertainty of VRAD_Z (statistical + per-arm floor)"),
    VELOX_COLUMN(CHISQ_TOT, "", "Total chi^2 of the best fit"),
    VELOX_COLUMN(CHISQ_C, "", "Chi^2 of the continuum-only fit over the same pixels"),
    VELOX_COLUMN(NPIX_TOT, "", "Number of pixels used in the fit"),
    VELOX_COLUMN(SN, "", "Median signal-to-noise per pixel over the used pixels"),
    VELOX_COLUMN(NITER, "", "Levenberg-Marquardt iterations of the kept solution"),
    VELOX_COLUMN(RCHISQ, "", "CHISQ_TOT per degree of freedom"),
    VELOX_COLUMN(MISMATCH, "",
                 "Residual rms beyond the noise relative to the flux: sqrt(max(RCHISQ-1,0))/SN"),
    VELOX_COLUMN(CHISQ_B, "", "Chi^2 of the best fit over the B arm (DESI); NaN if not fitted"),
    VELOX_COLUMN(CHISQ_R, "", "Chi^2 of the best fit over the R arm (DESI); NaN if not fitted"),
    VELOX_COLUMN(CHISQ_Z, "", "Chi^2 of the best fit over the Z arm (DESI); NaN if not fitted"),
    VELOX_COLUMN(CHISQ_C_B, "",
                 "Chi^2 of the continuum-only fit over the B arm; NaN if not fitted"),
    VELOX_COLUMN(CHISQ_C_R, "",
                 "Chi^2 of the continuum-only fit over the R arm; NaN if not fitted"),
    VELOX_COLUMN(CHISQ_C_Z, "",
                 "Chi^2 of the continuum-only fit over the Z arm; NaN if not fitted"),
    VELOX_COLUMN(NPIX_B, "", "Pixels of the B arm used in the fit (0: excluded or absent)"),
    VELOX_COLUMN(NPIX_R, "", "Pixels of the R arm used in the fit (0: excluded or absent)"),
    VELOX_COLUMN(NPIX_Z, "", "Pixels of the Z arm used in the fit (0: excluded or absent)"),
    VELOX_COLUMN(SN_B, "", "Median S/N per pixel over the used B-arm pixels"),
    VELOX_COLUMN(SN_R, "", "Median S/N per pixel over the used R-arm pixels"),
    VELOX_COLUMN(SN_Z, "", "Median S/N per pixel over the used Z-arm pixels"),
    VELOX_COLUMN(RVS_WARN, "", "Warning bitmask (docs/data-model.md); 0 = no warning"),
    VELOX_COLUMN(SUCCESS, "", "A star, fitted, trustworthy at the reported errors (no reject bit)"),
    VELOX_COLUMN(FIT_INFO, "", "Informational bitmask (docs/data-model.md), not warnings"),
    VELOX_COLUMN(SPECTYPE, "",
                 "Best redrock class type (STAR, QSO, GALAXY); empty if not classified"),
    VELOX_COLUMN(SUBTYPE, "", "Best redrock subtype (A..M, WD, CV; LOZ/HIZ for QSO)"),
    VELOX_COLUMN(CLASS_DCHI2, "", "Chi^2 of the best class of another kind minus the best class's"),
    VELOX_COLUMN(CLASS_Z, "", "Redshift of the best class (QSO, GALAXY: scanned; a star: VRAD/c)"),
    VELOX_COLUMN(TARGET_RA, "deg", "Target right ascension (DESI FIBERMAP); NaN if absent"),
    VELOX_COLUMN(TARGET_DEC, "deg", "Target declination (DESI FIBERMAP); NaN if absent"),
    VELOX_COLUMN(REF_ID, "",
                 "Reference catalog ID (DESI FIBERMAP, e.g. Gaia source_id); -1 if absent"),
    VELOX_COLUMN(REF_CAT, "", "Reference catalog (DESI FIBERMAP: G2 Gaia, T2 Tycho-2, ...)"),
    VELOX_COLUMN(FIBER, "", "DESI fibre number (FIBERMAP); -1 if absent"),
    VELOX_COLUMN(EXPID, "",
                 "Exposure ID (DESI FIBERMAP of spectra files; SDSS frame EXPOSURE with --epochs); "
                 "-1 if absent"),
    VELOX_COLUMN(RR_Z, "", "Redrock redshift of the target (--redrock); NaN without one"),
    VELOX_COLUMN(RR_SPECTYPE, "", "Redrock SPECTYPE of the target (--redrock); empty without one"),
    VELOX_COLUMN(HEALPIX, "", "HEALPix of the input (NSIDE 64, nested; HPXPIXEL); -1 if absent"),
    VELOX_COLUMN(EPOCH, "",
                 "--epochs: index of the epoch within its star (/epochs rows); -1 in /catalog"),
    VELOX_COLUMN(N_EPOCHS, "",
                 "--epochs: epochs in the star's velocity statistics; 0 without --epochs"),
    VELOX_COLUMN(MJD, "d", "--epochs: MJD of the epoch (exposure start); NaN for stars"),
    VELOX_COLUMN(VRAD_CHISQ_CONST, "",
                 "--epochs: chi^2 of a constant VRAD over the epochs (N_EPOCHS - 1 dof)"),
    VELOX_COLUMN(VRAD_LOGP_CONST, "",
                 "--epochs: log10 p-value of VRAD_CHISQ_CONST for a constant VRAD"),
    VELOX_COLUMN(VRAD_MAXDIFF_SIG, "", "--epochs: largest pairwise |VRAD difference| / its error"),
};
#undef VELOX_COLUMN

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// Bytes a column takes in a packed record, and its HDF5 kind / astropy datatype name.
size_t column_bytes(const CatalogField& f) {
  return std::visit(Overloaded{[](std::string CatalogRow::*) { return kSourceFileBytes; },
                               [](bool CatalogRow::*) { return size_t{1}; },
                               [](auto CatalogRow::*p) { return sizeof(CatalogRow{}.*p); }},
                    f);
}
h5::File::Kind column_kind(const CatalogField& f) {
  using K = h5::File::Kind;
  constexpr K kinds[] = {K::kInt32, K::kInt64, K::kFloat64, K::kBool, K::kFixedString};
  return kinds[f.index()];
}
const char* astropy_datatype(const CatalogField& f) {
  constexpr const char* names[] = {"int32", "int64", "float64", "bool", "string"};
  return names[f.index()];
}

struct Layout {
  std::vector<h5::File::Member> members;
  size_t record_size = 0;
};

// A table of some of the catalog's columns: /catalog has them all, /epochs (--epochs) the
// per-epoch ones (kEpochColumns).
struct Table {
  std::vector<CatalogColumn> cols;
  Layout layout;
};

Table make_table(std::vector<CatalogColumn> cols) {
  Table t;
  t.cols = std::move(cols);
  for (const auto& c : t.cols) {
    size_t n = column_bytes(c.field);
    t.layout.members.push_back({c.name, t.layout.record_size, column_kind(c.field), n});
    t.layout.record_size += n;
  }
  return t;
}

const Table& catalog_table() {
  static const Table t = make_table({std::begin(kColumns), std::end(kColumns)});
  return t;
}

// The columns of an epoch (docs/epochs.md): identity, the epoch's VRAD (labels held at the
// star's) and its fit's quality.
constexpr const char* kEpochColumns[] = {
    "TARGETID", "EPOCH",      "N_EPOCHS", "EXPID",         "MJD",      "SOURCE_FILE", "ROW_IN_FILE",
    "FIBER",    "VRAD",       "VRAD_ERR", "VRAD_ERR_STAT", "VRAD_CCF", "VRAD_B",      "VRAD_B_ERR",
    "VRAD_R",   "VRAD_R_ERR", "VRAD_Z",   "VRAD_Z_ERR",    "SN",       "CHISQ_TOT",   "NPIX_TOT",
    "RCHISQ",   "RVS_WARN",   "FIT_INFO", "SUCCESS"};

const Table& epoch_table() {
  static const Table t = [] {
    std::vector<CatalogColumn> cols;
    for (const char* name : kEpochColumns)
      for (const auto& c : kColumns)
        if (std::strcmp(c.name, name) == 0) cols.push_back(c);
    return make_table(std::move(cols));
  }();
  return t;
}

const Layout& layout() { return catalog_table().layout; }

// Copy s into a null-padded field of `n` bytes, keeping at most n-1 bytes and never cutting a
// UTF-8 multi-byte character in half.
void put_fixed_string(const std::string& s, unsigned char* dst, size_t n) {
  size_t len = std::min(s.size(), n - 1);
  if (len < s.size())
    while (len > 0 && (static_cast<unsigned char>(s[len]) & 0xC0) == 0x80) --len;
  std::memset(dst, 0, n);
  std::memcpy(dst, s.data(), len);
}

}  // namespace

namespace {

std::vector<unsigned char> pack_rows(const std::vector<CatalogRow>& rows, const Table& t) {
  const Layout& l = t.layout;
  std::vector<unsigned char> buf(rows.size() * l.record_size);
  for (size_t r = 0; r < rows.size(); ++r) {
    unsigned char* rec = buf.data() + r * l.record_size;
    for (size_t c = 0; c < l.members.size(); ++c) {
      unsigned char* dst = rec + l.members[c].offset;
      std::visit(Overloaded{[&](std::string CatalogRow::*p) {
                              put_fixed_string(rows[r].*p, dst, kSourceFileBytes);
                            },
                            [&](bool CatalogRow::*p) { *dst = rows[r].*p ? 1 : 0; },
                            [&](auto CatalogRow::*p) {
                              std::memcpy(dst, &(rows[r].*p), sizeof(rows[r].*p));
                            }},
                 t.cols[c].field);
    }
  }
  return buf;
}

}  // namespace

std::vector<unsigned char> pack_catalog_rows(const std::vector<CatalogRow>& rows) {
  return pack_rows(rows, catalog_table());
}

namespace {

std::vector<CatalogRow> unpack(const std::vector<unsigned char>& buf, const Table& t) {
  const Layout& l = t.layout;
  std::vector<CatalogRow> rows(buf.size() / l.record_size);
  for (size_t r = 0; r < rows.size(); ++r) {
    const unsigned char* rec = buf.data() + r * l.record_size;
    for (size_t c = 0; c < l.members.size(); ++c) {
      const unsigned char* src = rec + l.members[c].offset;
      std::visit(Overloaded{[&](std::string CatalogRow::*p) {
                              auto s = reinterpret_cast<const char*>(src);
                              rows[r].*p = std::string(s, strnlen(s, kSourceFileBytes));
                            },
                            [&](bool CatalogRow::*p) { rows[r].*p = *src != 0; },
                            [&](auto CatalogRow::*p) {
                              std::memcpy(&(rows[r].*p), src, sizeof(rows[r].*p));
                            }},
                 t.cols[c].field);
    }
  }
  return rows;
}

// A YAML double-quoted scalar: safe for any text, including newlines and quotes.
std::string yaml_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (ch < 0x20 || ch == 0x7F)
          out += fmt::format("\\x{:02X}", ch);
        else
          out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

// The lines astropy.table.meta.get_yaml_from_table would write for this table (astropy 5.x,
// io/misc/hdf5.py write_table_hdf5 with serialize_meta=True).
std::vector<std::string> astropy_header(const Table& t, const Provenance& provenance) {
  std::vector<std::string> lines{"datatype:"};
  for (const auto& c : t.cols) {
    std::string unit = *c.unit ? fmt::format(", unit: {}", yaml_quote(c.unit)) : "";
    lines.push_back(fmt::format("- {{name: {}{}, datatype: {}, description: {}}}", c.name, unit,
                                astropy_datatype(c.field), yaml_quote(c.desc)));
  }
  if (!provenance.empty()) {
    lines.push_back("meta: !!omap");
    for (const auto& [k, v] : provenance)
      lines.push_back(fmt::format("- {{{}: {}}}", yaml_quote(k), yaml_quote(v)));
  }
  return lines;
}

constexpr const char* kDataset = "/catalog";
constexpr const char* kEpochDataset = "/epochs";
constexpr const char* kKindAttr = "velox_kind";
constexpr const char* kSealAttr = "velox_rows_seal";

// The rows' seal (root attribute velox_rows_seal): "velox-rows v1 catalog:N/S epochs:M/S
// fnv1a64:H", N and M the row counts of /catalog and /epochs, S their record sizes, H the FNV-1a
// of their packed records in that order. A catalog whose rows or count differ from what velox
// wrote fails the check (a write lost at close, a truncated or edited file).
class RowSeal {
 public:
  void add(const std::vector<unsigned char>& records, size_t n, size_t record_size) {
    fnv1a(h_, records.data(), records.size());
    parts_.push_back(fmt::format("{}/{}", n, record_size));
  }
  std::string text() const {
    return fmt::format("velox-rows v1 catalog:{} epochs:{} fnv1a64:{:016x}",
                       parts_.size() > 0 ? parts_[0] : "0/0", parts_.size() > 1 ? parts_[1] : "0/0",
                       h_);
  }

 private:
  uint64_t h_ = kFnvOffset;
  std::vector<std::string> parts_;
};

}  // namespace

namespace {

// One table of rows into `dataset`: the compound data, each column's unit and description, the
// bit names and astropy's header.
void write_rows(h5::File& f, const char* dataset, const Table& t,
                const std::vector<CatalogRow>& rows, const Provenance& provenance,
                RowSeal& seal) {
  const auto records = pack_rows(rows, t);
  seal.add(records, rows.size(), t.layout.record_size);
  f.write_table(dataset, t.layout.members, t.layout.record_size, records);
  for (const auto& c : t.cols) {
    f.set_attr(dataset, std::string(c.name) + "_UNIT", std::string(c.unit));
    f.set_attr(dataset, std::string(c.name) + "_DESC", std::string(c.desc));
  }
  auto bit_list = [](const char* const* names, int n) {
    std::string bits;
    for (int b = 0; b < n; ++b) bits += fmt::format("{}{}:{}", b ? "," : "", b, names[b]);
    return bits;
  };
  f.set_attr(dataset, "RVS_WARN_BITS", bit_list(warn::kBitNames, warn::kNumBits));
  f.set_attr(dataset, "FIT_INFO_BITS", bit_list(info::kBitNames, info::kNumBits));
  f.write_strings(std::string(dataset) + kMetaSuffix, astropy_header(t, provenance));
}

}  // namespace

void split_epoch_rows(const std::vector<CatalogRow>& rows, std::vector<CatalogRow>* stars,
                      std::vector<CatalogRow>* epochs) {
  for (const auto& r : rows) {
    if (r.EPOCH >= 0) {
      if (epochs) epochs->push_back(r);
    } else if (stars) {
      stars->push_back(r);
    }
  }
}

void write_catalog(const std::string& path, const std::vector<CatalogRow>& rows,
                   const Provenance& provenance, const std::function<void(h5::File&)>& extra) {
  h5::AtomicOutput out(path);
  RowSeal seal;
  {
    h5::File f = h5::File::create(out.temp_path());
    const bool any_epoch =
        std::any_of(rows.begin(), rows.end(), [](const CatalogRow& r) { return r.EPOCH >= 0; });
    if (any_epoch) {
      std::vector<CatalogRow> stars, epochs;
      split_epoch_rows(rows, &stars, &epochs);
      write_rows(f, kDataset, catalog_table(), stars, provenance, seal);
      write_rows(f, kEpochDataset, epoch_table(), epochs, provenance, seal);
    } else {
      write_rows(f, kDataset, catalog_table(), rows, provenance, seal);
    }
    for (const auto& [k, v] : provenance) f.set_attr("/", k, v);
    f.set_attr("/", kKindAttr, std::string("catalog"));
    f.set_attr("/", kSealAttr, seal.text());
    if (extra) extra(f);
    f.close();
  }
  // The catalog counts as written once it reads back whole (rows, count and seal) from the file
  // itself: an error the writes did not report (a failed close, a lost block) stops it here.
  bool sealed = false;
  const size_t n_back = read_catalog(out.temp_path(), nullptr, &sealed).size();
  if (!sealed || n_back != rows.size())
    throw IoError(fmt::format("{}: reads back {} rows of the {} written", out.temp_path(), n_back,
                              rows.size()));
  out.commit();
}

void write_input_list(h5::File& f, const std::vector<std::string>& inputs) {
  f.write_strings("/provenance/inputs", inputs);
  f.set_attr("/provenance/inputs", "description",
             std::string("Input files of the job, in input order"));
}

std::vector<CatalogRow> read_catalog(const std::string& path, Provenance* provenance,
                                     bool* sealed) {
  h5::File f = h5::File::open_read(path);
  if (!f.has_attr("/", kKindAttr) || f.attr_string("/", kKindAttr) != "catalog")
    throw IoError(path + ": not a velox catalog (root attribute velox_kind != \"catalog\")");
  const Layout& l = layout();
  // A catalog written before a column existed (e.g. CLASS_Z) reads with that column's default.
  std::vector<std::string> missing;
  const auto records = f.read_table(kDataset, l.members, l.record_size, &missing);
  const bool has_epochs = f.exists(kEpochDataset);
  std::vector<unsigned char> epoch_records;
  if (has_epochs) {
    const Layout& le = epoch_table().layout;
    epoch_records = f.read_table(kEpochDataset, le.members, le.record_size, nullptr);
  }
  if (sealed) *sealed = false;
  if (f.has_attr("/", kSealAttr)) {
    RowSeal actual;
    actual.add(records, records.size() / l.record_size, l.record_size);
    if (has_epochs)
      actual.add(epoch_records, epoch_records.size() / epoch_table().layout.record_size,
                 epoch_table().layout.record_size);
    const std::string written = f.attr_string("/", kSealAttr);
    // Records of another layout (a catalog of another velox version) are checked by count only.
    const bool same_layout = missing.empty() && written.find(fmt::format(
                                                    "catalog:{}/{} ", records.size() / l.record_size,
                                                    l.record_size)) != std::string::npos;
    const bool ok = same_layout ? written == actual.text()
                                : written.find(fmt::format("catalog:{}/", records.size() /
                                                                              l.record_size)) !=
                                      std::string::npos;
    if (!ok)
      throw IoError(fmt::format(
          "{}: the rows do not match their seal (written: {}; read: {}): the catalog is "
          "damaged or incomplete",
          path, written, actual.text()));
    if (sealed) *sealed = true;
  }
  auto rows = unpack(records, catalog_table());
  if (!missing.empty()) {
    const CatalogRow dflt;
    for (const auto& c : catalog_columns()) {
      if (std::find(missing.begin(), missing.end(), c.name) == missing.end()) continue;
      std::visit(
          [&](auto field) {
            for (auto& r : rows) r.*field = dflt.*field;
          },
          c.field);
    }
    spdlog::debug("{}: written before column(s) {}: their defaults", path,
                  fmt::join(missing, ", "));
  }
  if (has_epochs) {  // --epochs: the epoch rows follow the stars
    auto epochs = unpack(epoch_records, epoch_table());
    rows.insert(rows.end(), epochs.begin(), epochs.end());
  }
  if (provenance) {
    provenance->clear();
    for (const auto& name : f.attr_names("/"))
      if (name != kKindAttr && name != kSealAttr) (*provenance)[name] = f.attr_text("/", name);
  }
  return rows;
}

const std::vector<CatalogColumn>& catalog_columns() {
  static const std::vector<CatalogColumn> cols(std::begin(kColumns), std::end(kColumns));
  return cols;
}

std::vector<size_t> catalog_record_offsets() {
  std::vector<size_t> offsets;
  for (const auto& m : layout().members) offsets.push_back(m.offset);
  offsets.push_back(layout().record_size);
  return offsets;
}

}  // namespace velox

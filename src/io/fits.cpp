// CFITSIO wrapper: the only file in velox that calls fits_* functions.
#include "io/fits.hpp"

#include <fitsio.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <utility>

#include "common/error.hpp"
#include "io/fits_guard.hpp"

namespace velox::fits {
namespace {

fitsfile* ff(void* p) { return static_cast<fitsfile*>(p); }

std::string status_text(int status) {
  char text[FLEN_STATUS] = {0};
  fits_get_errstatus(status, text);
  fits_clear_errmsg();
  std::string msg = std::string(text) + " (CFITSIO status " + std::to_string(status) + ")";
  if (status == END_OF_FILE || status == READ_ERROR) msg += ", file truncated or not FITS?";
  return msg;
}

bool is_integer_type(int t) {
  switch (t) {
    case TBIT:
    case TBYTE:
    case TSBYTE:
    case TUSHORT:
    case TSHORT:
    case TUINT:
    case TINT:
    case TULONG:
    case TLONG:
    case TLONGLONG:
    case TULONGLONG:
    case TLOGICAL:
      return true;
    default:
      return false;
  }
}

// Integer masks are often stored as uint32 (BZERO=2^31): keep their bits in an int32.
UninitVector<int32_t> to_int32_bits(const std::vector<int64_t>& v) {
  UninitVector<int32_t> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [](int64_t x) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(x)));
  });
  return out;
}

}  // namespace

File File::open_read(const std::string& path) {
  // Plain words for the two commonest mistakes (CFITSIO would say "status 104" / "status 108").
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw IoError(path + ": is a folder, not a FITS file");
  if (!std::filesystem::exists(path, ec)) throw IoError(path + ": no such file");
  check_headers_for_cfitsio(path);  // what would crash CFITSIO instead of failing
  fitsfile* f = nullptr;
  int status = 0;
  // The disk-file variant skips CFITSIO's extended filename syntax ("[1]", "+2"), so any path
  // works.
  if (fits_open_diskfile(&f, path.c_str(), READONLY, &status)) {
    throw IoError(path + ": cannot open as FITS: " + status_text(status));
  }
  return File(f, path);
}

File File::create(const std::string& path) {
  fitsfile* f = nullptr;
  int status = 0;
  std::remove(path.c_str());
  errno = 0;
  if (fits_create_diskfile(&f, path.c_str(), &status)) {
    const int errnum = errno;
    throw IoError(path + ": cannot create FITS file: " + status_text(status) +
                      (errnum ? fmt::format(": {} (errno {})", std::strerror(errnum), errnum) : ""),
                  errnum);
  }
  return File(f, path);
}

File::File(File&& o) noexcept
    : fptr_(o.fptr_),
      path_(std::move(o.path_)),
      rice_checked_(std::move(o.rice_checked_)),
      hdu_index_(std::move(o.hdu_index_)) {
  o.fptr_ = nullptr;
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    std::swap(fptr_, o.fptr_);
    std::swap(path_, o.path_);
    std::swap(rice_checked_, o.rice_checked_);
    std::swap(hdu_index_, o.hdu_index_);
  }
  return *this;
}

File::~File() {
  if (fptr_) {
    int status = 0;
    fits_close_file(ff(fptr_), &status);
    fits_clear_errmsg();
  }
}

void File::close() {
  if (!fptr_) return;
  int status = 0;
  errno = 0;
  fits_close_file(ff(fptr_), &status);  // flushes CFITSIO's buffers: the last blocks are written
  const int errnum = status ? errno : 0;
  fptr_ = nullptr;
  fits_clear_errmsg();
  if (status)
    throw IoError(path_ + ": cannot close (write its last blocks): " + status_text(status) +
                      (errnum ? fmt::format(": {} (errno {})", std::strerror(errnum), errnum) : ""),
                  errnum);
}

void File::fail(const std::string& what, int status) const {
  // CFITSIO reports a failed write as WRITE_ERROR without the cause; the C library's errno,
  // read before anything else runs, names it (ENOSPC, EFBIG, EIO).
  const int errnum = status == WRITE_ERROR || status == SEEK_ERROR ||  // stdio flushes at a seek
                             status == FILE_NOT_CREATED
                         ? errno
                         : 0;
  std::string msg = path_ + ": HDU " + current_name() + ": " + what;
  if (status) msg += ": " + status_text(status);
  if (errnum) msg += fmt::format(": {} (errno {})", std::strerror(errnum), errnum);
  throw IoError(msg, errnum);
}

void File::check(int status, const std::string& what) const {
  if (status) fail(what, status);
}

// ---------------------------------------------------------------- HDUs

int File::num_hdus() const {
  int status = 0, n = 0;
  check(fits_get_num_hdus(ff(fptr_), &n, &status), "counting HDUs");
  return n;
}

int File::current_index() const {
  int num = 0;
  fits_get_hdu_num(ff(fptr_), &num);
  return num - 1;
}

std::string File::current_name() const {
  int status = 0;
  char value[FLEN_VALUE] = {0};
  if (fits_read_key(ff(fptr_), TSTRING, "EXTNAME", value, nullptr, &status) == 0) return value;
  fits_clear_errmsg();
  const int index = current_index();
  return index == 0 ? "PRIMARY" : "#" + std::to_string(index);
}

std::vector<std::string> File::hdu_names() const {
  const int saved = current_index();
  std::vector<std::string> names;
  int status = 0;
  for (int i = 0; i < num_hdus(); ++i) {
    if (fits_movabs_hdu(ff(fptr_), i + 1, nullptr, &status)) break;  // truncated file: stop
    names.push_back(current_name());
  }
  status = 0;
  fits_movabs_hdu(ff(fptr_), saved + 1, nullptr, &status);
  fits_clear_errmsg();
  return names;
}

bool File::has_hdu(const std::string& extname) const {
  const auto names = hdu_names();
  return std::find(names.begin(), names.end(), extname) != names.end();
}

void File::move_to(const std::string& extname) {
  int status = 0;
  if (extname == "PRIMARY") return move_to(0);
  // An HDU found by this name before is moved to by its index: CFITSIO's search reads the
  // keywords of every header before it, and the DESI reader moves to each image HDU again for
  // every block of fibres (HDUs are only ever appended, so the first match stays the first).
  for (const auto& [name, index] : hdu_index_)
    if (name == extname) return move_to(index);
  if (fits_movnam_hdu(ff(fptr_), ANY_HDU, const_cast<char*>(extname.c_str()), 0, &status)) {
    throw IoError(path_ + ": HDU " + extname + ": not found: " + status_text(status));
  }
  hdu_index_.emplace_back(extname, current_index());
}

void File::move_to(int index) {
  int status = 0;
  if (fits_movabs_hdu(ff(fptr_), index + 1, nullptr, &status)) {
    throw IoError(path_ + ": HDU #" + std::to_string(index) +
                  ": cannot move there: " + status_text(status));
  }
}

bool File::is_compressed_image() const {
  int status = 0;
  const int c = fits_is_compressed_image(ff(fptr_), &status);
  return status == 0 && c != 0;
}

bool File::is_image() const {
  int status = 0, type = 0;
  check(fits_get_hdu_type(ff(fptr_), &type, &status), "reading HDU type");
  return type == IMAGE_HDU;
}

// ---------------------------------------------------------------- keywords

bool File::has_key(const std::string& key) const {
  int status = 0;
  char value[FLEN_VALUE], comment[FLEN_COMMENT];
  fits_read_keyword(ff(fptr_), key.c_str(), value, comment, &status);
  fits_clear_errmsg();
  return status == 0;
}

std::string File::key_string(const std::string& key) const {
  int status = 0;
  char value[FLEN_VALUE] = {0};
  check(fits_read_key(ff(fptr_), TSTRING, key.c_str(), value, nullptr, &status), "keyword " + key);
  std::string s(value);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

double File::key_double(const std::string& key) const {
  int status = 0;
  double value = 0;
  check(fits_read_key(ff(fptr_), TDOUBLE, key.c_str(), &value, nullptr, &status), "keyword " + key);
  return value;
}

namespace {
// The integer a FITS value field holds ("266", "'266 '", "2.66E2", "2.66D2"; a logical T or F
// as 1 or 0), or false if it holds none or one out of int64 range. Fractions truncate toward
// zero, as CFITSIO's do.
bool parse_key_integer(std::string s, int64_t& out) {
  auto trim = [](std::string& t) {
    const size_t a = t.find_first_not_of(' '), b = t.find_last_not_of(' ');
    t = a == std::string::npos ? std::string() : t.substr(a, b - a + 1);
  };
  trim(s);
  if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') {
    s = s.substr(1, s.size() - 2);
    trim(s);
  }
  if (s == "T" || s == "F") {  // a logical reads as 1 or 0 (redrock's LOGLAM = T), as in CFITSIO
    out = s == "T";
    return true;
  }
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) {
    out = i;
    return true;
  }
  for (char& c : s)
    if (c == 'D' || c == 'd') c = 'E';
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  // 2^63 exactly is out of range; every double below it converts.
  if (*end != '\0' || !std::isfinite(d) || std::fabs(d) >= 9223372036854775808.0) return false;
  out = static_cast<int64_t>(d);
  return true;
}
}  // namespace

int64_t File::key_long(const std::string& key) const {
  // Parsed here, not by fits_read_key(TLONGLONG): CFITSIO's ffc2j/ffc2jj write their message for
  // a value that is not a number ("(  31", found by fuzzing the SDSS reader) into an 81-byte
  // buffer that 30 characters of the value overflow, and a fortified libcfitsio aborts the
  // process (glibc's __strncat_chk).
  int status = 0;
  char value[FLEN_VALUE] = {0}, comment[FLEN_COMMENT] = {0};
  check(fits_read_keyword(ff(fptr_), key.c_str(), value, comment, &status), "keyword " + key);
  int64_t out = 0;
  if (!parse_key_integer(value, out))
    fail("keyword " + key + ": value " + std::string(value) + " is not an integer");
  return out;
}

std::string File::key_string(const std::string& key, const std::string& dflt) const {
  return has_key(key) ? key_string(key) : dflt;
}
double File::key_double(const std::string& key, double dflt) const {
  return has_key(key) ? key_double(key) : dflt;
}
int64_t File::key_long(const std::string& key, int64_t dflt) const {
  return has_key(key) ? key_long(key) : dflt;
}

// ---------------------------------------------------------------- images

std::vector<int64_t> File::image_shape() const {
  int status = 0, naxis = 0;
  check(fits_get_img_dim(ff(fptr_), &naxis, &status), "reading image dimensions");
  if (naxis == 0) return {};
  std::vector<LONGLONG> naxes(naxis);
  check(fits_get_img_sizell(ff(fptr_), naxis, naxes.data(), &status), "reading image size");
  return std::vector<int64_t>(naxes.rbegin(), naxes.rend());
}

void File::check_data_in_file(uint64_t n_elements, const std::string& what) const {
  int status = 0;
  LONGLONG head = 0, data = 0, end = 0;
  check(fits_get_hduaddrll(ff(fptr_), &head, &data, &end, &status), what);
  const LONGLONG size = ff(fptr_)->Fptr->logfilesize;  // bytes (decompressed for .gz)
  if (end > size)
    fail(what + ": the header declares " + std::to_string(end - data) +
         " bytes of data, the file holds " + std::to_string(std::max<LONGLONG>(0, size - data)) +
         " (truncated or corrupt)");
  // A tile-compressed image is smaller than its pixels; allow generous compression ratios (DESI
  // masks hold about 43 pixels per compressed byte; gzip of zeros at most ~260 int32 per byte)
  // but not a header's fantasy (a fuzzed ZNAXIS made CFITSIO and velox fill gigabytes).
  status = 0;
  const uint64_t compressed = static_cast<uint64_t>(end - data);
  if (fits_is_compressed_image(ff(fptr_), &status) &&
      n_elements > std::max<uint64_t>(uint64_t{1} << 20, 1024 * compressed))
    fail(what + ": " + std::to_string(n_elements) + " elements from " + std::to_string(compressed) +
         " compressed bytes (corrupt header)");
}

namespace {

// Whether CFITSIO 4.2.0's Rice decoder (ricecomp.c: fits_rdecomp, fits_rdecomp_short,
// fits_rdecomp_byte for bytepix 4, 2, 1) reads only inside the clen bytes of a tile when it
// decodes nx pixels in blocks of nblock: the decoder's reads, replayed with its bit buffer (the
// values decoded do not steer the reads, only the bit counts and zero bytes do). The decoder
// checks the end only after each block, so a corrupt tile (a run of zero bytes, a wrong
// compression type) makes it read past its buffer before it reports the error; a tile CFITSIO
// decodes without that error never reads past its end, so no valid tile is refused here.
// Rice coding: R. F. Rice, JPL Publication 79-22 (1979); the FITS tiled-image convention:
// Pence, White & Seaman 2010, PASP 122, 1065.
bool rice_tile_in_bounds(const unsigned char* c, size_t clen, uint64_t nx, long nblock,
                         int bytepix) {
  const int bsize = bytepix == 1 ? 1 : bytepix == 2 ? 2 : 4;
  const int fsbits = bsize == 1 ? 3 : bsize == 2 ? 4 : 5;
  const int fsmax = bsize == 1 ? 6 : bsize == 2 ? 14 : 25;
  const int bbits = 1 << fsbits;
  size_t p = static_cast<size_t>(bsize);  // the first bsize bytes: the first pixel, raw
  auto next = [&](unsigned int& byte) {
    if (p >= clen) return false;
    byte = c[p++];
    return true;
  };
  auto bits_of = [](unsigned int v) {  // ricecomp.c's nonzero_count: bits without leading zeros
    int k = 0;
    for (; v != 0; v >>= 1) ++k;
    return k;
  };
  unsigned int b = 0, byte = 0;
  if (!next(b)) return false;
  long long nbits = 8;  // a run of zero bytes adds 8 per byte (CFITSIO's int; no overflow here)
  for (uint64_t i = 0; i < nx;) {
    nbits -= fsbits;
    while (nbits < 0) {
      if (!next(byte)) return false;
      b = (b << 8) | byte;
      nbits += 8;
    }
    const int fs = static_cast<int>(b >> nbits) - 1;
    b &= (1u << nbits) - 1;
    uint64_t imax = nblock > 0 ? i + static_cast<uint64_t>(nblock) : i;
    if (imax > nx) imax = nx;
    if (fs < 0) {
      i = imax > i ? imax : i;
    } else if (fs == fsmax) {
      for (; i < imax; ++i) {
        int k = bbits - static_cast<int>(nbits);  // nbits is 0 .. 7 here
        for (k -= 8; k >= 0; k -= 8)
          if (!next(b)) return false;
        if (nbits > 0) {
          if (!next(b)) return false;
          b &= (1u << nbits) - 1;
        } else {
          b = 0;
        }
      }
    } else {
      for (; i < imax; ++i) {
        while (b == 0) {
          nbits += 8;
          if (!next(b)) return false;
        }
        const long long nzero = nbits - bits_of(b);
        nbits -= nzero + 1;
        b ^= 1u << nbits;
        nbits -= fs;
        while (nbits < 0) {
          if (!next(byte)) return false;
          b = (b << 8) | byte;
          nbits += 8;
        }
        b &= (1u << nbits) - 1;
      }
    }
  }
  return true;
}

// The number of elements of `shape` (0 for none); false if the product overflows.
bool element_count(const std::vector<int64_t>& shape, uint64_t& n) {
  n = shape.empty() ? 0 : 1;
  for (int64_t s : shape)
    if (s < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n)) return false;
  return true;
}
}  // namespace

void File::check_rice_tiles() const {
  if (!is_compressed_image()) return;
  fitsfile* f = ff(fptr_);
  int status = 0, hdu = 0;
  const FITSfile* F = f->Fptr;
  fits_get_hdu_num(f, &hdu);
  if (F->compress_type != RICE_1 || F->cn_compressed <= 0 ||
      std::find(rice_checked_.begin(), rice_checked_.end(), hdu) != rice_checked_.end())
    return;
  const int nd = F->zndim;
  uint64_t n_tiles = nd > 0 ? 1 : 0;
  for (int d = 0; d < nd; ++d) {
    if (F->tilesize[d] <= 0 || F->znaxis[d] < 0) fail("tile-compressed image: bad tile size");
    // tiles along the axis, as CFITSIO counts them (no overflow for any positive tile size)
    n_tiles *=
        F->znaxis[d] == 0 ? 0 : static_cast<uint64_t>((F->znaxis[d] - 1) / F->tilesize[d] + 1);
  }
  LONGLONG head = 0, data = 0, end = 0;
  check(fits_get_hduaddrll(f, &head, &data, &end, &status), "reading the HDU's size");
  const LONGLONG hdu_bytes = end - data;  // the table and its heap
  std::vector<unsigned char> bytes;
  for (uint64_t row = 1; row <= n_tiles; ++row) {
    // The tile's pixels: its extent along each axis, clipped at the image's edge (as CFITSIO
    // decodes it), tiles in FITS order (axis 1 fastest).
    uint64_t nx = 1, t = row - 1;
    for (int d = 0; d < nd; ++d) {
      const uint64_t per = static_cast<uint64_t>((F->znaxis[d] - 1) / F->tilesize[d] + 1);
      const uint64_t start = (t % per) * static_cast<uint64_t>(F->tilesize[d]);
      t /= per;
      nx *= std::min<uint64_t>(F->tilesize[d], static_cast<uint64_t>(F->znaxis[d]) - start);
    }
    LONGLONG len = 0, off = 0;
    check(
        fits_read_descriptll(f, F->cn_compressed, static_cast<LONGLONG>(row), &len, &off, &status),
        "reading tile " + std::to_string(row) + "'s descriptor");
    if (len <= 0) continue;  // stored uncompressed or gzipped instead
    if (len > hdu_bytes)
      fail("tile " + std::to_string(row) + ": " + std::to_string(len) + " bytes claimed, the HDU " +
           "holds " + std::to_string(hdu_bytes) + " (corrupt descriptor)");
    bytes.resize(static_cast<size_t>(len));
    int anynul = 0;
    check(fits_read_col(f, TBYTE, F->cn_compressed, static_cast<LONGLONG>(row), 1, len, nullptr,
                        bytes.data(), &anynul, &status),
          "reading tile " + std::to_string(row));
    if (!rice_tile_in_bounds(bytes.data(), bytes.size(), nx, F->rice_blocksize, F->rice_bytepix))
      fail("tile " + std::to_string(row) + ": RICE_1 data end before its " + std::to_string(nx) +
           " pixels (" + std::to_string(len) + " bytes; corrupt or not Rice-coded)");
  }
  rice_checked_.push_back(hdu);
}

uint64_t File::check_image() const {
  if (!is_image()) fail("expected an image, found a table");
  uint64_t n = 0;
  if (!element_count(image_shape(), n)) fail("image size overflows (corrupt header)");
  check_data_in_file(n, "image");
  check_rice_tiles();
  return n;
}

template <typename T>
UninitVector<T> File::read_image_as(int datatype, uint64_t first, uint64_t count) const {
  const uint64_t n = check_image();
  first = std::min(first, n);
  const uint64_t m = std::min(count, n - first);
  // CFITSIO writes every element (zeroing them before, as std::vector did, was 10% of a DESI read)
  UninitVector<T> out(m);
  int status = 0, anynul = 0;
  if (m > 0) {
    check(fits_read_img(ff(fptr_), datatype, static_cast<LONGLONG>(first + 1), m, nullptr,
                        out.data(), &anynul, &status),
          "reading image");
  }
  return out;
}

UninitVector<double> File::read_image_double(uint64_t first, uint64_t count) const {
  return read_image_as<double>(TDOUBLE, first, count);
}
UninitVector<float> File::read_image_float(uint64_t first, uint64_t count) const {
  return read_image_as<float>(TFLOAT, first, count);
}
UninitVector<int32_t> File::read_image_int32(uint64_t first, uint64_t count) const {
  // An uncompressed image whose values all fit 32-bit integers (BITPIX 8, 16 or 32 after BZERO)
  // is read as int32 directly, and a uint32 one (BITPIX 32, BZERO 2^31: DESI's masks) as
  // unsigned ints into the same array: the values, and the uint32 bits, that the conversions
  // below give (to_int32_bits), without their double and int64 arrays.
  int status = 0, equiv = 0;
  fits_get_img_equivtype(ff(fptr_), &equiv, &status);
  const bool fits_int32 = equiv == BYTE_IMG || equiv == SBYTE_IMG || equiv == SHORT_IMG ||
                          equiv == USHORT_IMG || equiv == LONG_IMG;
  if (status == 0 && (fits_int32 || equiv == ULONG_IMG) && !is_compressed_image()) {
    static_assert(sizeof(int) == sizeof(int32_t) && sizeof(unsigned int) == sizeof(int32_t),
                  "TINT and TUINT read 32-bit values");
    return read_image_as<int32_t>(fits_int32 ? TINT : TUINT, first, count);
  }
  // Otherwise read through double: CFITSIO cannot convert tile-compressed integer images to
  // TLONGLONG (status 410, seen on DESI spectra-*.fits masks), and doubles hold every 32-bit value
  // exactly. A corrupt or floating-point image may hold NaN or values beyond int64 (converting them
  // would be undefined): NaN becomes -1 (every bit set: a bad pixel), others saturate.
  const auto d = read_image_as<double>(TDOUBLE, first, count);
  std::vector<int64_t> v(d.size());
  std::transform(d.begin(), d.end(), v.begin(), [](double x) {
    if (std::isnan(x)) return int64_t{-1};
    if (x >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
    if (x <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(x);
  });
  return to_int32_bits(v);
}

// ---------------------------------------------------------------- tables

int64_t File::num_rows() const {
  int status = 0;
  LONGLONG n = 0;
  check(fits_get_num_rowsll(ff(fptr_), &n, &status), "reading the number of rows");
  return n;
}

int File::column_number(const std::string& name) const {
  int status = 0, col = 0;
  fits_get_colnum(ff(fptr_), CASEINSEN, const_cast<char*>(name.c_str()), &col, &status);
  if (status == COL_NOT_UNIQUE) status = 0;
  fits_clear_errmsg();
  return status ? -1 : col;
}

bool File::has_column(const std::string& name) const {
  return !is_image() && column_number(name) > 0;
}

std::vector<std::string> File::column_names() const {
  std::vector<std::string> names;
  int status = 0, ncols = 0;
  check(fits_get_num_cols(ff(fptr_), &ncols, &status), "reading the number of columns");
  for (int i = 1; i <= ncols; ++i) {
    char key[FLEN_KEYWORD], value[FLEN_VALUE] = {0};
    std::snprintf(key, sizeof key, "TTYPE%d", i);
    check(fits_read_key(ff(fptr_), TSTRING, key, value, nullptr, &status),
          "keyword " + std::string(key));
    names.emplace_back(value);
  }
  return names;
}

File::ColumnInfo File::column_info(const std::string& name) const {
  if (is_image()) fail("column " + name + ": expected a table, found an image");
  ColumnInfo info;
  info.number = column_number(name);
  if (info.number <= 0) fail("column " + name + ": not found");
  int status = 0;
  LONGLONG repeat = 0, width = 0;
  check(fits_get_coltypell(ff(fptr_), info.number, &info.type, &repeat, &width, &status),
        "column " + name + ": reading its type");
  if (info.type < 0) fail("column " + name + ": variable-length arrays are not supported");
  info.repeat = repeat;
  info.width = width;
  return info;
}

int64_t File::column_repeat(const std::string& name) const {
  const auto info = column_info(name);
  return info.type == TSTRING ? 1 : info.repeat;
}

char File::column_kind(const std::string& name) const {
  const auto info = column_info(name);
  switch (info.type) {
    case TSTRING:
      return 's';
    case TLOGICAL:
      return 'l';
    case TULONGLONG:
      return 'u';
    case TFLOAT:
    case TDOUBLE:
      return 'f';
    case TBIT:
    case TCOMPLEX:
    case TDBLCOMPLEX:
      return 'x';
    default:
      return is_integer_type(info.type) ? 'i' : 'x';
  }
}

int64_t File::column_width(const std::string& name) const { return column_info(name).width; }

template <typename T, typename Vec>
Vec File::read_column_as(const std::string& name, int datatype) const {
  const auto info = column_info(name);
  uint64_t n = 0;
  if (!element_count({num_rows(), info.type == TSTRING ? 1 : info.repeat}, n))
    fail("column " + name + ": size overflows (corrupt header)");
  check_data_in_file(n, "column " + name);
  Vec out(n);
  int status = 0, anynul = 0;
  if (n > 0) {
    check(fits_read_col(ff(fptr_), datatype, info.number, 1, 1, n, nullptr, out.data(), &anynul,
                        &status),
          "column " + name + ": reading");
  }
  return out;
}

std::vector<double> File::read_column_double(const std::string& name) const {
  return read_column_as<double>(name, TDOUBLE);
}
UninitVector<float> File::read_column_float(const std::string& name) const {
  return read_column_as<float, UninitVector<float>>(name, TFLOAT);
}
UninitVector<int32_t> File::read_column_int32(const std::string& name) const {
  return to_int32_bits(read_column_as<int64_t>(name, TLONGLONG));
}
std::vector<int64_t> File::read_column_int64(const std::string& name) const {
  return read_column_as<int64_t>(name, TLONGLONG);
}

std::vector<std::string> File::read_column_string(const std::string& name) const {
  const auto info = column_info(name);
  const int col = info.number;
  const int64_t width = info.width;
  int status = 0;
  if (info.type != TSTRING) fail("column " + name + ": not a string column");
  const int64_t n = num_rows();
  check_data_in_file(static_cast<uint64_t>(n), "column " + name);
  std::vector<std::vector<char>> buffers(n, std::vector<char>(width + 1, '\0'));
  std::vector<char*> ptrs(n);
  for (int64_t i = 0; i < n; ++i) ptrs[i] = buffers[i].data();
  int anynul = 0;
  char nulstr[] = "";
  if (n > 0) {
    check(fits_read_col_str(ff(fptr_), col, 1, 1, n, nulstr, ptrs.data(), &anynul, &status),
          "column " + name + ": reading");
  }
  std::vector<std::string> out;
  for (auto& b : buffers) {
    std::string s(b.data());
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> File::read_column_text(const std::string& name) const {
  const auto info = column_info(name);
  if (info.type == TSTRING) return read_column_string(name);
  if (info.repeat != 1) fail("column " + name + ": not a scalar column");
  std::vector<std::string> out;
  if (info.type == TULONGLONG) {  // e.g. SDSS SPECOBJID stored as K with TZERO = 2^63
    for (auto x : read_column_as<unsigned long long>(name, TULONGLONG)) {
      out.push_back(std::to_string(x));
    }
  } else if (is_integer_type(info.type)) {
    for (int64_t v : read_column_int64(name)) out.push_back(std::to_string(v));
  } else {
    char buf[32];
    for (double v : read_column_double(name)) {
      std::snprintf(buf, sizeof buf, "%.12g", v);
      out.emplace_back(buf);
    }
  }
  return out;
}

// ---------------------------------------------------------------- writing

void File::write_image(const std::vector<double>& data, const std::vector<int64_t>& shape,
                       const std::string& extname) {
  std::vector<long> naxes(shape.rbegin(), shape.rend());
  int status = 0;
  check(
      fits_create_img(ff(fptr_), DOUBLE_IMG, static_cast<int>(naxes.size()), naxes.data(), &status),
      "creating image");
  if (!data.empty()) {
    check(fits_write_img(ff(fptr_), TDOUBLE, 1, data.size(), const_cast<double*>(data.data()),
                         &status),
          "writing image");
  }
  if (!extname.empty()) write_key("EXTNAME", extname);
}

void File::write_key(const std::string& key, const std::string& value,
                     const std::string& comment) {
  int status = 0;
  // The long-string convention (CONTINUE cards) keeps values over 68 characters whole.
  check(fits_update_key_longstr(ff(fptr_), key.c_str(), value.c_str(),
                                comment.empty() ? nullptr : comment.c_str(), &status),
        "writing keyword " + key);
}

void File::write_checksum() {
  int status = 0;
  check(fits_write_chksum(ff(fptr_), &status), "writing CHECKSUM/DATASUM");
}
void File::write_key(const std::string& key, double value) {
  int status = 0;
  check(fits_update_key(ff(fptr_), TDOUBLE, key.c_str(), &value, nullptr, &status),
        "writing keyword " + key);
}
void File::write_key(const std::string& key, int64_t value) {
  int status = 0;
  LONGLONG v = value;
  check(fits_update_key(ff(fptr_), TLONGLONG, key.c_str(), &v, nullptr, &status),
        "writing keyword " + key);
}
void File::write_key(const std::string& key, bool value) {
  int status = 0, v = value ? 1 : 0;
  check(fits_update_key(ff(fptr_), TLOGICAL, key.c_str(), &v, nullptr, &status),
        "writing keyword " + key);
}

void File::create_table(const std::string& extname, int64_t n_rows,
                        const std::vector<std::string>& names,
                        const std::vector<std::string>& tforms) {
  int status = 0;
  if (num_hdus() == 0) write_image({}, {});  // an empty primary HDU first
  std::vector<char*> ttype, tform;
  for (const auto& s : names) ttype.push_back(const_cast<char*>(s.c_str()));
  for (const auto& s : tforms) tform.push_back(const_cast<char*>(s.c_str()));
  check(fits_create_tbl(ff(fptr_), BINARY_TBL, n_rows, static_cast<int>(names.size()), ttype.data(),
                        tform.data(), nullptr, extname.c_str(), &status),
        "creating table " + extname);
}

void File::write_column(const std::string& name, const std::vector<double>& data) {
  int status = 0;
  check(fits_write_col(ff(fptr_), TDOUBLE, column_number(name), 1, 1, data.size(),
                       const_cast<double*>(data.data()), &status),
        "column " + name + ": writing");
}

void File::write_column(const std::string& name, const std::vector<int64_t>& data) {
  int status = 0;
  std::vector<LONGLONG> v(data.begin(), data.end());
  check(
      fits_write_col(ff(fptr_), TLONGLONG, column_number(name), 1, 1, v.size(), v.data(), &status),
      "column " + name + ": writing");
}

void File::write_column(const std::string& name, const std::vector<std::string>& data) {
  int status = 0;
  std::vector<char*> ptrs;
  for (const auto& s : data) ptrs.push_back(const_cast<char*>(s.c_str()));
  check(fits_write_col_str(ff(fptr_), column_number(name), 1, 1, ptrs.size(), ptrs.data(), &status),
        "column " + name + ": writing");
}

void File::write_column_logical(const std::string& name, const std::vector<char>& data) {
  int status = 0;
  check(fits_write_col(ff(fptr_), TLOGICAL, column_number(name), 1, 1, data.size(),
                       const_cast<char*>(data.data()), &status),
        "column " + name + ": writing");
}

}  // namespace velox::fits

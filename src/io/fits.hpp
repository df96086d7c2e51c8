// Thin RAII wrapper over CFITSIO (`fitsfile*`). All fits_* calls in velox live in io/fits.cpp.
// Errors throw velox::IoError "<file>: HDU <name>: <what>: <CFITSIO status text>".
// Shapes are given in C (numpy) order: slowest axis first, so a DESI B_RESOLUTION image is
// {n_fiber, n_diag, n_pix} and its data is row-major data[(f * n_diag + d) * n_pix + j].
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/uninit_vector.hpp"

namespace velox::fits {

class File {
 public:
  // Read-only open; gzip-compressed files (.fits.gz) and tile-compressed images work.
  // Throws IoError if the file is missing or not FITS. Starts at the primary HDU.
  static File open_read(const std::string& path);
  // Creates (overwrites) a FITS file for writing; the first write_image makes the primary HDU.
  static File create(const std::string& path);

  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();  // closes without a check: a written file is closed by close()

  // Flush and close now; throws IoError (with the errno of a failed write) if CFITSIO fails.
  void close();
  const std::string& path() const { return path_; }

  // --- HDUs (index is 0-based; 0 = primary) ---
  int num_hdus() const;
  std::vector<std::string> hdu_names() const;  // EXTNAME of each HDU, "PRIMARY" if unnamed
  bool has_hdu(const std::string& extname) const;
  void move_to(const std::string& extname);  // throws IoError if absent
  void move_to(int index);
  int current_index() const;
  std::string current_name() const;  // EXTNAME or "PRIMARY"/"#<index>", used in messages
  bool is_image() const;
  bool is_compressed_image() const;  // a tile-compressed image (stored as a binary table)
  // The checks every image read makes before reading (an image, its size, its data inside the
  // file, a RICE_1 image's tiles: IoError otherwise); the number of elements.
  uint64_t check_image() const;

  // --- header keywords of the current HDU ---
  bool has_key(const std::string& key) const;
  std::string key_string(const std::string& key) const;  // throws IoError if absent
  double key_double(const std::string& key) const;
  int64_t key_long(const std::string& key) const;
  std::string key_string(const std::string& key, const std::string& dflt) const;
  double key_double(const std::string& key, double dflt) const;
  int64_t key_long(const std::string& key, int64_t dflt) const;

  // --- images of the current HDU (any BITPIX, converted) ---
  std::vector<int64_t> image_shape() const;  // C order; empty for an HDU without data
  // The whole image, or elements [first, first + count) in C order (clamped to the image):
  // rows [r0, r1) of an [n][...] image are first = r0 * row, count = (r1 - r0) * row.
  UninitVector<double> read_image_double(uint64_t first = 0, uint64_t count = UINT64_MAX) const;
  UninitVector<float> read_image_float(uint64_t first = 0, uint64_t count = UINT64_MAX) const;
  UninitVector<int32_t> read_image_int32(uint64_t first = 0, uint64_t count = UINT64_MAX) const;

  // --- binary tables of the current HDU ---
  int64_t num_rows() const;
  bool has_column(const std::string& name) const;  // case-insensitive, as CFITSIO matches
  std::vector<std::string> column_names() const;
  int64_t column_repeat(const std::string& name) const;  // elements per row (1 for scalars)
  // 'i' integer, 'u' unsigned 64-bit (TZERO 2^63), 'f' floating point, 's' string, 'l' logical,
  // 'x' anything else (bit, complex).
  char column_kind(const std::string& name) const;
  int64_t column_width(const std::string& name) const;  // bytes per element (string length)
  // All rows of a numeric column (scalar or vector), row-major [n_rows][repeat], converted.
  std::vector<double> read_column_double(const std::string& name) const;
  UninitVector<float> read_column_float(const std::string& name) const;
  UninitVector<int32_t> read_column_int32(const std::string& name) const;
  std::vector<int64_t> read_column_int64(const std::string& name) const;
  // String column, trailing blanks removed.
  std::vector<std::string> read_column_string(const std::string& name) const;
  // Any scalar column as text: strings as-is, integers exactly, floats with 12 digits.
  std::vector<std::string> read_column_text(const std::string& name) const;

  // --- writing (tests and small outputs) ---
  // Appends an image HDU (the primary if the file is new) of doubles with the C-order shape.
  void write_image(const std::vector<double>& data, const std::vector<int64_t>& shape,
                   const std::string& extname = "");
  // String values longer than a card use the CONTINUE long-string convention.
  void write_key(const std::string& key, const std::string& value,
                 const std::string& comment = "");
  // CHECKSUM and DATASUM of the current HDU (FITS checksum convention); after its data.
  void write_checksum();
  void write_key(const std::string& key, double value);
  void write_key(const std::string& key, int64_t value);
  void write_key(const std::string& key, bool value);
  // Appends a binary table with n_rows rows; tforms are FITS TFORMn codes ("D", "3909E", "16A").
  void create_table(const std::string& extname, int64_t n_rows,
                    const std::vector<std::string>& names, const std::vector<std::string>& tforms);
  void write_column(const std::string& name, const std::vector<double>& data);
  void write_column(const std::string& name, const std::vector<int64_t>& data);
  void write_column(const std::string& name, const std::vector<std::string>& data);
  void write_column_logical(const std::string& name, const std::vector<char>& data);  // 0/1

  // Throws IoError "<file>: HDU <name>: <what>[: <CFITSIO text>]" (status 0 = no CFITSIO text).
  [[noreturn]] void fail(const std::string& what, int status = 0) const;

 private:
  File(void* fptr, std::string path) : fptr_(fptr), path_(std::move(path)) {}
  struct ColumnInfo {
    int number = 0, type = 0;  // 1-based column number, CFITSIO type code (TSTRING, TFLOAT...)
    int64_t repeat = 0, width = 0;
  };
  int column_number(const std::string& name) const;       // -1 if absent
  ColumnInfo column_info(const std::string& name) const;  // throws IoError if absent
  template <typename T>
  UninitVector<T> read_image_as(int datatype, uint64_t first, uint64_t count) const;
  template <typename T, typename Vec = std::vector<T>>
  Vec read_column_as(const std::string& name, int datatype) const;
  void check(int status, const std::string& what) const;
  // Throws IoError if the current HDU's data (as its header declares it) extends past the end
  // of the file, or if a tile-compressed image claims implausibly many elements: checked before
  // velox allocates `n_elements` for a read, so a corrupt header cannot demand terabytes.
  void check_data_in_file(uint64_t n_elements, const std::string& what) const;
  // Throws IoError if a tile of the current HDU, a RICE_1 tile-compressed image, would make
  // CFITSIO's Rice decoder read past the tile's bytes (4.2.0 checks the end only after each
  // block of pixels: a corrupt tile is a heap over-read). Each HDU is walked once.
  void check_rice_tiles() const;

  void* fptr_ = nullptr;  // fitsfile*, kept opaque so fitsio.h stays out of this header
  std::string path_;
  mutable std::vector<int> rice_checked_;  // 1-based HDUs whose Rice tiles were checked
  std::vector<std::pair<std::string, int>> hdu_index_;  // (EXTNAME, 0-based index) found by move_to
};

}  // namespace velox::fits

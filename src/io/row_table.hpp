// A column table assembled row by row from FITS binary tables (FIBERMAP, SCORES) or built in
// code (RVTAB), written as an HDF5 compound dataset or a FITS binary table. Used for the
// catalog's /fibermap and the rvspecfit-layout FITS output (app/fit_outputs.cpp).
// Scalar columns only: vector columns, bit and complex columns of an input are skipped.
// Types are widened: integers -> int64, floats -> float64, strings -> longest width.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace velox {
namespace fits {
class File;
}
namespace h5 {
class File;
}

struct TableColumn {
  std::string name;
  char kind = 'f';  // 'i' int64, 'f' float64, 's' string, 'l' logical
  std::string unit;
  std::string tform;  // FITS output: TFORM overriding the widened one (e.g. "J", "E", "6A")
  std::vector<int64_t> i;
  std::vector<double> f;
  std::vector<std::string> s;
  size_t size() const { return kind == 'f' ? f.size() : kind == 's' ? s.size() : i.size(); }
  void push_missing();  // int -1, float NaN, string "", logical false
};

// One FITS table read whole (scalar columns).
struct FitsTable {
  std::vector<TableColumn> columns;
  size_t n_rows = 0;
};
// Reads HDU `extname` of an open file; throws IoError if it is absent or unreadable.
std::shared_ptr<FitsTable> read_fits_table(fits::File& f, const std::string& extname);

class RowTable {
 public:
  // Appends row `row` of `t` (t == nullptr or row out of range: a row of missing values).
  // New columns are back-filled with missing values for the earlier rows.
  void add_row(const FitsTable* t, size_t row);
  // Building in code: get (or create) a column, push its values, then set_rows().
  TableColumn& column(const std::string& name, char kind, const std::string& unit = "",
                      const std::string& tform = "");
  void set_rows(size_t n) { n_ = n; }
  size_t n_rows() const { return n_; }
  size_t n_columns() const { return cols_.size(); }
  const std::deque<TableColumn>& columns() const { return cols_; }

  void write_h5(h5::File& f, const std::string& dataset) const;  // 1-D compound dataset
  void write_fits(fits::File& f, const std::string& extname) const;  // BINTABLE with TUNITn

 private:
  std::deque<TableColumn> cols_;  // deque: references from column() stay valid
  std::map<std::string, size_t> index_;
  size_t n_ = 0;
};

}  // namespace velox

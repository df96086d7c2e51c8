#include "io/row_table.hpp"

#include <cmath>
#include <cstring>

#include "io/fits.hpp"
#include "io/h5.hpp"

namespace velox {

void TableColumn::push_missing() {
  switch (kind) {
    case 'f':
      f.push_back(NAN);
      break;
    case 's':
      s.emplace_back();
      break;
    case 'l':
      i.push_back(0);
      break;
    default:
      i.push_back(-1);
  }
}

std::shared_ptr<FitsTable> read_fits_table(fits::File& f, const std::string& extname) {
  f.move_to(extname);
  auto t = std::make_shared<FitsTable>();
  t->n_rows = static_cast<size_t>(f.num_rows());
  for (const auto& name : f.column_names()) {
    const char k = f.column_kind(name);
    if (k == 'x' || k == 'l' || (k != 's' && f.column_repeat(name) != 1)) continue;
    TableColumn c;
    c.name = name;
    if (k == 's') {
      c.kind = 's';
      c.s = f.read_column_string(name);
    } else if (k == 'f') {
      c.kind = 'f';
      c.f = f.read_column_double(name);
    } else if (k == 'u') {  // unsigned 64-bit: kept as text would lose the type; store as float
      c.kind = 'f';
      c.f = f.read_column_double(name);
    } else {
      c.kind = 'i';
      c.i = f.read_column_int64(name);
    }
    t->columns.push_back(std::move(c));
  }
  return t;
}

TableColumn& RowTable::column(const std::string& name, char kind, const std::string& unit,
                              const std::string& tform) {
  auto it = index_.find(name);
  if (it != index_.end()) return cols_[it->second];
  TableColumn c;
  c.name = name;
  c.kind = kind;
  c.unit = unit;
  c.tform = tform;
  for (size_t r = 0; r < n_; ++r) c.push_missing();
  index_[name] = cols_.size();
  cols_.push_back(std::move(c));
  return cols_.back();
}

void RowTable::add_row(const FitsTable* t, size_t row) {
  const bool have = t && row < t->n_rows;
  if (have) {
    for (const auto& src : t->columns) {
      TableColumn& c = column(src.name, src.kind);
      if (c.kind == src.kind) {
        if (c.kind == 'f') c.f.push_back(src.f[row]);
        else if (c.kind == 's') c.s.push_back(src.s[row]);
        else c.i.push_back(src.i[row]);
      } else if (c.kind == 'f' && src.kind == 'i') {
        c.f.push_back(static_cast<double>(src.i[row]));
      } else if (c.kind == 'i' && src.kind == 'f') {  // widen the column to float
        c.f.assign(c.i.begin(), c.i.end());
        for (size_t r = 0; r < c.i.size(); ++r)
          if (c.i[r] == -1) c.f[r] = NAN;
        c.i.clear();
        c.kind = 'f';
        c.f.push_back(src.f[row]);
      } else {
        c.push_missing();  // string vs number across files: left missing
      }
    }
  }
  ++n_;
  for (auto& c : cols_)
    while (c.size() < n_) c.push_missing();
}

void RowTable::write_h5(h5::File& f, const std::string& dataset) const {
  std::vector<h5::File::Member> members;
  std::vector<size_t> widths;
  size_t rec = 0;
  for (const auto& c : cols_) {
    size_t w = 8;
    h5::File::Kind k = h5::File::Kind::kInt64;
    if (c.kind == 'f') k = h5::File::Kind::kFloat64;
    if (c.kind == 'l') k = h5::File::Kind::kBool, w = 1;
    if (c.kind == 's') {
      k = h5::File::Kind::kFixedString;
      w = 1;
      for (const auto& s : c.s) w = std::max(w, s.size());
    }
    members.push_back({c.name, rec, k, w});
    widths.push_back(w);
    rec += w;
  }
  std::vector<unsigned char> buf(n_ * rec, 0);
  for (size_t r = 0; r < n_; ++r) {
    unsigned char* p = buf.data() + r * rec;
    for (size_t j = 0; j < cols_.size(); ++j) {
      const auto& c = cols_[j];
      unsigned char* d = p + members[j].offset;
      if (c.kind == 'f') std::memcpy(d, &c.f[r], 8);
      else if (c.kind == 'i') std::memcpy(d, &c.i[r], 8);
      else if (c.kind == 'l') *d = c.i[r] ? 1 : 0;
      else std::memcpy(d, c.s[r].data(), std::min(c.s[r].size(), widths[j]));
    }
  }
  f.write_table(dataset, members, rec, buf);
  for (const auto& c : cols_)
    if (!c.unit.empty()) f.set_attr(dataset, c.name + "_UNIT", c.unit);
}

void RowTable::write_fits(fits::File& f, const std::string& extname) const {
  std::vector<std::string> names, forms;
  for (const auto& c : cols_) {
    names.push_back(c.name);
    if (!c.tform.empty()) forms.push_back(c.tform);
    else if (c.kind == 'f') forms.push_back("D");
    else if (c.kind == 'i') forms.push_back("K");
    else if (c.kind == 'l') forms.push_back("L");
    else {
      size_t w = 1;
      for (const auto& s : c.s) w = std::max(w, s.size());
      forms.push_back(std::to_string(w) + "A");
    }
  }
  f.create_table(extname, static_cast<int64_t>(n_), names, forms);
  for (size_t j = 0; j < cols_.size(); ++j) {
    const auto& c = cols_[j];
    if (!c.unit.empty()) f.write_key("TUNIT" + std::to_string(j + 1), c.unit);
    if (n_ == 0) continue;
    if (c.kind == 'f') f.write_column(c.name, c.f);
    else if (c.kind == 'i') f.write_column(c.name, c.i);
    else if (c.kind == 's') f.write_column(c.name, c.s);
    else f.write_column_logical(c.name, std::vector<char>(c.i.begin(), c.i.end()));
  }
}

}  // namespace velox

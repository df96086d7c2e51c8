#include "mpi/wire.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.hpp"
#include "io/catalog.hpp"

namespace velox::mpi {

namespace {

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_arithmetic_v<T>);
    const char* p = reinterpret_cast<const char*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof v);
  }
  void put(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  std::vector<char> take() { return std::move(buf_); }

 private:
  std::vector<char> buf_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& b) : b_(b) {}
  template <class T>
  void get(T& v) {
    static_assert(std::is_arithmetic_v<T>);
    need(sizeof v);
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
  }
  void get(std::string& s) {
    uint32_t n = 0;
    get(n);
    need(n);
    s.assign(b_.data() + pos_, n);
    pos_ += n;
  }

 private:
  void need(size_t n) const {
    if (pos_ + n > b_.size()) throw IoError("MPI message truncated (driver protocol mismatch)");
  }
  const std::vector<char>& b_;
  size_t pos_ = 0;
};

// Every CatalogRow field in catalog column order (the one table in io/catalog.cpp).
template <class Row, class F>
void for_each_field(Row& r, F&& f) {
  for (const auto& c : catalog_columns()) std::visit([&](auto member) { f(r.*member); }, c.field);
}

}  // namespace

std::vector<char> pack_work(size_t index, const std::string& path) {
  Writer w;
  w.put(static_cast<uint64_t>(index));
  w.put(path);
  return w.take();
}

void unpack_work(const std::vector<char>& msg, size_t& index, std::string& path) {
  Reader r(msg);
  uint64_t i = 0;
  r.get(i);
  r.get(path);
  index = static_cast<size_t>(i);
}

std::vector<char> pack_result(const FileResult& res) {
  Writer w;
  w.put(static_cast<uint64_t>(res.index));
  w.put(res.path);
  w.put(static_cast<uint8_t>(res.ok));
  w.put(res.error);
  w.put(static_cast<uint64_t>(res.n_targets));
  w.put(res.seconds);
  w.put(static_cast<int32_t>(res.rank));
  w.put(static_cast<uint64_t>(res.rows.size()));
  for (const auto& row : res.rows) for_each_field(row, [&](const auto& v) { w.put(v); });
  return w.take();
}

FileResult unpack_result(const std::vector<char>& msg) {
  Reader r(msg);
  FileResult res;
  uint64_t index = 0, n_targets = 0, n_rows = 0;
  uint8_t ok = 0;
  int32_t rank = 0;
  r.get(index);
  r.get(res.path);
  r.get(ok);
  r.get(res.error);
  r.get(n_targets);
  r.get(res.seconds);
  r.get(rank);
  r.get(n_rows);
  res.index = static_cast<size_t>(index);
  res.ok = ok != 0;
  res.n_targets = static_cast<size_t>(n_targets);
  res.rank = rank;
  res.rows.resize(static_cast<size_t>(n_rows));
  for (auto& row : res.rows) for_each_field(row, [&](auto& v) { r.get(v); });
  return res;
}

}  // namespace velox::mpi

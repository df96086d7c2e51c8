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
  // A count read from the message cannot exceed what the rest could hold (`min_bytes` each):
  // a corrupt count is an error, not a huge allocation.
  void check_count(uint64_t n, size_t min_bytes) const {
    if (n > (b_.size() - pos_) / min_bytes + 1)
      throw IoError("MPI message truncated (driver protocol mismatch)");
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

namespace {

void put_result(Writer& w, const FileResult& res) {
  w.put(static_cast<uint64_t>(res.index));
  w.put(res.path);
  w.put(static_cast<uint8_t>(res.ok));
  w.put(res.error);
  w.put(static_cast<uint64_t>(res.n_targets));
  w.put(static_cast<uint64_t>(res.n_fitted));
  w.put(static_cast<uint64_t>(res.targetids_listed.size()));
  for (int64_t id : res.targetids_listed) w.put(id);
  w.put(res.seconds);
  w.put(static_cast<int32_t>(res.rank));
  w.put(static_cast<uint8_t>(res.side_hdus));
  w.put(static_cast<int32_t>(res.output_errno));
  w.put(res.output_stop);
  w.put(static_cast<uint64_t>(res.rows.size()));
  for (const auto& row : res.rows) for_each_field(row, [&](const auto& v) { w.put(v); });
}

FileResult get_result(Reader& r) {
  FileResult res;
  uint64_t index = 0, n_targets = 0, n_fitted = 0, n_rows = 0;
  uint8_t ok = 0, side_hdus = 1;
  int32_t rank = 0;
  r.get(index);
  r.get(res.path);
  r.get(ok);
  r.get(res.error);
  r.get(n_targets);
  r.get(n_fitted);
  uint64_t n_listed = 0;
  r.get(n_listed);
  r.check_count(n_listed, sizeof(int64_t));
  res.targetids_listed.resize(static_cast<size_t>(n_listed));
  for (int64_t& id : res.targetids_listed) r.get(id);
  r.get(res.seconds);
  r.get(rank);
  r.get(side_hdus);
  int32_t output_errno = 0;
  r.get(output_errno);
  r.get(res.output_stop);
  res.output_errno = output_errno;
  r.get(n_rows);
  res.index = static_cast<size_t>(index);
  res.ok = ok != 0;
  res.n_targets = static_cast<size_t>(n_targets);
  res.n_fitted = static_cast<size_t>(n_fitted);
  res.rank = rank;
  res.side_hdus = side_hdus != 0;
  r.check_count(n_rows, 8);  // every row takes more than 8 bytes
  res.rows.resize(static_cast<size_t>(n_rows));
  for (auto& row : res.rows) for_each_field(row, [&](auto& v) { r.get(v); });
  return res;
}

}  // namespace

std::vector<char> pack_work(const std::vector<WorkItem>& batch) {
  Writer w;
  w.put(static_cast<uint64_t>(batch.size()));
  for (const auto& it : batch) {
    w.put(static_cast<uint64_t>(it.index));
    w.put(it.path);
    w.put(static_cast<uint64_t>(it.bytes));
  }
  return w.take();
}

std::vector<WorkItem> unpack_work(const std::vector<char>& msg) {
  Reader r(msg);
  uint64_t n = 0;
  r.get(n);
  r.check_count(n, 20);
  std::vector<WorkItem> batch(static_cast<size_t>(n));
  for (auto& it : batch) {
    uint64_t index = 0, bytes = 0;
    r.get(index);
    r.get(it.path);
    r.get(bytes);
    it.index = static_cast<size_t>(index);
    it.bytes = static_cast<uintmax_t>(bytes);
  }
  return batch;
}

std::vector<char> pack_report(const Report& rep) {
  Writer w;
  w.put(static_cast<uint8_t>(rep.stop));
  w.put(rep.rate_bytes_s);
  w.put(rep.busy_s);
  w.put(static_cast<uint64_t>(rep.done.size()));
  for (const auto& res : rep.done) put_result(w, res);
  w.put(static_cast<uint64_t>(rep.returned.size()));
  for (size_t i : rep.returned) w.put(static_cast<uint64_t>(i));
  return w.take();
}

Report unpack_report(const std::vector<char>& msg) {
  Reader r(msg);
  Report rep;
  uint8_t stop = 0;
  uint64_t n = 0;
  r.get(stop);
  rep.stop = stop != 0;
  r.get(rep.rate_bytes_s);
  r.get(rep.busy_s);
  r.get(n);
  r.check_count(n, 40);
  rep.done.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) rep.done.push_back(get_result(r));
  r.get(n);
  r.check_count(n, 8);
  rep.returned.resize(static_cast<size_t>(n));
  for (auto& i : rep.returned) {
    uint64_t v = 0;
    r.get(v);
    i = static_cast<size_t>(v);
  }
  return rep;
}

std::vector<char> pack_result(const FileResult& res) {
  Writer w;
  put_result(w, res);
  return w.take();
}

FileResult unpack_result(const std::vector<char>& msg) {
  Reader r(msg);
  return get_result(r);
}

}  // namespace velox::mpi

// Thin RAII wrapper over the HDF5 C API. All H5* calls in velox live in io/h5*.cpp.
// Errors throw velox::IoError naming the file and the object. HDF5's own error stack printing is
// switched off (we report one clear line instead).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace velox::h5 {

using hid = int64_t;  // hid_t

// Owning handle; closes with the right H5*close on destruction.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid id_ = -1;
};

// An HDF5 file. `path` is kept for error messages.
class File {
 public:
  static File create(const std::string& path);     // truncates
  static File open_read(const std::string& path);  // throws IoError if not HDF5 / unreadable
  const std::string& path() const { return path_; }
  hid id() const { return h_.get(); }

  // n-D arrays (row-major). `name` may contain '/' groups; they are created as needed.
  void write(const std::string& name, const std::vector<double>& data, const std::vector<uint64_t>& shape);
  void write(const std::string& name, const std::vector<float>& data, const std::vector<uint64_t>& shape);
  void write(const std::string& name, const std::vector<int64_t>& data, const std::vector<uint64_t>& shape);
  std::vector<double> read_double(const std::string& name, std::vector<uint64_t>* shape = nullptr) const;
  std::vector<float> read_float(const std::string& name, std::vector<uint64_t>* shape = nullptr) const;
  std::vector<int64_t> read_int64(const std::string& name, std::vector<uint64_t>* shape = nullptr) const;
  bool exists(const std::string& name) const;

  // Scalar attributes on an object ("/" for the file root). Strings are variable-length UTF-8.
  void set_attr(const std::string& obj, const std::string& attr, const std::string& value);
  void set_attr(const std::string& obj, const std::string& attr, double value);
  void set_attr(const std::string& obj, const std::string& attr, int64_t value);
  std::string attr_string(const std::string& obj, const std::string& attr) const;
  double attr_double(const std::string& obj, const std::string& attr) const;
  int64_t attr_int64(const std::string& obj, const std::string& attr) const;
  bool has_attr(const std::string& obj, const std::string& attr) const;
  std::vector<std::string> attr_names(const std::string& obj) const;

 private:
  std::string path_;
  Handle h_;
};

// Writes to `final_path`.tmp; commit() closes and renames onto final_path. Destruction without
// commit() removes the temp file, so a crash or exception never leaves a partial final file.
class AtomicOutput {
 public:
  explicit AtomicOutput(std::string final_path);
  ~AtomicOutput();
  const std::string& temp_path() const { return tmp_; }
  void commit();  // throws IoError if the rename fails

 private:
  std::string final_, tmp_;
  bool done_ = false;
};

}  // namespace velox::h5

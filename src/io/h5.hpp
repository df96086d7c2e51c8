// Thin RAII wrapper over the HDF5 C API. All H5* calls in velox live in io/h5*.cpp.
// Errors throw velox::IoError naming the file and the object. HDF5's own error stack printing is
// switched off (we report one clear line instead).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace velox::h5 {

using hid = int64_t;  // hid_t

// HDF5 identifiers open in this process (files, groups, datasets, datatypes, attributes: the
// H5Fget_obj_count of every file): 0 whenever velox holds no HDF5 object. The fuzz harness checks
// it after each input, since a handle left open would leak only inside libhdf5, whose leaks the
// sanitizer runs suppress (tests/fuzz/lsan.supp).
size_t open_object_count();

// Owning handle; closes with the right H5*close on destruction.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();  // close(), its result ignored: write paths call close() themselves and check it
  // Close now (H5Fclose, H5Dclose, ... by the id's type); returns HDF5's status (< 0: failed).
  int close();
  hid get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid id_ = -1;
};

// An HDF5 file. `path` is kept for error messages.
class File {
 public:
  // Truncates. `seal_block`: reserve the 512-byte user block for an integrity seal (h5_seal.hpp;
  // the template library). Catalogs have none: astropy recognises HDF5 by the signature at
  // byte 0 only, and `Table.read("catalog.h5")` must keep working.
  static File create(const std::string& path, bool seal_block = false);
  // Throws IoError if missing, a folder, not HDF5, unreadable, or its integrity seal does not
  // match (checked before libhdf5 parses anything). With `unsealed_error`, a file without a
  // seal is refused too, with IoError "PATH: <unsealed_error>".
  static File open_read(const std::string& path, const char* unsealed_error = nullptr);
  const std::string& path() const { return path_; }
  // open_read found a matching integrity seal (false: the file has none).
  bool sealed() const { return sealed_; }
  hid id() const { return h_.get(); }
  // Flush and close now, throwing IoError on failure (the destructor closes silently).
  void close();

  // n-D arrays (row-major). `name` may contain '/' groups; they are created as needed.
  void write(const std::string& name, const std::vector<double>& data,
             const std::vector<uint64_t>& shape);
  void write(const std::string& name, const std::vector<float>& data,
             const std::vector<uint64_t>& shape);
  void write(const std::string& name, const std::vector<int64_t>& data,
             const std::vector<uint64_t>& shape);
  std::vector<double> read_double(const std::string& name,
                                  std::vector<uint64_t>* shape = nullptr) const;
  std::vector<float> read_float(const std::string& name,
                                std::vector<uint64_t>* shape = nullptr) const;
  std::vector<int64_t> read_int64(const std::string& name,
                                  std::vector<uint64_t>* shape = nullptr) const;
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
  // Any attribute as text: strings as is, numbers with full precision, arrays as "[a, b, ...]".
  std::string attr_text(const std::string& obj, const std::string& attr) const;

  // 1-D dataset of fixed-length, null-padded byte strings (numpy 'S<longest>'), as astropy
  // writes its table metadata; chunked and gzip-compressed. read_strings accepts fixed- and
  // variable-length strings.
  void write_strings(const std::string& name, const std::vector<std::string>& lines);
  std::vector<std::string> read_strings(const std::string& name) const;

  // Tables: 1-D compound datasets. Records are packed (no padding); each member lies at
  // `offset` bytes inside a record of `record_size` bytes. Written chunked, gzip level 4, with an
  // unlimited first dimension (zero rows is fine). read_table matches members by name and throws
  // IoError naming the member if the file lacks one, unless `missing` is given: then such members
  // are listed there and their bytes left zero. It returns n_rows * record_size bytes.
  enum class Kind { kInt32, kInt64, kFloat64, kBool, kFixedString };  // kBool: int8 enum, as h5py
  struct Member {
    std::string name;
    size_t offset = 0;
    Kind kind = Kind::kFloat64;
    size_t size = 0;  // bytes; only kFixedString uses it (null-padded, numpy 'S<size>')
  };
  void write_table(const std::string& name, const std::vector<Member>& members, size_t record_size,
                   const std::vector<unsigned char>& records);
  std::vector<unsigned char> read_table(const std::string& name, const std::vector<Member>& members,
                                        size_t record_size,
                                        std::vector<std::string>* missing = nullptr) const;

  // Every dataset in the file: absolute path, shape and a type name ("float64", "int32",
  // "string", "compound[23]", ...), in HDF5 visiting order.
  struct DatasetInfo {
    std::string path;
    std::vector<uint64_t> shape;
    std::string type;
  };
  std::vector<DatasetInfo> list_datasets() const;

 private:
  std::string path_;
  Handle h_;
  bool sealed_ = false;
};

// fsync a file (IoError with its errno on failure), and, best effort, the folder of a path (so
// that a rename is on disk).
void sync_file(const std::string& path);
void sync_folder_of(const std::string& path);

// Writes to `final_path`.tmp; commit() seals the temp (h5_seal.hpp), syncs it to disk and
// renames it onto final_path (close the File first).
// Destruction without commit() removes the temp file, so a crash or exception never leaves a
// partial final file.
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

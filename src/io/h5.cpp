// HDF5 C API wrapper (see h5.hpp). The only file in velox that calls H5* functions.
#include "io/h5.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <type_traits>

#include "common/error.hpp"
#include "io/h5_detail.hpp"
#include "io/h5_seal.hpp"

namespace velox::h5 {

static_assert(std::is_same_v<hid, hid_t>, "h5::hid must be hid_t");

// Helpers (declared in h5_detail.hpp unless static).
namespace detail {

// HDF5 prints its error stack to stderr by default; we report one IoError line instead. The
// setting is per thread in a thread-safe libhdf5 (Debian's is): the job writes its per-input
// catalogs on the fitting thread, not the main one.
static void silence_hdf5() {
  thread_local bool silenced = false;
  if (!silenced) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  silenced = true;
}

// No HDF5 clean-up at process exit: velox closes (and checks) every file it writes itself, and
// a file whose write failed (ENOSPC at a dataset's close) stays in HDF5's tables in a state that
// makes libhdf5 1.10's exit handler crash (H5F__close_cb, SIGSEGV after a job that ended
// cleanly). H5dont_atexit must run before the library initialises: a static initialiser.
static const int g_hdf5_no_atexit = [] {
  H5dont_atexit();
  return 0;
}();

// The innermost description on HDF5's error stack (the most specific reason), then clear it.
namespace {
thread_local int t_hdf5_errno = 0;  // errno of the last error stack hdf5_reason() read
}

std::string hdf5_reason() {
  struct Walk {
    std::string reason;
    int errnum = 0;
  } w;
  auto cb = [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
    auto* w = static_cast<Walk*>(data);
    if (!e->desc) return 0;
    if (n == 0) w->reason = e->desc;
    // The file drivers report the system call's errno in their text ("... errno = 28, error
    // message = 'No space left on device' ..."): the job's output-fault policy needs it.
    if (const char* p = std::strstr(e->desc, "errno = "); p && w->errnum == 0)
      w->errnum = std::atoi(p + 8);
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, cb, &w);
  H5Eclear2(H5E_DEFAULT);
  t_hdf5_errno = w.errnum;
  if (w.errnum != 0 && w.reason.find("errno = ") != std::string::npos)
    w.reason = fmt::format("{} (errno {})", std::strerror(w.errnum), w.errnum);
  else if (w.errnum != 0)
    w.reason += fmt::format(": {} (errno {})", std::strerror(w.errnum), w.errnum);
  return w.reason.empty() ? "HDF5 error" : w.reason;
}

int hdf5_errno() { return t_hdf5_errno; }

// Throws "FILE: OBJECT: WHAT: REASON" (OBJECT empty for whole-file problems).
[[noreturn]] void fail(const std::string& file, const std::string& object, const std::string& what,
                       const std::string& reason, int errnum) {
  if (object.empty()) throw IoError(fmt::format("{}: {}: {}", file, what, reason), errnum);
  throw IoError(fmt::format("{}: {}: {}: {}", file, object, what, reason), errnum);
}

// Throw if an HDF5 call returned a negative id/status; pass valid ids through.
hid_t check(hid_t r, const std::string& file, const std::string& object, const char* what) {
  if (r < 0) {
    const std::string reason = hdf5_reason();
    fail(file, object, what, reason, hdf5_errno());
  }
  return r;
}

void close_checked(Handle& h, const std::string& file, const std::string& object) {
  check(h.close(), file, object, "cannot close (write its data)");
}

Handle own(hid_t r, const std::string& file, const std::string& object, const char* what) {
  return Handle(check(r, file, object, what));
}

// Link creation property list that creates missing intermediate groups ("a/b/c").
static Handle lcpl_with_parents() {
  hid_t p = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(p, 1);
  return Handle(p);
}

static Handle scalar_space() { return Handle(H5Screate(H5S_SCALAR)); }

Handle vlen_utf8_type() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return Handle(t);
}

Handle fixed_string_type(size_t size) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, size);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  return Handle(t);
}

template <typename T>
static hid_t native_type() {
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  if constexpr (std::is_same_v<T, int64_t>) return H5T_NATIVE_INT64;
}

uint64_t product(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

size_t checked_count(const File& f, const std::string& object, const std::vector<uint64_t>& shape,
                     size_t elem_bytes) {
  // Deflate, HDF5's usual filter, compresses by at most ~1030:1; velox's arrays and tables by far
  // less. The floor keeps small files' ordinary reads clear of the bound.
  constexpr uint64_t kMaxExpansion = 4096, kFloorBytes = uint64_t{64} << 20;
  hsize_t file_bytes = 0;
  if (H5Fget_filesize(f.id(), &file_bytes) < 0) file_bytes = 0;
  const uint64_t limit = std::max<uint64_t>(kFloorBytes, kMaxExpansion * file_bytes);
  uint64_t n = 1;
  for (const uint64_t d : shape) {
    if (d != 0 && n > limit / d) {
      n = UINT64_MAX;
      break;
    }
    n *= d;
  }
  if (n != 0 && (n == UINT64_MAX || n > limit / std::max<size_t>(elem_bytes, 1)))
    fail(f.path(), object, "cannot read",
         fmt::format("shape [{}] holds more than a {}-byte file can (damaged header?)",
                     fmt::join(shape, ", "), static_cast<uint64_t>(file_bytes)));
  return static_cast<size_t>(n);
}

std::vector<uint64_t> space_shape(hid_t space) {
  int nd = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(nd > 0 ? nd : 0);
  if (nd > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return std::vector<uint64_t>(dims.begin(), dims.end());
}

std::string type_name(hid_t t) {
  size_t size = H5Tget_size(t);
  switch (H5Tget_class(t)) {
    case H5T_INTEGER:
      return fmt::format("{}int{}", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", 8 * size);
    case H5T_FLOAT:
      return fmt::format("float{}", 8 * size);
    case H5T_STRING:
      return H5Tis_variable_str(t) > 0 ? "string" : fmt::format("string[{}]", size);
    case H5T_ENUM:
      return "enum";
    case H5T_COMPOUND:
      return fmt::format("compound[{}]", H5Tget_nmembers(t));
    default:
      return "other";
  }
}

static bool is_numeric(hid_t t) {
  auto c = H5Tget_class(t);
  return c == H5T_INTEGER || c == H5T_FLOAT || c == H5T_ENUM;
}

// Create dataset `name` (replacing an existing one), creating parent groups.
Handle create_dataset(const File& f, const std::string& name, hid_t type, hid_t space, hid_t dcpl) {
  if (f.exists(name))
    check(H5Ldelete(f.id(), name.c_str(), H5P_DEFAULT), f.path(), name, "cannot replace");
  Handle lcpl = lcpl_with_parents();
  return own(H5Dcreate2(f.id(), name.c_str(), type, space, lcpl.get(), dcpl, H5P_DEFAULT), f.path(),
             name, "cannot create dataset");
}

Handle open_dataset(const File& f, const std::string& name) {
  if (!f.exists(name)) fail(f.path(), name, "cannot open dataset", "no such object");
  return own(H5Dopen2(f.id(), name.c_str(), H5P_DEFAULT), f.path(), name, "cannot open dataset");
}

}  // namespace detail

using namespace detail;

// ---------------------------------------------------------------------------------------------
Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    Handle tmp(std::move(*this));
    id_ = o.id_;
    o.id_ = -1;
  }
  return *this;
}

Handle::~Handle() { close(); }

int Handle::close() {
  if (id_ < 0) return 0;
  const hid_t id = id_;
  id_ = -1;
  switch (H5Iget_type(id)) {
    case H5I_FILE:
      return H5Fclose(id);
    case H5I_GROUP:
      return H5Gclose(id);
    case H5I_DATASET:
      return H5Dclose(id);
    case H5I_DATASPACE:
      return H5Sclose(id);
    case H5I_DATATYPE:
      return H5Tclose(id);
    case H5I_ATTR:
      return H5Aclose(id);
    case H5I_GENPROP_LST:
      return H5Pclose(id);
    default:
      return 0;
  }
}

// ---------------------------------------------------------------------------------------------
size_t open_object_count() {
  const ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

File File::create(const std::string& path, bool seal_block) {
  silence_hdf5();
  File f;
  f.path_ = path;
  // The user block holds the integrity seal (h5_seal.hpp), written by AtomicOutput::commit.
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE));
  if (seal_block) H5Pset_userblock(fcpl.get(), seal::kBlockBytes);
  // A strong close: H5Fclose closes every object still open in the file (one whose own close
  // failed on a full disk), so the file and its descriptor are not kept for the process's life.
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  f.h_ = own(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), path, "",
             "cannot create file");
  return f;
}

File File::open_read(const std::string& path, const char* unsealed_error) {
  silence_hdf5();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "", "cannot open", "is a folder");
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "", "cannot open", "no such file");
  // The seal first: libhdf5 must never parse a damaged velox file (it can crash on one).
  const bool sealed = seal::check(path);
  if (!sealed && unsealed_error) throw IoError(path + ": " + unsealed_error);
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    fail(path, "", "cannot open", "not an HDF5 file");
  }
  File f;
  f.path_ = path;
  f.h_ = own(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path, "", "cannot open");
  f.sealed_ = sealed;
  return f;
}

void File::close() {
  if (!h_.valid()) return;
  hid_t id = h_.get();
  if (H5Fflush(id, H5F_SCOPE_GLOBAL) < 0) {
    const std::string reason = hdf5_reason();
    const int errnum = hdf5_errno();
    h_.close();  // its result is moot: the file is already known bad
    H5Eclear2(H5E_DEFAULT);
    fail(path_, "", "cannot flush", reason, errnum);
  }
  close_checked(h_, path_, "");  // H5Fclose writes the superblock and the last metadata
}

bool File::exists(const std::string& name) const {
  if (name.empty() || name == "/") return true;
  // H5Lexists fails (rather than returning 0) when an intermediate group is missing, so each
  // prefix is asked in turn: a missing one answers 0 before its children are asked, and a
  // failure is then a real one (a read error, a damaged file), never "absent": an object that
  // cannot be read must not pass for one that is not there (a library's classes, a catalog's
  // epochs).
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = name.find('/', pos + 1);
    std::string prefix = name.substr(0, pos);
    if (prefix.empty() || prefix == "/") continue;
    const htri_t r = H5Lexists(id(), prefix.c_str(), H5P_DEFAULT);
    if (r == 0) return false;
    check(r, path_, prefix, "cannot look up");
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
namespace {

template <typename T>
void write_array(const File& f, const std::string& name, const std::vector<T>& data,
                 const std::vector<uint64_t>& shape) {
  if (product(shape) != data.size())
    fail(f.path(), name, "cannot write",
         fmt::format("{} values do not fill shape [{}]", data.size(), fmt::join(shape, ", ")));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space = own(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                     f.path(), name, "bad shape");
  Handle ds = create_dataset(f, name, native_type<T>(), space.get());
  if (!data.empty())
    check(H5Dwrite(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
          f.path(), name, "cannot write");
  close_checked(ds, f.path(), name);
}

template <typename T>
std::vector<T> read_array(const File& f, const std::string& name, std::vector<uint64_t>* shape) {
  Handle ds = open_dataset(f, name);
  Handle type = own(H5Dget_type(ds.get()), f.path(), name, "cannot get type");
  if (!is_numeric(type.get()))
    fail(f.path(), name, "cannot read as numbers", "dataset type is " + type_name(type.get()));
  Handle space = own(H5Dget_space(ds.get()), f.path(), name, "cannot get shape");
  auto dims = space_shape(space.get());
  std::vector<T> out(checked_count(f, name, dims, sizeof(T)));
  if (!out.empty())
    check(H5Dread(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), f.path(),
          name, "cannot read");
  if (shape) *shape = dims;
  return out;
}

}  // namespace

void File::write(const std::string& name, const std::vector<double>& data,
                 const std::vector<uint64_t>& shape) {
  write_array(*this, name, data, shape);
}
void File::write(const std::string& name, const std::vector<float>& data,
                 const std::vector<uint64_t>& shape) {
  write_array(*this, name, data, shape);
}
void File::write(const std::string& name, const std::vector<int64_t>& data,
                 const std::vector<uint64_t>& shape) {
  write_array(*this, name, data, shape);
}
std::vector<double> File::read_double(const std::string& name, std::vector<uint64_t>* shape) const {
  return read_array<double>(*this, name, shape);
}
std::vector<float> File::read_float(const std::string& name, std::vector<uint64_t>* shape) const {
  return read_array<float>(*this, name, shape);
}
std::vector<int64_t> File::read_int64(const std::string& name, std::vector<uint64_t>* shape) const {
  return read_array<int64_t>(*this, name, shape);
}

// ---------------------------------------------------------------------------------------------
namespace {

std::string attr_label(const std::string& obj, const std::string& attr) {
  return fmt::format("{} attribute '{}'", obj, attr);
}

void write_attr(const File& f, const std::string& obj, const std::string& attr, hid_t type,
                const void* value) {
  const std::string label = attr_label(obj, attr);
  if (!f.exists(obj)) fail(f.path(), label, "cannot write", "no such object " + obj);
  if (H5Aexists_by_name(f.id(), obj.c_str(), attr.c_str(), H5P_DEFAULT) > 0)
    check(H5Adelete_by_name(f.id(), obj.c_str(), attr.c_str(), H5P_DEFAULT), f.path(), label,
          "cannot replace");
  Handle space = scalar_space();
  Handle a = own(H5Acreate_by_name(f.id(), obj.c_str(), attr.c_str(), type, space.get(),
                                   H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 f.path(), label, "cannot create");
  check(H5Awrite(a.get(), type, value), f.path(), label, "cannot write");
  close_checked(a, f.path(), label);
}

struct OpenAttr {
  Handle attr, type, space;
  size_t n = 0;  // number of elements (1 for scalars)
};

OpenAttr open_attr(const File& f, const std::string& obj, const std::string& attr) {
  const std::string label = attr_label(obj, attr);
  if (!f.has_attr(obj, attr)) fail(f.path(), label, "cannot read", "no such attribute");
  OpenAttr a;
  a.attr = own(H5Aopen_by_name(f.id(), obj.c_str(), attr.c_str(), H5P_DEFAULT, H5P_DEFAULT),
               f.path(), label, "cannot open");
  a.type = own(H5Aget_type(a.attr.get()), f.path(), label, "cannot get type");
  a.space = own(H5Aget_space(a.attr.get()), f.path(), label, "cannot get shape");
  const hssize_t points = H5Sget_simple_extent_npoints(a.space.get());
  a.n = points > 0 ? checked_count(f, label, space_shape(a.space.get()), sizeof(double)) : 0;
  return a;
}

template <typename T>
std::vector<T> read_attr_numbers(const File& f, const std::string& obj, const std::string& attr) {
  OpenAttr a = open_attr(f, obj, attr);
  if (!is_numeric(a.type.get()))
    fail(f.path(), attr_label(obj, attr), "cannot read as number",
         "attribute type is " + type_name(a.type.get()));
  std::vector<T> v(a.n);
  hid_t mem = std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
  if (a.n > 0)
    check(H5Aread(a.attr.get(), mem, v.data()), f.path(), attr_label(obj, attr), "cannot read");
  return v;
}

std::vector<std::string> read_attr_strings(const File& f, const std::string& obj,
                                           const std::string& attr) {
  OpenAttr a = open_attr(f, obj, attr);
  if (H5Tget_class(a.type.get()) != H5T_STRING)
    fail(f.path(), attr_label(obj, attr), "cannot read as string",
         "attribute type is " + type_name(a.type.get()));
  hid_t id = a.attr.get();
  auto v = read_string_elements(a.type.get(), a.n,
                                [id](hid_t mem, void* buf) { return H5Aread(id, mem, buf); });
  if (v.size() != a.n) fail(f.path(), attr_label(obj, attr), "cannot read", hdf5_reason());
  return v;
}

}  // namespace

void File::set_attr(const std::string& obj, const std::string& attr, const std::string& value) {
  Handle type = vlen_utf8_type();
  const char* p = value.c_str();
  write_attr(*this, obj, attr, type.get(), &p);
}
void File::set_attr(const std::string& obj, const std::string& attr, double value) {
  write_attr(*this, obj, attr, H5T_NATIVE_DOUBLE, &value);
}
void File::set_attr(const std::string& obj, const std::string& attr, int64_t value) {
  write_attr(*this, obj, attr, H5T_NATIVE_INT64, &value);
}

bool File::has_attr(const std::string& obj, const std::string& attr) const {
  if (!exists(obj)) return false;
  const htri_t r = H5Aexists_by_name(id(), obj.c_str(), attr.c_str(), H5P_DEFAULT);
  check(r, path_, attr_label(obj, attr), "cannot look up");  // a read error is not "absent"
  return r > 0;
}

std::string File::attr_string(const std::string& obj, const std::string& attr) const {
  auto v = read_attr_strings(*this, obj, attr);
  if (v.size() != 1) fail(path_, attr_label(obj, attr), "cannot read", "not a scalar string");
  return v[0];
}
double File::attr_double(const std::string& obj, const std::string& attr) const {
  auto v = read_attr_numbers<double>(*this, obj, attr);
  if (v.size() != 1) fail(path_, attr_label(obj, attr), "cannot read", "not a scalar");
  return v[0];
}
int64_t File::attr_int64(const std::string& obj, const std::string& attr) const {
  auto v = read_attr_numbers<int64_t>(*this, obj, attr);
  if (v.size() != 1) fail(path_, attr_label(obj, attr), "cannot read", "not a scalar");
  return v[0];
}

std::vector<std::string> File::attr_names(const std::string& obj) const {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  check(H5Aiterate_by_name(id(), obj.c_str(), H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names,
                           H5P_DEFAULT),
        path_, obj, "cannot list attributes");
  return names;
}

std::string File::attr_text(const std::string& obj, const std::string& attr) const {
  OpenAttr a = open_attr(*this, obj, attr);
  std::vector<std::string> items;
  auto cls = H5Tget_class(a.type.get());
  if (cls == H5T_STRING) {
    items = read_attr_strings(*this, obj, attr);
  } else if (cls == H5T_INTEGER || cls == H5T_ENUM) {
    for (auto v : read_attr_numbers<int64_t>(*this, obj, attr))
      items.push_back(fmt::format("{}", v));
  } else if (cls == H5T_FLOAT) {
    for (auto v : read_attr_numbers<double>(*this, obj, attr))
      items.push_back(fmt::format("{}", v));
  } else {
    return "<" + type_name(a.type.get()) + ">";
  }
  bool scalar = H5Sget_simple_extent_type(a.space.get()) == H5S_SCALAR;
  if (scalar && items.size() == 1) return items[0];
  return fmt::format("[{}]", fmt::join(items, ", "));
}

// ---------------------------------------------------------------------------------------------
AtomicOutput::AtomicOutput(std::string final_path)
    : final_(std::move(final_path)), tmp_(final_ + ".tmp") {
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);  // a stale temp from an earlier crash
}

AtomicOutput::~AtomicOutput() {
  if (done_) return;
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void AtomicOutput::commit() {
  seal::write(tmp_);
  sync_file(tmp_);  // the data on disk before the name: a crash never leaves a named, empty file
  std::error_code ec;
  std::filesystem::rename(tmp_, final_, ec);
  if (ec) fail(final_, "", "cannot rename " + tmp_ + " onto it", ec.message(), ec.value());
  done_ = true;
  sync_folder_of(final_);
}

void sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0 && ::fsync(fd) != 0) err = errno;
  if (fd >= 0) ::close(fd);
  if (err != 0)
    throw IoError(fmt::format("{}: cannot sync to disk: {} (errno {})", path, std::strerror(err),
                              err),
                  err);
}

void sync_folder_of(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);  // best effort: some filesystems refuse fsync on a folder
  ::close(fd);
}

}  // namespace velox::h5

// Internals shared by io/h5.cpp and io/h5_table.cpp; include nowhere else (it pulls in hdf5.h).
#pragma once
#include <hdf5.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/h5.hpp"

namespace velox::h5::detail {

// Throws IoError "FILE: OBJECT: WHAT: REASON" (OBJECT empty for whole-file problems).
// `errnum`: the errno behind it, where known (IoError::error_number).
[[noreturn]] void fail(const std::string& file, const std::string& object, const std::string& what,
                       const std::string& reason, int errnum = 0);
// The innermost description on HDF5's error stack, which is then cleared; a file driver's
// system-call failure reads "<strerror> (errno N)", and hdf5_errno() then returns N (else 0).
std::string hdf5_reason();
int hdf5_errno();
// Throw (with hdf5_reason()) if r < 0, else return r; own() wraps the id in a Handle.
hid_t check(hid_t r, const std::string& file, const std::string& object, const char* what);
Handle own(hid_t r, const std::string& file, const std::string& object, const char* what);
// Close `h` now and throw IoError if HDF5 reports a failure: a dataset's chunks and a file's
// metadata are written at close, so a write path never leaves a close unchecked.
void close_checked(Handle& h, const std::string& file, const std::string& object);

Handle vlen_utf8_type();
Handle fixed_string_type(size_t size);  // null-padded, ASCII (numpy 'S<size>')
std::string type_name(hid_t type);      // "float64", "int32", "string[99]", "compound[23]", ...
std::vector<uint64_t> space_shape(hid_t space);
uint64_t product(const std::vector<uint64_t>& shape);
// The element count of `shape` for reading `object` into memory at `elem_bytes` per element,
// refused (IoError naming the object) where no file of f's size could hold it: more than
// kMaxExpansion times the file's bytes (beyond a 64 MiB floor) or a count that overflows. A
// damaged or forged header otherwise makes the reader allocate what it says (fuzzing: a shape of
// 2^59 doubles in an 81 kB template library, which ASan reports as out of memory).
size_t checked_count(const File& f, const std::string& object, const std::vector<uint64_t>& shape,
                     size_t elem_bytes);

// Create dataset `name` (replacing an existing one, creating parent groups) / open one.
Handle create_dataset(const File& f, const std::string& name, hid_t type, hid_t space,
                      hid_t dcpl = H5P_DEFAULT);
Handle open_dataset(const File& f, const std::string& name);

// Strings of a dataset or attribute (fixed or variable length). `read` reads into memory type.
template <typename Read>
std::vector<std::string> read_string_elements(hid_t file_type, size_t n, Read read) {
  std::vector<std::string> out;
  out.reserve(n);
  if (H5Tis_variable_str(file_type) > 0) {
    std::vector<char*> ptrs(n, nullptr);
    Handle mem = vlen_utf8_type();
    if (n > 0 && read(mem.get(), ptrs.data()) < 0) return {};
    for (char* p : ptrs) {
      out.emplace_back(p ? p : "");
      H5free_memory(p);
    }
  } else {
    size_t size = H5Tget_size(file_type);
    std::vector<char> buf(n * size);
    Handle mem = fixed_string_type(size);
    if (n > 0 && read(mem.get(), buf.data()) < 0) return {};
    for (size_t i = 0; i < n; ++i)
      out.emplace_back(buf.data() + i * size, strnlen(buf.data() + i * size, size));
  }
  return out;
}

}  // namespace velox::h5::detail

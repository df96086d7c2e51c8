// HDF5 wrapper, part 2: string datasets, compound tables and dataset listing (see h5.hpp).
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "io/h5.hpp"
#include "io/h5_detail.hpp"

namespace velox::h5 {

using namespace detail;

namespace {

// numpy/h5py's bool: an int8 enum {FALSE = 0, TRUE = 1}. h5py maps it back to numpy bool.
Handle bool_type() {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t v = 0;
  H5Tenum_insert(t, "FALSE", &v);
  v = 1;
  H5Tenum_insert(t, "TRUE", &v);
  return Handle(t);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
void File::write_strings(const std::string& name, const std::vector<std::string>& lines) {
  size_t longest = 1;
  for (const auto& l : lines) longest = std::max(longest, l.size());
  std::vector<char> buf(lines.size() * longest, '\0');
  for (size_t i = 0; i < lines.size(); ++i)
    std::memcpy(&buf[i * longest], lines[i].data(), lines[i].size());
  Handle type = fixed_string_type(longest);
  hsize_t n = lines.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  // Every line is padded to the longest: gzip keeps the padding from costing bytes (astropy's
  // table header repeats one long provenance value's width on every line). Chunks of ~1 MB.
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (n > 0) {
    const hsize_t chunk = std::clamp<hsize_t>((1u << 20) / longest, 1, n);
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    H5Pset_deflate(dcpl.get(), 4);
  }
  Handle ds = create_dataset(*this, name, type.get(), space.get(), dcpl.get());
  if (n > 0)
    check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), path_, name,
          "cannot write");
  close_checked(ds, path_, name);  // the chunks are compressed and written here
}

std::vector<std::string> File::read_strings(const std::string& name) const {
  Handle ds = open_dataset(*this, name);
  Handle type = own(H5Dget_type(ds.get()), path_, name, "cannot get type");
  if (H5Tget_class(type.get()) != H5T_STRING)
    fail(path_, name, "cannot read as strings", "dataset type is " + type_name(type.get()));
  Handle space = own(H5Dget_space(ds.get()), path_, name, "cannot get shape");
  const size_t n = checked_count(*this, name, space_shape(space.get()), sizeof(std::string));
  hid_t id = ds.get();
  auto v = read_string_elements(type.get(), n, [id](hid_t mem, void* buf) {
    return H5Dread(id, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  });
  if (v.size() != n) fail(path_, name, "cannot read", hdf5_reason());
  return v;
}

// ---------------------------------------------------------------------------------------------
namespace {

// The packed compound type of a table, used both in memory and in the file.
Handle compound_type(const std::vector<File::Member>& members, size_t record_size) {
  Handle t(H5Tcreate(H5T_COMPOUND, record_size));
  for (const auto& m : members) {
    Handle owned;
    hid_t mt = -1;
    switch (m.kind) {
      case File::Kind::kInt32:
        mt = H5T_NATIVE_INT32;
        break;
      case File::Kind::kInt64:
        mt = H5T_NATIVE_INT64;
        break;
      case File::Kind::kFloat64:
        mt = H5T_NATIVE_DOUBLE;
        break;
      case File::Kind::kBool:
        owned = bool_type();
        mt = owned.get();
        break;
      case File::Kind::kFixedString:
        owned = fixed_string_type(m.size);
        mt = owned.get();
        break;
    }
    if (H5Tinsert(t.get(), m.name.c_str(), m.offset, mt) < 0) return Handle();
  }
  return t;
}

}  // namespace

void File::write_table(const std::string& name, const std::vector<Member>& members,
                       size_t record_size, const std::vector<unsigned char>& records) {
  if (record_size == 0 || records.size() % record_size != 0)
    fail(path_, name, "cannot write table", "buffer is not a whole number of records");
  Handle type = compound_type(members, record_size);
  if (!type.valid()) fail(path_, name, "cannot write table", "bad member layout: " + hdf5_reason());
  hsize_t n = records.size() / record_size, max_n = H5S_UNLIMITED;
  hsize_t chunk = std::clamp<hsize_t>(n, 1, 1024);
  Handle space(H5Screate_simple(1, &n, &max_n));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl.get(), 1, &chunk);
  H5Pset_shuffle(dcpl.get());
  H5Pset_deflate(dcpl.get(), 4);
  Handle ds = create_dataset(*this, name, type.get(), space.get(), dcpl.get());
  if (n > 0)
    check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, records.data()), path_,
          name, "cannot write table");
  close_checked(ds, path_, name);  // the chunks are compressed and written here
}

std::vector<unsigned char> File::read_table(const std::string& name,
                                            const std::vector<Member>& members, size_t record_size,
                                            std::vector<std::string>* missing) const {
  Handle ds = open_dataset(*this, name);
  Handle ftype = own(H5Dget_type(ds.get()), path_, name, "cannot get type");
  if (H5Tget_class(ftype.get()) != H5T_COMPOUND)
    fail(path_, name, "cannot read table", "dataset type is " + type_name(ftype.get()));
  std::vector<Member> present;
  for (const auto& m : members) {
    if (H5Tget_member_index(ftype.get(), m.name.c_str()) >= 0) {
      present.push_back(m);
      continue;
    }
    H5Eclear2(H5E_DEFAULT);
    if (!missing) fail(path_, name + " column " + m.name, "cannot read table", "no such column");
    missing->push_back(m.name);
  }
  Handle space = own(H5Dget_space(ds.get()), path_, name, "cannot get shape");
  auto dims = space_shape(space.get());
  if (dims.size() != 1) fail(path_, name, "cannot read table", "dataset is not 1-D");
  if (present.empty()) fail(path_, name, "cannot read table", "none of its columns is known");
  checked_count(*this, name, dims, record_size);
  Handle type = compound_type(present, record_size);
  if (!type.valid()) fail(path_, name, "cannot read table", "bad member layout: " + hdf5_reason());
  std::vector<unsigned char> out(dims[0] * record_size);
  if (!out.empty())
    check(H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), path_, name,
          "cannot read table");
  return out;
}

std::vector<File::DatasetInfo> File::list_datasets() const {
  struct Ctx {
    hid_t file;
    std::vector<DatasetInfo> out;
  } ctx{id(), {}};
  auto cb = [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
    auto* c = static_cast<Ctx*>(data);
    if (info->type != H5O_TYPE_DATASET) return 0;
    Handle ds(H5Dopen2(c->file, name, H5P_DEFAULT));
    if (!ds.valid()) return -1;
    Handle type(H5Dget_type(ds.get())), space(H5Dget_space(ds.get()));
    c->out.push_back({std::string("/") + name, space_shape(space.get()), type_name(type.get())});
    return 0;
  };
  check(H5Ovisit(id(), H5_INDEX_NAME, H5_ITER_INC, cb, &ctx), path_, "/", "cannot list datasets");
  return ctx.out;
}

}  // namespace velox::h5

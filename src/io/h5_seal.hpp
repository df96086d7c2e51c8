// The integrity seal of velox's template libraries. velox creates a library with a 512-byte
// HDF5 user block (which HDF5 and h5py skip) and, when the file is complete, writes into it a
// checksum of everything after it:
//   "velox-seal v1 fnv1a64:<16 hex digits> bytes:<size after the block>\n", zero-padded.
// Opening a file checks the seal first, so a damaged or truncated file is refused with one
// clear line before the HDF5 library parses it (libhdf5 can crash on corrupt internals: found
// by fuzzing the template-library loader). A file changed after velox wrote it (e.g. by h5py in
// "a" mode) fails the check too. Files without a seal still open, but the library loader
// requires one. Catalogs carry none (astropy identifies HDF5 by the signature at byte 0 only).
#pragma once
#include <cstddef>
#include <string>

namespace velox::h5::seal {

constexpr size_t kBlockBytes = 512;  // the HDF5 user block (a power of two >= 512)

// Writes the seal into the user block of the HDF5 file at `path`. Does nothing unless the
// block is still all zeros and HDF5's signature follows it (a file from File::create). Throws
// IoError on I/O errors.
void write(const std::string& path);

// True if `path` carries a matching seal, false if it has none. Throws IoError "PATH: integrity
// seal does not match (file damaged or changed after velox wrote it)" for a broken seal, and
// for a file that cannot be read.
bool check(const std::string& path);

}  // namespace velox::h5::seal

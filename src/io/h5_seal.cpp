#include "common/fnv.hpp"
#include "io/h5_seal.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/error.hpp"

namespace velox::h5::seal {

namespace {

constexpr char kMagic[] = "velox-seal v1 ";
constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// FNV-1a 64 of the file from byte kBlockBytes to the end; `bytes` gets that length.
uint64_t digest(std::ifstream& in, const std::string& path, uint64_t& bytes) {
  uint64_t h = kFnvOffset;
  bytes = 0;
  std::vector<char> buf(1 << 20);
  in.seekg(kBlockBytes);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    fnv1a(h, buf.data(), n);
    bytes += n;
  }
  if (in.bad()) throw IoError(path + ": read error while checking the integrity seal");
  return h;
}

std::string seal_text(uint64_t h, uint64_t bytes) {
  return fmt::format("{}fnv1a64:{:016x} bytes:{}\n", kMagic, h, bytes);
}

}  // namespace

void write(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[kBlockBytes + sizeof kHdf5Signature] = {};
  if (!in.read(head, sizeof head)) return;  // too short to be an HDF5 file with a user block
  for (size_t i = 0; i < kBlockBytes; ++i)
    if (head[i] != 0) return;
  if (std::memcmp(head + kBlockBytes, kHdf5Signature, sizeof kHdf5Signature) != 0) return;
  in.clear();
  uint64_t bytes = 0;
  const uint64_t h = digest(in, path, bytes);
  const std::string text = seal_text(h, bytes);
  in.close();
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (!f) throw IoError(path + ": cannot open to write the integrity seal");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw IoError(path + ": cannot write the integrity seal");
}

bool check(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open: " + std::strerror(errno));
  char head[kBlockBytes] = {};
  in.read(head, sizeof head);
  if (std::strncmp(head, kMagic, sizeof kMagic - 1) != 0) return false;
  in.clear();
  uint64_t bytes = 0;
  const uint64_t h = digest(in, path, bytes);
  const std::string actual = seal_text(h, bytes);
  if (std::strncmp(head, actual.c_str(), actual.size()) != 0)
    throw IoError(path +
                  ": integrity seal does not match (file damaged or changed after velox "
                  "wrote it)");
  return true;
}

}  // namespace velox::h5::seal

#include "io/fits_guard.hpp"

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "common/error.hpp"

namespace velox::fits {

namespace {

constexpr int kCard = 80, kBuffer = 2880 * 64;

struct GzCloser {
  void operator()(gzFile g) const { gzclose(g); }
};

// CFITSIO (ffgtbp) strcpy's the value of a card "TTYPE<n>= <value>" into a 70-byte buffer; an
// unquoted value can be 70 characters plus the terminator. FITS requires a quoted string: any
// other value is refused (a superset of what overflows).
bool unquoted_ttype(const char* card) {
  if (card[0] != 'T' || card[1] != 'T' || card[2] != 'Y' || card[3] != 'P' || card[4] != 'E' ||
      card[8] != '=' || card[9] != ' ')
    return false;
  int v = 10;
  while (v < kCard && card[v] == ' ') ++v;
  return v < kCard && card[v] != '\'' && card[v] != '/';
}

// The last 4 bytes of a file, little-endian: for a gzip file, CFITSIO takes them for the
// inflated size (gzip ISIZE, mod 2^32) and allocates that much before inflating.
bool last_four_bytes(const std::string& path, uint64_t& v) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  unsigned char b[4];
  if (!f || std::fseek(f.get(), -4, SEEK_END) != 0 || std::fread(b, 1, 4, f.get()) != 4)
    return false;
  v = b[0] | (uint64_t{b[1]} << 8) | (uint64_t{b[2]} << 16) | (uint64_t{b[3]} << 24);
  return true;
}

}  // namespace

void check_headers_for_cfitsio(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> g(gzopen(path.c_str(), "rb"));
  if (!g) return;  // CFITSIO reports unreadable files
  // Every card CFITSIO can parse starts at a multiple of 80 bytes (HDUs start at multiples of
  // 2880): check them all, whatever the HDU structure (a corrupt NAXIS can make CFITSIO look for
  // headers where a careful reader would not). Data that happen to look like such a card are
  // astronomically unlikely.
  std::unique_ptr<char[]> buf(new char[kBuffer]);
  long long offset = 0;
  int n = 0;
  while ((n = gzread(g.get(), buf.get(), kBuffer)) > 0) {
    for (int c = 0; c + kCard <= n; c += kCard)
      if (unquoted_ttype(buf.get() + c))
        throw IoError(path + ": byte " + std::to_string(offset + c) + ": " +
                      std::string(buf.get() + c, 8) +
                      ": value is not a quoted string (malformed FITS header)");
    offset += n;
    if (n % kCard) break;  // a short read: the end of a file that is not whole cards
  }
  if (gzdirect(g.get())) return;
  // CFITSIO allocates a .gz file's inflated size, as the file's last 4 bytes state, before
  // inflating: a corrupt trailer, or garbage after the gzip data, made it allocate up to 4 GiB
  // (found by fuzzing). Having inflated to the end here, zlib has checked every member's CRC and
  // length; the last 4 bytes must not claim more than the data hold.
  int err = Z_OK;
  const char* why = gzerror(g.get(), &err);
  if (n < 0 || (err != Z_OK && err != Z_BUF_ERROR))
    throw IoError(path + ": corrupt gzip data (" + (why ? why : "inflate error") + ")");
  const uint64_t inflated = static_cast<uint64_t>(offset);
  uint64_t claimed = 0;
  if (inflated < (uint64_t{1} << 32) && last_four_bytes(path, claimed) && claimed > inflated)
    throw IoError(path + ": corrupt .gz: its last 4 bytes claim " + std::to_string(claimed) +
                  " inflated bytes, the data hold " + std::to_string(inflated));
}

}  // namespace velox::fits

#include "io/fits_guard.hpp"

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "common/error.hpp"

namespace velox::fits {

namespace {

constexpr int kBlock = 2880, kCard = 80;
constexpr int kMaxHdus = 100000;  // beyond this, leave the file to CFITSIO

struct GzCloser {
  void operator()(gzFile g) const { gzclose(g); }
};

// An integer card value (columns 11-80 up to a comment); false if it is not one.
bool card_int(const char* card, int64_t& v) {
  std::string s(card + 10, kCard - 10);
  const auto slash = s.find('/');
  if (slash != std::string::npos) s.resize(slash);
  char* end = nullptr;
  v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str()) return false;
  while (*end == ' ') ++end;
  return *end == '\0';
}

bool key_is(const char* card, const char* key) {
  int i = 0;
  for (; key[i]; ++i)
    if (card[i] != key[i]) return false;
  for (; i < 8; ++i)
    if (card[i] != ' ') return false;
  return true;
}

// Card keyword "<prefix><digits>" padded with blanks to 8 characters.
bool indexed_key(const char* card, const char* prefix) {
  int i = 0;
  for (; prefix[i]; ++i)
    if (card[i] != prefix[i]) return false;
  if (card[i] < '0' || card[i] > '9') return false;
  while (i < 8 && card[i] >= '0' && card[i] <= '9') ++i;
  for (; i < 8; ++i)
    if (card[i] != ' ') return false;
  return true;
}

// Walks the HDUs of an open (gz)file; throws for a card that would crash CFITSIO. Returns at
// the end of the file or at the first thing it cannot follow.
void walk_headers(gzFile g, const std::string& path) {
  char block[kBlock];
  for (int hdu = 0; hdu < kMaxHdus; ++hdu) {
    int64_t bitpix = 0, naxis = 0, pcount = 0, gcount = 1, n_elem = 1;
    bool end = false;
    while (!end) {
      if (gzread(g, block, kBlock) != kBlock) return;  // end of file (or short)
      for (int c = 0; c < kBlock && !end; c += kCard) {
        const char* card = block + c;
        if (key_is(card, "END")) {
          end = true;
        } else if (indexed_key(card, "TTYPE") && card[8] == '=') {
          // The value must be a quoted string (FITS standard 4.0, 7.3.2).
          int v = 10;
          while (v < kCard && card[v] == ' ') ++v;
          if (v < kCard && card[v] != '\'' && card[v] != '/')
            throw IoError(path + ": HDU " + std::to_string(hdu + 1) + ": " + std::string(card, 8) +
                          ": value is not a quoted string (malformed FITS header)");
        } else if (key_is(card, "BITPIX")) {
          if (!card_int(card, bitpix)) return;
        } else if (key_is(card, "NAXIS")) {
          if (!card_int(card, naxis) || naxis < 0 || naxis > 999) return;
        } else if (indexed_key(card, "NAXIS")) {
          int64_t n = 0;
          if (!card_int(card, n) || n < 0 || __builtin_mul_overflow(n_elem, n, &n_elem)) return;
        } else if (key_is(card, "PCOUNT")) {
          if (!card_int(card, pcount) || pcount < 0) return;
        } else if (key_is(card, "GCOUNT")) {
          if (!card_int(card, gcount) || gcount < 0) return;
        }
      }
    }
    // Skip the data: |BITPIX|/8 * GCOUNT * (PCOUNT + NAXIS1 * ... * NAXISn), in whole blocks.
    if (naxis == 0) n_elem = 0;
    int64_t bytes = 0;
    if (__builtin_add_overflow(n_elem, pcount, &bytes) ||
        __builtin_mul_overflow(bytes, gcount, &bytes) ||
        __builtin_mul_overflow(bytes, std::abs(bitpix) / 8, &bytes))
      return;
    const int64_t skip = (bytes + kBlock - 1) / kBlock * kBlock;
    if (skip > 0 && gzseek(g, static_cast<z_off_t>(skip), SEEK_CUR) < 0) return;
  }
}

}  // namespace

void check_headers_for_cfitsio(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> g(gzopen(path.c_str(), "rb"));
  if (!g) return;  // CFITSIO reports unreadable files
  walk_headers(g.get(), path);
  if (gzdirect(g.get())) return;  // not compressed
  // CFITSIO allocates a .gz file's inflated size, as its gzip trailer states, before inflating:
  // a corrupt trailer made it allocate up to 4 GiB (found by fuzzing). Inflate to the end here:
  // zlib checks every member's CRC and length, so corrupt data or trailers stop here.
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(g.get(), buf, sizeof buf)) > 0) {
  }
  int err = Z_OK;
  const char* why = gzerror(g.get(), &err);
  if (n < 0 || (err != Z_OK && err != Z_BUF_ERROR))
    throw IoError(path + ": corrupt gzip data (" + (why ? why : "inflate error") + ")");
}

}  // namespace velox::fits

#include "io/fits_guard.hpp"

#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "common/error.hpp"

namespace velox::fits {

namespace {

constexpr int kCard = 80, kBuffer = 2880 * 64;

// `s` without leading and trailing blanks.
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

struct GzCloser {
  void operator()(gzFile g) const { gzclose(g); }
};

// CFITSIO (ffgtbp) strcpy's the value of a card "TTYPE<n>=<value>" into a 70-byte buffer; an
// unquoted value can be up to 71 characters plus the terminator (CFITSIO does not insist on the
// blank after '='). FITS requires a quoted string: a TTYPE card whose value, after the '=' and
// any blanks, does not start with a quote is refused (a superset of what overflows). Letters
// are compared without case.
bool unquoted_ttype(const char* card) {
  static const char kKey[] = "TTYPE";
  for (int i = 0; i < 5; ++i)
    if (std::toupper(static_cast<unsigned char>(card[i])) != kKey[i]) return false;
  int v = 5;
  while (v < kCard && card[v] != '=') ++v;
  if (v == kCard) return false;  // no value: CFITSIO ignores the card
  ++v;
  while (v < kCard && card[v] == ' ') ++v;
  return v < kCard && card[v] != '\'' && card[v] != '/';
}

// CFITSIO (imcomp_get_compressed_image_par) divides by the tile sizes ZTILEn of a tile-compressed
// image: a ZTILEn card whose value is an integer <= 0 is refused (a SIGFPE, found by fuzzing the
// DESI reader).
bool nonpositive_ztile(const char* card) {
  static const char kKey[] = "ZTILE";
  for (int i = 0; i < 5; ++i)
    if (std::toupper(static_cast<unsigned char>(card[i])) != kKey[i]) return false;
  int v = 5;
  if (!std::isdigit(static_cast<unsigned char>(card[v]))) return false;
  while (v < 8 && std::isdigit(static_cast<unsigned char>(card[v]))) ++v;
  while (v < 8 && card[v] == ' ') ++v;
  if (v >= kCard || card[v] != '=') return false;
  const std::string value(card + v + 1, card + kCard);
  char* end = nullptr;
  const long long t = std::strtoll(value.c_str(), &end, 10);
  return end != value.c_str() && t <= 0;
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
  // A zip archive: CFITSIO would allocate the size at its bytes 22-25 (up to 4 GiB) to unzip it.
  // No survey delivers zipped FITS; refuse it.
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    char magic[2] = {};
    if (f && std::fread(magic, 1, 2, f.get()) == 2 && magic[0] == 'P' && magic[1] == 'K')
      throw IoError(path + ": a zip archive, not a FITS file (unzip it first)");
  }
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
      else if (nonpositive_ztile(buf.get() + c))
        throw IoError(path + ": byte " + std::to_string(offset + c) + ": " +
                      std::string(buf.get() + c, 8) +
                      ": tile size not positive (malformed compressed image)");
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
  // CFITSIO's estimate (drvrmem.c mem_compress_open): the last 4 bytes, plus 2^32 until it
  // reaches the compressed size when the file exceeds 10000 bytes.
  const uint64_t inflated = static_cast<uint64_t>(offset);
  uint64_t claimed = 0;
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  if (ec || !last_four_bytes(path, claimed)) return;
  if (file_bytes > 10000)
    while (claimed < file_bytes) claimed += uint64_t{1} << 32;
  if (claimed > inflated)
    throw IoError(path + ": corrupt .gz: CFITSIO would take it for " + std::to_string(claimed) +
                  " bytes (from its last 4 bytes), the data inflate to " +
                  std::to_string(inflated));
}

std::string primary_header_value(const std::string& path, const std::string& key) {
  std::unique_ptr<gzFile_s, GzCloser> g(gzopen(path.c_str(), "rb"));
  if (!g) return "";
  char card[81] = {};
  // A primary header of at most 1000 blocks of 36 cards: more is not a header a survey writes.
  for (long n = 0; n < 36000; ++n) {
    if (gzread(g.get(), card, 80) != 80) return "";
    const std::string name = trim(std::string(card, 8));
    if (name == "END") return "";
    if (name != key || card[8] != '=' || card[9] != ' ') continue;
    std::string v(card + 10, 70);
    const size_t a = v.find_first_not_of(' ');
    if (a == std::string::npos) return "";
    if (v[a] == '\'') {
      std::string out;
      for (size_t k = a + 1; k < v.size(); ++k) {
        if (v[k] != '\'') {
          out += v[k];
        } else if (k + 1 < v.size() && v[k + 1] == '\'') {
          out += '\'';
          ++k;
        } else {
          break;
        }
      }
      return trim(out);
    }
    return trim(
        v.substr(a, v.find('/', a) == std::string::npos ? std::string::npos : v.find('/', a) - a));
  }
  return "";
}

}  // namespace velox::fits

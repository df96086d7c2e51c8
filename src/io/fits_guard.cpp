#include "io/fits_guard.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
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

// c in upper case, as std::toupper in the "C" locale (velox never sets another), inline: every
// card of a file is tested, data included.
inline char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

// Whether the card's first n characters are key[0 .. n-1] (upper case), letters without case.
bool key_starts(const char* card, const char* key, int n) {
  for (int i = 0; i < n; ++i)
    if (upper(card[i]) != key[i]) return false;
  return true;
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
  if (!key_starts(card, "TTYPE", 5)) return false;
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
  if (!key_starts(card, "ZTILE", 5)) return false;
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

// CFITSIO reads the integer keywords of a tile-compressed image header (ZBITPIX, ZNAXIS,
// ZNAXISn, ZTILEn, ZVALn, ZDITHER0, ZBLANK, BLANK; imcomp_get_compressed_image_par, through
// ffgky and ffc2j) and, when one does not convert, writes its message "Error in ffc2j evaluating
// string as a long integer: " (52 characters) plus up to 30 characters of the value into an
// 81-byte buffer: a value of 29 characters or more overflows it, and glibc's fortify check
// aborts the process (found by fuzzing the DESI reader; CFITSIO 4.2.0 to 4.6.3). Such a card is
// refused: its value, as CFITSIO extracts it (ffpsvc: a quoted string with its quotes, a complex
// value "(...)" up to its first ')', comment text included, else the text up to a blank or '/'),
// is 29 characters or more and holds no number. Letters are compared without case.
bool long_unconvertible_integer(const char* card, std::string* key) {
  // Every card of the file comes here, data included: the keywords' first letters and the value
  // indicator first, before any string is built (this check once cost 60% of a DESI coadd's read).
  const char c0 = upper(card[0]);
  if ((c0 != 'Z' && c0 != 'B') || card[8] != '=') return false;
  std::string k(card, 8);
  for (char& ch : k) ch = upper(ch);
  k = trim(k);
  auto indexed = [&](const std::string& root) {
    if (k.size() <= root.size() || k.compare(0, root.size(), root) != 0) return false;
    for (size_t i = root.size(); i < k.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(k[i]))) return false;
    return true;
  };
  if (!(k == "ZBITPIX" || k == "ZNAXIS" || k == "ZDITHER0" || k == "ZBLANK" || k == "BLANK" ||
        indexed("ZNAXIS") || indexed("ZTILE") || indexed("ZVAL")))
    return false;
  std::string v = trim(std::string(card + 9, card + kCard));
  if (v.empty()) return false;
  std::string number;
  if (v[0] == '\'') {
    // A quoted string, up to its closing quote (two quotes inside stand for one).
    size_t e = 1;
    while (e < v.size() && !(v[e] == '\'' && (e + 1 == v.size() || v[e + 1] != '\'')))
      e += v[e] == '\'' ? 2 : 1;
    v = v.substr(0, std::min(e + 1, v.size()));
    number = v.size() >= 2 ? trim(v.substr(1, v.size() - 2)) : "";
  } else if (v[0] == '(') {
    // A complex value, up to the first ')' whatever comes between (a comment included): never
    // an integer.
    v = v.substr(0, std::min(v.find(')'), v.size() - 1) + 1);
  } else {
    v = v.substr(0, v.find_first_of(" /"));  // a number or logical: up to a blank or '/'
    number = v;
  }
  if (v.size() < 29) return false;
  // A number converts (FITS also writes D exponents); anything else fails in ffc2j.
  for (char& ch : number)
    if (ch == 'D' || ch == 'd') ch = 'E';
  char* end = nullptr;
  const double x = std::strtod(number.c_str(), &end);
  if (!number.empty() && end == number.c_str() + number.size() && std::isfinite(x) &&
      std::fabs(x) < 9.2e18)
    return false;
  *key = k;
  return true;
}

// A binary or ASCII table has at most 999 columns (FITS 4.0, section 7.2.1); CFITSIO (ffgtbp)
// allocates TFIELDS column descriptions of ~160 bytes each without checking, then walks them:
// TFIELDS = 12623064 took 2 GB (found by fuzzing the SDSS reader). A TFIELDS card whose value is
// an integer above 999 is refused.
bool too_many_tfields(const char* card) {
  if (!key_starts(card, "TFIELDS ", 8) || card[8] != '=') return false;
  const std::string value(card + 9, card + kCard);
  char* end = nullptr;
  const long long n = std::strtoll(value.c_str(), &end, 10);
  return end != value.c_str() && n > 999;
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
    for (int c = 0; c + kCard <= n; c += kCard) {
      const char* card = buf.get() + c;
      auto refuse = [&](const std::string& key, const char* why) {
        throw IoError(path + ": byte " + std::to_string(offset + c) + ": " + key + ": " + why);
      };
      if (unquoted_ttype(card))
        refuse(std::string(card, 8), "value is not a quoted string (malformed FITS header)");
      else if (nonpositive_ztile(card))
        refuse(std::string(card, 8), "tile size not positive (malformed compressed image)");
      else if (too_many_tfields(card))
        refuse("TFIELDS", "more than 999 columns (malformed FITS header)");
      else if (std::string key; long_unconvertible_integer(card, &key))
        refuse(key, "value is not an integer (malformed FITS header)");
    }
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

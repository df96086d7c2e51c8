// A pre-scan of FITS headers for the malformations that crash CFITSIO itself (4.2.0, Debian 12)
// instead of making it return an error. fits::File::open_read runs it before CFITSIO parses a
// file, so such a file becomes one IoError like any other unreadable input. Found by fuzzing
// the readers (scripts/fuzz.sh; tests/unit/io/test_fuzz_regressions.cpp):
//  - TTYPEn whose value is not a quoted string: CFITSIO's ffgtbp strcpy's the raw value (up to
//    70 characters plus the terminator) into the 70-byte tcolumn.ttype, a heap overflow that
//    glibc's fortify check aborts on.
//  - A .gz file with a corrupt gzip trailer, or garbage after the gzip data: CFITSIO allocates
//    the inflated size the file's last 4 bytes claim, plus 4 GiB when that is less than the
//    compressed size, before inflating. zlib checks every member's length and CRC, and
//    CFITSIO's estimate may not exceed what the data inflate to.
//  - A zip archive ("PK"): CFITSIO allocates the size its bytes 22-25 claim.
//  - ZTILEn <= 0 in a tile-compressed image: CFITSIO divides by it (SIGFPE).
//  - An integer keyword of a tile-compressed image (ZBITPIX, ZNAXIS, ZNAXISn, ZTILEn, ZVALn,
//    ZDITHER0, ZBLANK, BLANK) whose value holds no number and is 29 characters or more: CFITSIO's
//    ffc2j writes its error message past an 81-byte buffer, and glibc's fortify check aborts.
//  - TFIELDS above 999 (the FITS limit): CFITSIO allocates and walks that many column
//    descriptions (12623064 took 2 GB).
// (A corrupt RICE_1 tile, which CFITSIO's Rice decoder reads past, is caught per HDU before it is
// decoded: fits::File::check_rice_tiles.)
#pragma once
#include <string>

namespace velox::fits {

// Reads `path` once (gzip-compressed or not, through zlib) and throws IoError "PATH: byte N:
// <keyword>: <why>" for a card that would crash CFITSIO, or for corrupt gzip data (zlib's CRC
// and length checks). Everything else is left to CFITSIO, which reports it.
void check_headers_for_cfitsio(const std::string& path);

// The value of keyword `key` in the primary header of `path` (gzip-compressed or not), read
// through zlib up to the END card only, without CFITSIO (which inflates a whole .gz file to open
// it): a quoted string without its quotes and trailing blanks ('' unescaped), else the value
// text before any comment; "" when the keyword is absent or the file is not readable FITS.
// Used to group inputs by a header key (`velox fit --epochs --group-by`).
std::string primary_header_value(const std::string& path, const std::string& key);

}  // namespace velox::fits

// A pre-scan of FITS headers for the malformations that crash CFITSIO itself (4.2.0, Debian 12)
// instead of making it return an error. fits::File::open_read runs it before CFITSIO parses a
// file, so such a file becomes one IoError like any other unreadable input. Found by fuzzing
// the readers (scripts/fuzz.sh; tests/unit/io/test_fuzz_regressions.cpp):
//  - TTYPEn whose value is not a quoted string: CFITSIO's ffgtbp strcpy's the raw value (up to
//    70 characters plus the terminator) into the 70-byte tcolumn.ttype, a heap overflow that
//    glibc's fortify check aborts on.
//  - A .gz file with a corrupt gzip trailer: CFITSIO allocates the inflated size the trailer
//    claims (up to 4 GiB) before inflating. zlib checks every member's length and CRC.
#pragma once
#include <string>

namespace velox::fits {

// Walks the header of every HDU of `path` (gzip-compressed or not, through zlib) and throws
// IoError "PATH: HDU N: <card>: <why>" for a card that would crash CFITSIO; for a .gz file, also
// IoError for corrupt gzip data (zlib's CRC and length checks). Headers it cannot follow (no END
// card, odd sizes) are left to CFITSIO, which reports them. Plain files: reads the headers only,
// seeking over the data; .gz files are inflated once (CFITSIO inflates them again).
void check_headers_for_cfitsio(const std::string& path);

}  // namespace velox::fits

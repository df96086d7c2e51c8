// What a failed output write means for the job (app/output_faults.hpp, issue 50).
#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>

#include "app/output_faults.hpp"

using namespace velox;

TEST_CASE("a full, read-only or vanished output filesystem stops the job at once", "[faults]") {
  const auto dir = std::filesystem::temp_directory_path();
  for (int e : {ENOSPC, EDQUOT, EROFS, ENODEV, ENXIO, ESTALE, ENOTCONN}) {
    OutputFaultPolicy p(dir.string());
    CHECK_FALSE(p.failed(e).empty());
  }
  OutputFaultPolicy gone((dir / "velox-no-such-output-folder").string());
  CHECK(gone.failed(EIO).find("is gone") != std::string::npos);
}

TEST_CASE("other write errors fail one input until three in a row fail", "[faults]") {
  OutputFaultPolicy p(std::filesystem::temp_directory_path().string());
  CHECK(p.failed(EIO).empty());
  CHECK(p.failed(EFBIG).empty());
  p.ok();  // a success in between resets the count
  CHECK(p.failed(EIO).empty());
  CHECK(p.failed(0).empty());
  const std::string why = p.failed(EFBIG);
  CHECK(why.find("3 output writes in a row failed") != std::string::npos);
  CHECK(why.find("EFBIG") != std::string::npos);
}

TEST_CASE("errno_text names the error and its symbol", "[faults]") {
  CHECK(errno_text(ENOSPC).find("(ENOSPC)") != std::string::npos);
  CHECK(errno_text(0) == "unknown error");
  CHECK(errno_text(EOVERFLOW).find("errno") != std::string::npos);
}

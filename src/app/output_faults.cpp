#include "app/output_faults.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace velox {

namespace {

const char* errno_name(int e) {
  switch (e) {
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EROFS: return "EROFS";
    case EIO: return "EIO";
    case EFBIG: return "EFBIG";
    case ENODEV: return "ENODEV";
    case ENXIO: return "ENXIO";
    case ESTALE: return "ESTALE";
    case ENOTCONN: return "ENOTCONN";
    case ESHUTDOWN: return "ESHUTDOWN";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EINTR: return "EINTR";
    case EAGAIN: return "EAGAIN";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    default: return nullptr;
  }
}

}  // namespace

std::string errno_text(int errnum) {
  if (errnum == 0) return "unknown error";
  const char* name = errno_name(errnum);
  return name ? fmt::format("{} ({})", std::strerror(errnum), name)
              : fmt::format("{} (errno {})", std::strerror(errnum), errnum);
}

std::string OutputFaultPolicy::failed(int errnum) {
  ++consecutive_;
  switch (errnum) {
    case ENOSPC:
    case EDQUOT:
      return "the output filesystem is full: " + errno_text(errnum);
    case EROFS:
      return "the output filesystem is read-only: " + errno_text(errnum);
    case ENODEV:
    case ENXIO:
    case ESTALE:
    case ENOTCONN:
    case ESHUTDOWN:
      return "the output filesystem is gone: " + errno_text(errnum);
    default:
      break;
  }
  std::error_code ec;
  if (!dir_.empty() && !std::filesystem::is_directory(dir_, ec))
    return fmt::format("the output folder {} is gone", dir_);
  if (consecutive_ >= kMaxConsecutive)
    return fmt::format("{} output writes in a row failed (last: {})", consecutive_,
                       errno_text(errnum));
  return "";
}

}  // namespace velox

#include "app/job_outputs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace velox {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCatalogSuffix = ".velox.h5";

std::string strip_suffix(std::string s, std::initializer_list<const char*> suffixes) {
  for (const char* suf : suffixes)
    if (ends_with(s, suf) && s.size() > std::string(suf).size())
      return s.substr(0, s.size() - std::string(suf).size());
  return s;
}

std::string clean(std::string s) {
  std::replace_if(s.begin(), s.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  return s;
}

std::string format_line(const StatusLine& l) {
  return fmt::format("{}\t{}\t{}\t{:.3f}\t{}\t{}\n", clean(l.input), l.status, l.targets, l.seconds,
                     l.rank, clean(l.error));
}

constexpr const char* kHeader = "input\tstatus\ttargets\tseconds\trank\terror\n";

}  // namespace

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> input_members(const std::string& input) {
  std::vector<std::string> out;
  size_t a = 0;
  for (;;) {
    const size_t b = input.find('\n', a);
    out.push_back(input.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return out;
}

std::string join_members(const std::vector<std::string>& members) {
  std::string out;
  for (size_t i = 0; i < members.size(); ++i) out += (i ? "\n" : "") + members[i];
  return out;
}

std::string input_stem(const std::string& path) {
  const auto members = input_members(path);
  const std::string name = fs::path(members.front()).filename().string();
  std::string stem =
      strip_suffix(strip_suffix(name, {".gz", ".fz", ".bz2"}), {".fits", ".fit", ".fts"});
  if (members.size() > 1) stem += "+" + std::to_string(members.size() - 1);
  return stem;
}

namespace {

fs::path output_folder(const std::string& dir, const std::string& input, bool tree) {
  if (!tree) return fs::path(dir);
  const fs::path pixdir = fs::path(input_members(input).front()).parent_path();
  return fs::path(dir) / pixdir.parent_path().filename() / pixdir.filename();
}

}  // namespace

std::string per_input_catalog(const std::string& dir, const std::string& input, bool tree) {
  return (output_folder(dir, input, tree) / (input_stem(input) + kCatalogSuffix)).string();
}

std::string per_input_rvtab(const std::string& dir, const std::string& input, bool tree) {
  return (output_folder(dir, input, tree) / ("rvtab_" + input_stem(input) + ".fits")).string();
}

StatusLine status_of(const FileResult& r) {
  // "partial": fitted, but a member of its --group-by input group could not be read (error).
  return {r.path,      r.ok ? (r.error.empty() ? "ok" : "partial") : "failed",
          r.n_targets, r.seconds,
          r.rank,      r.error};
}

namespace {

// Writes all of `text` at `offset` (pwrite, retried on short writes and EINTR); errno on failure.
int write_all(int fd, const std::string& text, off_t offset) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

std::string status_text(const std::vector<StatusLine>& lines) {
  std::string text = kHeader;
  for (const auto& l : lines) text += format_line(l);
  return text;
}

}  // namespace

StatusFile::StatusFile(const std::string& dir, size_t n_inputs)
    : path_((fs::path(dir) / "status.tsv").string()) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw IoError(fmt::format("{}: cannot write the status file: {}", path_, std::strerror(err)),
                  err);
  }
  // Reserve the blocks of every line to come (a filesystem without fallocate just goes on).
  reserve_ = static_cast<off_t>(
      std::min<size_t>((n_inputs + 1) * kReserveBytesPerInput, size_t{64} << 20));
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, reserve_) != 0 && errno != EOPNOTSUPP &&
      errno != ENOSYS) {
    const int err = errno;
    spdlog::warn("{}: cannot reserve {} bytes for the status lines: {}", path_, reserve_,
                 std::strerror(err));
  }
  pending_ = kHeader;
  flush();
}

StatusFile::~StatusFile() {
  if (fd_ >= 0) ::close(fd_);
}

void StatusFile::append(const StatusLine& line) { pending_ += format_line(line); }

void StatusFile::flush() {
  if (pending_.empty() || fd_ < 0) return;
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  const int err = end < 0 ? errno : write_all(fd_, pending_, end);
  if (err == 0) {
    pending_.clear();
    return;
  }
  if (!warned_)
    spdlog::error("{}: cannot append the status lines ({}); retrying after each input", path_,
                  std::strerror(err));
  warned_ = true;
  // No half line: the retry writes it whole. The cut frees the reserved blocks beyond the end
  // (KEEP_SIZE), so they are reserved again.
  if (end >= 0 && ::ftruncate(fd_, end) == 0)
    (void)::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, reserve_);
}

void StatusFile::finish(const std::vector<StatusLine>& in_input_order) {
  const std::string text = status_text(in_input_order);
  const std::string tmp = path_ + ".tmp";
  std::string why;
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = fd < 0 ? errno : write_all(fd, text, 0);
    if (fd >= 0 && err == 0 && ::fsync(fd) != 0) err = errno;
    if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && ::rename(tmp.c_str(), path_.c_str()) != 0) err = errno;
    if (err == 0) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
      return;
    }
    why = std::strerror(err);
    ::unlink(tmp.c_str());
  }
  // No room for a second file: rewrite the reserved file in place (its lines only grow, and the
  // blocks were reserved when it was opened), then cut it to length.
  int err = fd_ < 0 ? EBADF : write_all(fd_, text, 0);
  if (err == 0 && ::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) err = errno;
  if (err == 0 && ::fsync(fd_) != 0) err = errno;
  if (err != 0)
    throw IoError(fmt::format("{}: cannot write the status file ({}; in place: {})", path_, why,
                              std::strerror(err)),
                  err);
  spdlog::warn("{}: rewritten in place (the atomic rewrite failed: {})", path_, why);
}

std::string merge_folder_id(const std::string& dir) {
  std::error_code ec;
  const auto p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  return ec ? dir : p.string();
}

namespace {

// Files of DIR and of DIR/*/*/ (the healpix tree of --desi-root outputs).
std::vector<fs::path> files_in_tree(const std::string& dir, std::error_code& ec) {
  std::vector<fs::path> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) {
      out.push_back(it->path());
      continue;
    }
    if (!it->is_directory()) continue;
    std::error_code e1;
    for (fs::directory_iterator g(it->path(), e1); !e1 && g != end; g.increment(e1)) {
      if (!g->is_directory()) continue;
      std::error_code e2;
      for (fs::directory_iterator f(g->path(), e2); !e2 && f != end; f.increment(e2))
        if (f->is_regular_file()) out.push_back(f->path());
    }
  }
  return out;
}

}  // namespace

size_t remove_stale_temps(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& p : files_in_tree(dir, ec)) {
    const std::string name = p.filename().string();
    std::error_code e;
    if (ends_with(name, std::string(kCatalogSuffix) + ".tmp") || ends_with(name, ".fits.tmp"))
      n += fs::remove(p, e);
  }
  return n;
}

std::vector<std::string> catalogs_in(const std::string& dir, const std::string& exclude) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& p : files_in_tree(dir, ec)) {
    if (ends_with(p.filename().string(), kCatalogSuffix) &&
        !(fs::exists(exclude) && fs::equivalent(p, exclude, ec)))
      out.push_back(p.string());
  }
  if (ec) throw IoError(dir + ": cannot list the output directory: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace velox

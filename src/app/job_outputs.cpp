#include "app/job_outputs.hpp"

#include <fmt/format.h>

#include <algorithm>
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

StatusFile::StatusFile(const std::string& dir) : path_((fs::path(dir) / "status.tsv").string()) {
  out_.open(path_, std::ios::trunc);
  if (!out_) throw IoError(path_ + ": cannot write the status file");
  out_ << kHeader << std::flush;
}

void StatusFile::append(const StatusLine& line) { out_ << format_line(line); }

void StatusFile::flush() { out_.flush(); }

void StatusFile::finish(const std::vector<StatusLine>& in_input_order) {
  out_.close();
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream o(tmp, std::ios::trunc);
    o << kHeader;
    for (const auto& l : in_input_order) o << format_line(l);
    if (!o.flush()) throw IoError(tmp + ": cannot write the status file");
  }
  std::error_code ec;
  fs::rename(tmp, path_, ec);
  if (ec) throw IoError(path_ + ": cannot rename " + tmp + " onto it: " + ec.message());
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

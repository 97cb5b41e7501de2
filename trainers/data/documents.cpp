// read_documents: which files a dataset path means, and the documents in each.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "data/dataset.h"
#include "data/dataset_internal.h"
#include "data/sha256.h"
#include "data/utf8.h"
#include "ddx/errors/errors.h"

namespace ddx::data {
namespace {

namespace fs = std::filesystem;

std::string read_whole_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError("cannot read dataset file " + file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool is_folder_member(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".txt" || ext == ".md" || ext == ".jsonl";
}

bool is_hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

void check_builtin_name(const std::string& dataset) {
  if (dataset != kBuiltinDefault) {
    throw UsageError("unknown builtin dataset \"" + dataset + "\" (ddx has " + kBuiltinDefault + ")");
  }
}

bool is_builtin(const std::string& dataset) { return dataset.rfind(kBuiltinPrefix, 0) == 0; }

}  // namespace

std::vector<fs::path> dataset_files(const std::string& dataset) {
  std::error_code ec;
  const fs::path root(dataset);
  if (fs::is_regular_file(root, ec)) return {root};
  if (!fs::is_directory(root, ec)) {
    throw UsageError("dataset not found: " + dataset + " (a file, a folder, or " + kBuiltinDefault + ")");
  }
  std::vector<fs::path> files;
  auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw UsageError("cannot list dataset folder " + dataset + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw UsageError("cannot list dataset folder " + dataset + ": " + ec.message());
    if (is_hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && is_folder_member(it->path())) files.push_back(it->path());
  }
  if (files.empty()) throw UsageError("dataset folder " + dataset + " has no *.txt, *.md or *.jsonl files");
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return a.generic_string() < b.generic_string();
  });
  return files;
}

std::vector<std::string> read_file_documents(const fs::path& file) {
  std::string content = read_whole_file(file);
  const std::string name = file.string();
  utf8::require_valid(content, name);
  if (content.rfind("\xEF\xBB\xBF", 0) == 0) content.erase(0, 3);  // a UTF-8 byte-order mark
  const std::string ext = file.extension().string();
  if (ext == ".jsonl") return parse_json_records(content, name, false);
  if (ext == ".json") {
    const size_t first = content.find_first_not_of(" \t\r\n");
    const bool array = first != std::string::npos && content[first] == '[';
    return parse_json_records(content, name, array);
  }
  std::vector<std::string> docs;
  docs.push_back(std::move(content));
  return docs;
}

std::vector<std::string> read_documents(const std::string& path) {
  if (is_builtin(path)) {
    check_builtin_name(path);
    return builtin_corpus_documents();
  }
  std::vector<std::string> docs;
  for (const fs::path& file : dataset_files(path)) {
    std::vector<std::string> more = read_file_documents(file);
    docs.insert(docs.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return docs;
}

std::string dataset_content_hash(const std::string& dataset) {
  Sha256 h;
  h.update("ddx-dataset-content-v1\n");
  if (is_builtin(dataset)) {
    check_builtin_name(dataset);
    h.update(dataset + "\n");
    for (const std::string& doc : builtin_corpus_documents()) {
      h.update(std::to_string(doc.size()) + "\n");
      h.update(doc);
    }
    return h.hex_digest();
  }
  const fs::path root(dataset);
  std::error_code ec;
  const bool folder = fs::is_directory(root, ec);
  std::vector<char> buf(1 << 20);
  for (const fs::path& file : dataset_files(dataset)) {
    // Relative names, so moving a dataset folder keeps its cache valid.
    const std::string name = folder ? fs::relative(file, root, ec).generic_string() : file.filename().string();
    std::ifstream in(file, std::ios::binary);
    if (!in) throw UsageError("cannot read dataset file " + file.string());
    h.update("file " + name + "\n");
    uint64_t size = 0;
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      const auto n = static_cast<size_t>(in.gcount());
      h.update(buf.data(), n);
      size += n;
    }
    h.update("\nsize " + std::to_string(size) + "\n");
  }
  return h.hex_digest();
}

}  // namespace ddx::data

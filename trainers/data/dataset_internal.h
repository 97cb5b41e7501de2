#pragma once
// Pieces of the dataset pipeline shared between its source files. Internal to ddx_data.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ddx::data {

constexpr const char* kBuiltinPrefix = "builtin:";
constexpr const char* kBuiltinDefault = "builtin:default";

// Bumped whenever the text ddx makes of a record changes (Alpaca template, document
// separators, builtin corpus), so token caches built by an older ddx are rebuilt.
constexpr int kDocumentFormatVersion = 1;

// The Alpaca prompt template (Stanford Alpaca's PROMPT_DICT, with and without input) followed
// by a newline and the output, as in the "text" column of tatsu-lab/alpaca.
std::string format_alpaca(const std::string& instruction, const std::string& input, const std::string& output);

// The files a dataset path stands for: the file itself, or a folder's *.txt, *.md, *.jsonl
// (recursively, hidden entries skipped, sorted by path). Throws UsageError for a missing path
// or a folder without such files.
std::vector<std::filesystem::path> dataset_files(const std::string& dataset);

// Documents of one file, by extension: .jsonl (JSON lines), .json (JSON lines, or one JSON
// array of records), anything else plain text (one document).
std::vector<std::string> read_file_documents(const std::filesystem::path& file);

// Records of a JSON-lines or JSON-array text: Alpaca or "text" schema, fixed by the first one.
std::vector<std::string> parse_json_records(const std::string& content, const std::string& file_name,
                                            bool json_array);

// The embedded default corpus (deterministic, about 1 MB).
std::vector<std::string> builtin_corpus_documents();

// SHA-256 (hex) over a dataset's content: every file's relative path and bytes, or the
// builtin corpus's text. Throws UsageError like dataset_files.
std::string dataset_content_hash(const std::string& dataset);

}  // namespace ddx::data

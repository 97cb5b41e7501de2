// JSON-lines (and JSON-array) records in the Alpaca or "text" schema. The first record fixes
// the schema for the file, so a stray record missing a field is reported instead of silently
// becoming a different kind of document.
#include <nlohmann/json.hpp>

#include "data/dataset_internal.h"
#include "ddx/errors/errors.h"

namespace ddx::data {
namespace {

using nlohmann::json;

enum class Schema { Unknown, Text, Alpaca };

// nlohmann's messages start with "[json.exception.parse_error.101] "; the tag helps nobody.
std::string short_message(const json::exception& e) {
  std::string m = e.what();
  const size_t close = m.find("] ");
  if (m.rfind("[json.exception", 0) == 0 && close != std::string::npos) m = m.substr(close + 2);
  return m;
}

class RecordReader {
 public:
  explicit RecordReader(std::vector<std::string>& docs) : docs_(docs) {}

  // `where` is "file:line" or "file: record N"; it starts every error.
  void add(const json& record, const std::string& where) {
    if (!record.is_object()) fail(where, std::string("expected a JSON object, got ") + record.type_name());
    if (schema_ == Schema::Unknown) {
      if (record.contains("text")) {
        schema_ = Schema::Text;
      } else if (record.contains("instruction") || record.contains("output")) {
        schema_ = Schema::Alpaca;
      } else {
        fail(where, "a record needs a \"text\" field or the Alpaca fields \"instruction\", \"input\" "
                    "(optional), \"output\"");
      }
      schema_where_ = where;
    }
    if (schema_ == Schema::Text) {
      docs_.push_back(field(record, "text", where, true));
    } else {
      docs_.push_back(format_alpaca(field(record, "instruction", where, true),
                                    field(record, "input", where, false),
                                    field(record, "output", where, true)));
    }
  }

 private:
  [[noreturn]] static void fail(const std::string& where, const std::string& why) {
    throw UsageError(where + ": " + why);
  }

  std::string field(const json& record, const char* name, const std::string& where, bool required) const {
    auto it = record.find(name);
    if (it == record.end() || (!required && it->is_null())) {
      if (!required) return "";
      fail(where, std::string("missing field \"") + name + "\" (the " +
                      (schema_ == Schema::Text ? "\"text\"" : "Alpaca") + " schema was set by " +
                      schema_where_ + ")");
    }
    if (!it->is_string()) {
      fail(where, std::string("field \"") + name + "\" must be a string, got " + it->type_name());
    }
    return it->get<std::string>();
  }

  std::vector<std::string>& docs_;
  Schema schema_ = Schema::Unknown;
  std::string schema_where_;
};

}  // namespace

std::vector<std::string> parse_json_records(const std::string& content, const std::string& file_name,
                                            bool json_array) {
  std::vector<std::string> docs;
  RecordReader reader(docs);
  if (json_array) {
    json all;
    try {
      all = json::parse(content);
    } catch (const json::parse_error& e) {
      throw UsageError(file_name + ": malformed JSON (" + short_message(e) + ")");
    }
    if (!all.is_array()) throw UsageError(file_name + ": expected a JSON array of records");
    for (size_t i = 0; i < all.size(); ++i) reader.add(all[i], file_name + ": record " + std::to_string(i + 1));
    return docs;
  }
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string::npos) end = content.size();
    ++line_no;
    std::string_view line(content.data() + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines are allowed
    const std::string where = file_name + ":" + std::to_string(line_no);
    json record;
    try {
      record = json::parse(line);
    } catch (const json::parse_error& e) {
      throw UsageError(where + ": malformed JSON (" + short_message(e) + ")");
    }
    reader.add(record, where);
  }
  return docs;
}

}  // namespace ddx::data

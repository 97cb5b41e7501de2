#pragma once
// node_exporter's textfile format (the Prometheus text exposition format), read back line by line
// in tests the way node_exporter's textfile collector reads it, failing the test on anything it
// would reject. Used by the unit test of the writer and by the tests that run `ddx health`.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ddx::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

// Parses the text exposition format as node_exporter's textfile collector reads it and fails the
// test on anything it would reject: an illegal name, HELP or TYPE twice or after the family's
// samples, a family split in two, a bad escape, a repeated series.
inline std::vector<Sample> parse_textfile(const std::string& text) {
  const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  const std::regex label_name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  const std::regex value_re(R"([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|NaN|[+-]Inf)");
  std::vector<Sample> samples;
  std::set<std::string> helped, typed, finished, series;
  std::string current;
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the last line has no newline";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, rest;
      words >> name >> rest;
      EXPECT_TRUE(std::regex_match(name, name_re)) << line;
      EXPECT_FALSE(finished.count(name)) << "family split: " << line;
      auto& seen = line[2] == 'H' ? helped : typed;
      EXPECT_TRUE(seen.insert(name).second) << "twice: " << line;
      if (line[2] == 'T') EXPECT_EQ(rest, "gauge") << line;
      if (current != name && !current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    EXPECT_FALSE(line.empty() || line[0] == '#') << "unexpected line '" << line << "'";
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    EXPECT_TRUE(std::regex_match(s.name, name_re)) << line;
    EXPECT_TRUE(typed.count(s.name)) << "sample before its TYPE: " << line;
    EXPECT_FALSE(finished.count(s.name)) << "family split: " << line;
    if (current != s.name && !current.empty()) finished.insert(current);
    current = s.name;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        const std::string label = line.substr(i, eq - i);
        EXPECT_TRUE(std::regex_match(label, label_name_re)) << label << " in " << line;
        EXPECT_EQ(line[eq + 1], '"') << line;
        std::string value;
        size_t k = eq + 2;
        for (; k < line.size() && line[k] != '"'; ++k) {
          if (line[k] == '\\') {
            ++k;
            EXPECT_TRUE(line[k] == '\\' || line[k] == '"' || line[k] == 'n') << "bad escape in " << line;
            value += line[k] == 'n' ? '\n' : line[k];
          } else {
            value += line[k];
          }
        }
        EXPECT_TRUE(s.labels.emplace(label, value).second) << "label twice in " << line;
        i = k + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    EXPECT_EQ(line[i], ' ') << line;
    s.value = line.substr(i + 1);
    EXPECT_TRUE(std::regex_match(s.value, value_re)) << line;
    EXPECT_TRUE(series.insert(line.substr(0, i)).second) << "repeated series: " << line;
    samples.push_back(s);
  }
  for (const auto& name : typed) EXPECT_TRUE(helped.count(name)) << name << " has no HELP";
  return samples;
}

inline std::vector<Sample> named(const std::vector<Sample>& samples, const std::string& name) {
  std::vector<Sample> out;
  for (const auto& s : samples) {
    if (s.name == name) out.push_back(s);
  }
  return out;
}

}  // namespace ddx::testing

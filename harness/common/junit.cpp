#include "harness/common/junit.h"

#include <sstream>

#include "ddx/text/svg_plot.h"  // svg::escape: the same XML escaping

namespace ddx {

std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases) {
  int failures = 0;
  int skipped = 0;
  double total = 0;
  for (const JunitCase& c : cases) {
    failures += c.failed;
    skipped += c.skipped;
    total += c.seconds;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites><testsuite name=\"" << svg::escape(suite) << "\" tests=\"" << cases.size() << "\" failures=\""
    << failures << "\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  for (const JunitCase& c : cases) {
    x << "  <testcase classname=\"" << svg::escape(c.classname) << "\" name=\"" << svg::escape(c.name) << "\" time=\""
      << c.seconds << "\">";
    if (c.failed) x << "<failure message=\"" << svg::escape(c.message) << "\">" << svg::escape(c.text) << "</failure>";
    if (c.skipped) x << "<skipped message=\"" << svg::escape(c.message) << "\"/>";
    x << "</testcase>\n";
  }
  x << "</testsuite></testsuites>\n";
  return x.str();
}

}  // namespace ddx

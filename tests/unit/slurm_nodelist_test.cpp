// SLURM's compressed host lists, tasks per node and the guide's master-port convention.
#include <gtest/gtest.h>

#include "ddx/errors/errors.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx {
namespace {

using Hosts = std::vector<std::string>;

std::string nodelist_error(const std::string& nodelist) {
  try {
    const Hosts hosts = expand_slurm_nodelist(nodelist);
    ADD_FAILURE() << "'" << nodelist << "' was accepted, " << hosts.size() << " hosts";
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string tasks_error(const std::string& spec) {
  try {
    const auto tasks = expand_slurm_tasks_per_node(spec);
    ADD_FAILURE() << "'" << spec << "' was accepted, " << tasks.size() << " nodes";
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SlurmNodelist, PlainHosts) {
  EXPECT_EQ(expand_slurm_nodelist("localhost"), Hosts{"localhost"});
  EXPECT_EQ(expand_slurm_nodelist("a,b,c"), (Hosts{"a", "b", "c"}));
}

TEST(SlurmNodelist, RangesAndListsInsideBrackets) {
  EXPECT_EQ(expand_slurm_nodelist("gpu[001-004,010],cpu7"),
            (Hosts{"gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "cpu7"}));
  EXPECT_EQ(expand_slurm_nodelist("n[07]"), Hosts{"n07"});
  EXPECT_EQ(expand_slurm_nodelist("n[3,1]"), (Hosts{"n3", "n1"}));  // SLURM's order is kept
}

TEST(SlurmNodelist, KeepsTheZeroPaddingOfTheRangeStart) {
  EXPECT_EQ(expand_slurm_nodelist("n[08-11]"), (Hosts{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_slurm_nodelist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_slurm_nodelist("n[098-100]"), (Hosts{"n098", "n099", "n100"}));
}

TEST(SlurmNodelist, SeveralBracketsAreACartesianProduct) {
  EXPECT_EQ(expand_slurm_nodelist("r[1-2]n[01-02]"), (Hosts{"r1n01", "r1n02", "r2n01", "r2n02"}));
  EXPECT_EQ(expand_slurm_nodelist("a[1-2]-ib"), (Hosts{"a1-ib", "a2-ib"}));
  EXPECT_EQ(expand_slurm_nodelist("x[1,3]y[5],z"), (Hosts{"x1y5", "x3y5", "z"}));
}

TEST(SlurmNodelist, RejectsMalformedLists) {
  struct Case { const char* list; const char* reason; };
  for (const Case& c : {Case{"gpu[1-2", "'[' without ']'"}, Case{"gpu1-2]", "']' without '['"},
                        Case{"gpu[[1-2]]", "nested '['"}, Case{"gpu[]", "empty item"},
                        Case{"gpu[1,]", "empty item"}, Case{"gpu[,1]", "empty item"},
                        Case{"a,,b", "empty host name"}, Case{",a", "empty host name"},
                        Case{"a,", "empty host name"}, Case{"", "empty"},
                        Case{"n[3-1]", "reversed"}, Case{"n[a-b]", "not a range of numbers"},
                        Case{"n[1-x]", "not a range of numbers"},
                        Case{"n[1-2-3]", "not a range of numbers"}, Case{"n[x]", "not a number"},
                        Case{"n[-3]", "not a range of numbers"},
                        Case{"n[0-99999999]", "too large"}}) {
    const std::string message = nodelist_error(c.list);
    EXPECT_NE(message.find(std::string("'") + c.list + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(c.reason), std::string::npos) << c.list << " -> " << message;
  }
}

TEST(SlurmTasksPerNode, ExpandsRepeats) {
  EXPECT_EQ(expand_slurm_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_slurm_tasks_per_node("4"), std::vector<int>{4});
  EXPECT_EQ(expand_slurm_tasks_per_node("1,8(x2)"), (std::vector<int>{1, 8, 8}));
}

TEST(SlurmTasksPerNode, RejectsMalformedSpecs) {
  for (const char* bad : {"", "x", "2(3)", "2(x3", "2(x)", "2(x0)", "0", "2,,1", "2,", "-1", "2(x3)1"}) {
    const std::string message = tasks_error(bad);
    EXPECT_NE(message.find(std::string("'") + bad + "'"), std::string::npos) << bad << " -> " << message;
  }
}

TEST(SlurmMasterPort, Is5000PlusTheLastFourDigitsOfTheJobId) {
  EXPECT_EQ(slurm_master_port("123456"), 8456);
  EXPECT_EQ(slurm_master_port("42"), 5042);
  EXPECT_EQ(slurm_master_port("10000"), 5000);
  EXPECT_EQ(slurm_master_port("9999"), 14999);
  EXPECT_THROW(slurm_master_port("12_3"), UsageError);
  EXPECT_THROW(slurm_master_port(""), UsageError);
}

}  // namespace
}  // namespace ddx

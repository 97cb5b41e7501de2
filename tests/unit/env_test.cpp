// Strict integer parsing and the environment snapshot.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>

#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"

namespace ddx {
namespace {

std::string parse_error(const std::string& what, const std::string& value, long long lo,
                        long long hi) {
  try {
    parse_int(what, value, lo, hi);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << what << "='" << value << "' was accepted";
  return "";
}

TEST(ParseInt, AcceptsDecimalIntegersWithinBounds) {
  EXPECT_EQ(parse_int("RANK", "0", 0, 10), 0);
  EXPECT_EQ(parse_int("RANK", "10", 0, 10), 10);
  EXPECT_EQ(parse_int("X", "-7", -10, 10), -7);
  EXPECT_EQ(parse_int("X", "007", 0, 10), 7);
  EXPECT_EQ(parse_int("X", "9223372036854775807", 0, LLONG_MAX), LLONG_MAX);
}

TEST(ParseInt, RejectsNonIntegersNamingTheVariable) {
  EXPECT_EQ(parse_error("RANK", "x", 0, 10), "RANK='x' is not an integer");
  EXPECT_EQ(parse_error("RANK", "", 0, 10), "RANK='' is not an integer");
  for (const char* bad : {" 1", "1 ", "1abc", "0x10", "+1", "1.5", "-", "1e3", "--1"}) {
    const std::string message = parse_error("WORLD_SIZE", bad, -100, 100);
    EXPECT_EQ(message, std::string("WORLD_SIZE='") + bad + "' is not an integer");
  }
}

TEST(ParseInt, RejectsValuesOutsideTheRange) {
  EXPECT_EQ(parse_error("MASTER_PORT", "70000", 1, 65535), "MASTER_PORT=70000 is outside 1..65535");
  EXPECT_EQ(parse_error("MASTER_PORT", "0", 1, 65535), "MASTER_PORT=0 is outside 1..65535");
  EXPECT_EQ(parse_error("RANK", "-1", 0, 3), "RANK=-1 is outside 0..3");
  // Too large for a long long is reported as out of range, not silently clamped.
  EXPECT_EQ(parse_error("RANK", "99999999999999999999", 0, 3), "RANK=99999999999999999999 is outside 0..3");
}

TEST(EnvGet, DistinguishesUnsetFromEmpty) {
  const EnvMap env{{"SET", "value"}, {"EMPTY", ""}};
  EXPECT_EQ(env_get(env, "SET"), std::optional<std::string>("value"));
  EXPECT_EQ(env_get(env, "EMPTY"), std::optional<std::string>(""));
  EXPECT_EQ(env_get(env, "MISSING"), std::nullopt);
}

TEST(CurrentEnv, SeesTheProcessEnvironment) {
  ASSERT_EQ(setenv("DDX_ENV_TEST_VAR", "a=b=c", 1), 0);
  ASSERT_EQ(setenv("DDX_ENV_TEST_EMPTY", "", 1), 0);
  const EnvMap env = current_env();
  unsetenv("DDX_ENV_TEST_VAR");
  unsetenv("DDX_ENV_TEST_EMPTY");
  EXPECT_EQ(env_get(env, "DDX_ENV_TEST_VAR"), std::optional<std::string>("a=b=c"));
  EXPECT_EQ(env_get(env, "DDX_ENV_TEST_EMPTY"), std::optional<std::string>(""));
  EXPECT_EQ(env_get(current_env(), "DDX_ENV_TEST_VAR"), std::nullopt);
}

}  // namespace
}  // namespace ddx

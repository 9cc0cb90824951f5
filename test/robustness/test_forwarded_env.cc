// Exports forwarded to ssh/pdsh nodes in LC_DS_EXPORT_<n> carriers come back as the same
// variables, in order, and the carriers are gone afterwards.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>

#include "contract/forwarded_env.h"

TEST_CASE("forwarded exports: carriers round-trip any value and disappear") {
  const ds::VariableList exports = {
      {"DS_FWD_A", "it's $HOME; rm -rf /"}, {"DS_FWD_B", "a=b=c"}, {"DS_FWD_A", "second wins"}};
  const ds::VariableList carriers = ds::forwardedExportVariables(exports);
  REQUIRE(carriers.size() == 3);
  CHECK(carriers[1] == std::pair<std::string, std::string>{"LC_DS_EXPORT_1", "DS_FWD_B=a=b=c"});
  // Numbers above 9 sort numerically, not as text.
  for (size_t i = 0; i < carriers.size(); ++i)
    setenv(("LC_DS_EXPORT_" + std::to_string(i == 2 ? 10 : i)).c_str(), carriers[i].second.c_str(),
           1);
  setenv("LC_DS_EXPORT_x", "DS_FWD_C=ignored", 1);  // not a carrier number
  CHECK(ds::adoptForwardedExports() == 3);
  CHECK(std::string(getenv("DS_FWD_A")) == "second wins");
  CHECK(std::string(getenv("DS_FWD_B")) == "a=b=c");
  CHECK(getenv("LC_DS_EXPORT_0") == nullptr);
  CHECK(getenv("LC_DS_EXPORT_10") == nullptr);
  CHECK(getenv("DS_FWD_C") == nullptr);
  for (const char* name : {"DS_FWD_A", "DS_FWD_B", "LC_DS_EXPORT_x"}) unsetenv(name);
}

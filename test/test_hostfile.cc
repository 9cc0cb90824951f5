// Hostfile grammar tests: every case of DEEPSPEED-SEMANTICS.md section 2, line numbers in errors
// and warnings, and readHostfile's local-mode answer for a path that is not a regular file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "launcher/hostfile.h"
#include "test/scratch_dir.h"

using ds::launcher::HostEntry;
using ds::launcher::parseHostfile;
using ds::launcher::readHostfile;

namespace {

using Hosts = std::vector<std::pair<std::string, int>>;

Hosts flatten(const std::vector<HostEntry>& entries) {
  Hosts out;
  for (const auto& e : entries) out.emplace_back(e.host, e.slots);
  return out;
}

}  // namespace

TEST_CASE("hostfile: accepted lines", "[hostfile]") {
  struct Case {
    const char* name;
    std::string text;
    Hosts expected;
  };
  const std::vector<Case> cases = {
      {"plain", "w0 slots=4\nw1 slots=2\n", {{"w0", 4}, {"w1", 2}}},
      {"no final newline", "w0 slots=4\nw1 slots=2", {{"w0", 4}, {"w1", 2}}},
      {"file order kept",
       "zz slots=1\naa slots=2\nmm slots=3\n",
       {{"zz", 1}, {"aa", 2}, {"mm", 3}}},
      {"comments and blank lines",
       "# cluster\n\n   \nw0 slots=4\n  # indented comment\nw1 slots=1\n",
       {{"w0", 4}, {"w1", 1}}},
      {"CRLF", "w0 slots=4\r\nw1 slots=2\r\n", {{"w0", 4}, {"w1", 2}}},
      {"lone CR is a line break", "w0 slots=4\rw1 slots=2\r", {{"w0", 4}, {"w1", 2}}},
      {"tabs and surrounding spaces", "\t w0\t\tslots=8  \t\n", {{"w0", 8}}},
      {"trailing text ignored", "w0 slots=4 max_slots=8\nw1 slots=2# c\n", {{"w0", 4}, {"w1", 2}}},
      {"a byte-order mark before the first host",
       "\xEF\xBB\xBF"
       "127.0.0.1 slots=2\n",
       {{"127.0.0.1", 2}}},
      {"second slots ignored", "w0 slots=2 slots=3\n", {{"w0", 2}}},
      {"leading zeros", "w0 slots=007\n", {{"w0", 7}}},
      {"slots=0 accepted", "w0 slots=0\nw1 slots=1\n", {{"w0", 0}, {"w1", 1}}},
      {"odd host names",
       "fe80::1 slots=1\n[::1] slots=2\nuser@host slots=3\nw#0 slots=4\n",
       {{"fe80::1", 1}, {"[::1]", 2}, {"user@host", 3}, {"w#0", 4}}},
      {"names are case-sensitive", "W0 slots=1\nw0 slots=2\n", {{"W0", 1}, {"w0", 2}}},
      {"Python whitespace \\x1f separates", "w0\x1fslots=5\n", {{"w0", 5}}},
      {"vertical tab and form feed stripped", "\v\fw0 slots=1\f\v\n", {{"w0", 1}}},
  };
  for (const auto& c : cases) {
    SECTION(c.name) { CHECK(flatten(parseHostfile(c.text, "hostfiles/x")) == c.expected); }
  }
}

TEST_CASE("hostfile: bad entries name the file, line and text", "[hostfile]") {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"w0 slots:4\n", "hostfiles/x:1: bad entry \"w0 slots:4\": expected \"HOST slots=N\""},
      {"w0 slots = 4\n", "hostfiles/x:1: bad entry \"w0 slots = 4\""},
      {"w0 SLOTS=4\n", "hostfiles/x:1: bad entry \"w0 SLOTS=4\""},
      {"w0 max_slots=4 slots=2\n", "hostfiles/x:1: bad entry \"w0 max_slots=4 slots=2\""},
      {"w0slots=4\n", "hostfiles/x:1: bad entry \"w0slots=4\""},
      {"slots=4\n", "hostfiles/x:1: bad entry \"slots=4\""},
      {"w0 slots=-1\n", "hostfiles/x:1: slots=-1: expected a whole number"},
      {"w0 slots=\n", "hostfiles/x:1: bad entry \"w0 slots=\""},
      {"w0\n", "hostfiles/x:1: bad entry \"w0\""},
      {"w0 w1 slots=4\n", "hostfiles/x:1: bad entry \"w0 w1 slots=4\""},
      {"# header\n\nw0 slots=4\n  w1 slots:4  \n", "hostfiles/x:4: bad entry \"w1 slots:4\""},
      {"w0 slots=4\r\n\r\nbad\r\n", "hostfiles/x:3: bad entry \"bad\""},
      {"w0 slots=99999999999\n",
       "hostfiles/x:1: slots value in \"w0 slots=99999999999\" is too large"},
      // DeepSpeed's \d+ reads the digits these begin with (1, 0, 3); only digits are taken here.
      {"w0 slots=1e3\n",
       "hostfiles/x:1: slots=1e3: expected a whole number in plain decimal digits"},
      {"w0 slots=4\nw1 slots=0x10\n", "hostfiles/x:2: slots=0x10: expected a whole number"},
      {"w0 slots=2.5\n", "hostfiles/x:1: slots=2.5: expected a whole number"},
      {"w0 slots=1_000\n", "hostfiles/x:1: slots=1_000: expected a whole number"},
      {"w0 slots=0b101\n", "hostfiles/x:1: slots=0b101: expected a whole number"},
      {"w0 slots=4E+2\n", "hostfiles/x:1: slots=4E+2: expected a whole number"},
      {"w0 slots=abc3\n", "hostfiles/x:1: slots=abc3: expected a whole number"},
      {"w0 slots=٣\n", "hostfiles/x:1: slots=٣: expected"},
  };
  for (const auto& c : cases) {
    INFO("text: " << c.text);
    REQUIRE_THROWS_AS(parseHostfile(c.text, "hostfiles/x"), ds::Error);
    REQUIRE_THROWS_WITH(parseHostfile(c.text, "hostfiles/x"), Catch::Contains(c.message));
  }
}

TEST_CASE("hostfile: text after the slot count is ignored as DeepSpeed ignores it, with a warning",
          "[hostfile]") {
  struct Case {
    std::string text;
    Hosts expected;
    std::vector<std::string> warnings;
  };
  const std::vector<Case> cases = {
      {"w0 slots=3abc\n",
       {{"w0", 3}},
       {"hostfiles/x:1: slots=3abc: read as slots=3, as DeepSpeed's runner reads it (the leading "
        "digits; \"abc\" is ignored); write slots=3"}},
      {"w0 slots=1\n# gpus\nw1 slots=8,gpu w2\nw2 slots=0x\n",
       {{"w0", 1}, {"w1", 8}, {"w2", 0}},
       {"hostfiles/x:3: slots=8,gpu: read as slots=8", "hostfiles/x:4: slots=0x: read as slots=0"}},
      // Escape bytes from the file reach a terminal escaped.
      {"w0 slots=2\x1b[2J\n", {{"w0", 2}}, {"(the leading digits; \"\\x1b[2J\" is ignored)"}},
      {"w0 slots=4\n", {{"w0", 4}}, {}},
  };
  for (const auto& c : cases) {
    INFO("text: " << c.text);
    std::vector<std::string> warnings;
    CHECK(flatten(parseHostfile(c.text, "hostfiles/x", &warnings)) == c.expected);
    REQUIRE(warnings.size() == c.warnings.size());
    for (size_t i = 0; i < warnings.size(); ++i)
      CHECK_THAT(warnings[i], Catch::Contains(c.warnings[i]));
  }
  // Without a place for warnings the line is still read.
  CHECK(flatten(parseHostfile("w0 slots=3abc\n", "h")) == Hosts{{"w0", 3}});
}

TEST_CASE("hostfile: duplicate hosts", "[hostfile]") {
  REQUIRE_THROWS_WITH(
      parseHostfile("w0 slots=1\nw1 slots=2\n# c\nw2 slots=1\nw1 slots=2\n", "hostfiles/x"),
      Catch::Contains("hostfiles/x:5: multiple entries for host w1 (first on line 2)"));
  // Same host, different slot counts: still a duplicate.
  REQUIRE_THROWS_WITH(parseHostfile("w0 slots=1\nw0 slots=8\n", "hostfiles/x"),
                      Catch::Contains("hostfiles/x:2: multiple entries for host w0"));
}

TEST_CASE("hostfile: first error in file order wins", "[hostfile]") {
  SECTION("bad line before duplicate") {
    REQUIRE_THROWS_WITH(parseHostfile("w0 slots=1\nw0 slots:2\nw0 slots=1\n", "h"),
                        Catch::Contains("h:2: bad entry \"w0 slots:2\""));
  }
  SECTION("duplicate before bad line") {
    REQUIRE_THROWS_WITH(parseHostfile("w0 slots=1\nw0 slots=1\nw1 slots:2\n", "h"),
                        Catch::Contains("h:2: multiple entries for host w0 (first on line 1)"));
  }
}

TEST_CASE("hostfile: nothing but blanks and comments is an error", "[hostfile]") {
  const std::vector<std::string> texts = {"", "\n\n", "# only a comment\n", "  \t\r\n# x\n   \n"};
  for (const auto& text : texts) {
    INFO("text: " << text);
    REQUIRE_THROWS_WITH(
        parseHostfile(text, "hostfiles/x"),
        Catch::Contains("hostfiles/x: hostfile is empty or not formatted correctly: expected "
                        "lines like \"worker-0 slots=4\""));
  }
}

TEST_CASE("readHostfile: local mode and real files", "[hostfile]") {
  namespace fs = std::filesystem;
  const fs::path dir = ds::test::makeScratchDir("hostfile");

  SECTION("missing path is local mode") {
    CHECK_FALSE(readHostfile((dir / "no-such-file").string()).has_value());
  }
  SECTION("a directory is not a hostfile either") {
    CHECK_FALSE(readHostfile(dir.string()).has_value());
  }
  SECTION("a regular file larger than any hostfile is refused unread") {
    const fs::path huge = dir / "huge";
    { std::ofstream(huge) << "w0 slots=2\n"; }
    fs::resize_file(huge, (size_t{64} << 20) + 1);  // sparse: nothing is written
    REQUIRE_THROWS_WITH(readHostfile(huge.string()), Catch::Contains("larger than 64 MiB"));
  }
  SECTION("an existing file is parsed, errors carry its path") {
    const fs::path good = dir / "good";
    std::ofstream(good) << "# nodes\nw0 slots=2\nw1 slots=4\n";
    const auto hosts = readHostfile(good.string());
    REQUIRE(hosts.has_value());
    CHECK(flatten(*hosts) == Hosts{{"w0", 2}, {"w1", 4}});

    const fs::path bad = dir / "bad";
    std::ofstream(bad) << "w0 slots=2\nw1 slots:4\n";
    REQUIRE_THROWS_WITH(readHostfile(bad.string()),
                        Catch::Contains(bad.string() + ":2: bad entry \"w1 slots:4\""));

    const fs::path empty = dir / "empty";
    std::ofstream(empty) << "";
    REQUIRE_THROWS_WITH(readHostfile(empty.string()),
                        Catch::Contains(empty.string() + ": hostfile is empty"));
  }
}

TEST_CASE("hostfile: host names that would reach ssh, pdsh or a shell wrongly are refused",
          "[hostfile]") {
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"w0 slots=1\n-oProxyCommand=x slots=1\n",
       "hostfiles/x:2: a host name may not start with '-'"},
      {"a,b slots=1\n", "hostfiles/x:1: a host name may not contain ','"},
      {"node[1-4] slots=1\n", "hostfiles/x:1: a host name may not contain '[' or ']'"},
      {"w\x01 slots=1\n", "hostfiles/x:1: host name contains control byte 1"},
      {"w\xff\xfe slots=1\n", "hostfiles/x:1: host name is not valid UTF-8 (byte 2)"},
      {"w\xc0\xaf slots=1\n", "hostfiles/x:1: host name is not valid UTF-8 (byte 2)"},
      {"w$(reboot) slots=1\n", "hostfiles/x:1: host name contains shell metacharacter '$'"},
      {std::string(1 << 20, 'h') + " slots=1\n",
       "hostfiles/x:1: host name of 1048576 bytes (at most 512)"},
      {"w0 slots=65536\nw1 slots=1\n",
       "hostfiles/x:2: the hostfile's slots add up to more than 65536"},
      {"w0 slots=2147483647\n", "hostfiles/x:1: the hostfile's slots add up to more than 65536"},
  };
  for (const auto& c : cases) {
    INFO("text: " << c.text.substr(0, 40));
    REQUIRE_THROWS_WITH(parseHostfile(c.text, "hostfiles/x"), Catch::Contains(c.message));
  }
  // Names that look odd but are fine: IPv6 literals, user@host, UTF-8, '#'.
  CHECK(
      parseHostfile("[fe80::1] slots=1\nuser@w-1.example.org slots=2\nnœud slots=1\nw#0 slots=1\n",
                    "hostfiles/x")
          .size() == 4);
  CHECK(parseHostfile("w0 slots=65536\n", "hostfiles/x").at(0).slots == 65536);
}

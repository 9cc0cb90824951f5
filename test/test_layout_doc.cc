// docs/layout.md is the map of the tree: every path it names in backticks must exist (a glob must
// match something), and every folder that holds sources must be named there, so the map cannot
// drift from the territory. Placeholders (`test/fuzz_corpus/NAME/`) and paths outside the tree
// (`build/...`, `build-fuzz/`: outputs; absolute ones) are not paths of the tree.
#include <fnmatch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = DS_SOURCE_DIR;

std::string layoutText() {
  std::ifstream in(kRoot / "docs" / "layout.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A placeholder component, such as NAME or TAG, stands for any name.
bool hasPlaceholder(const std::string& path) {
  return std::regex_search(path, std::regex("(^|/)[A-Z_]{3,}(/|$)"));
}

bool existsInTree(const std::string& path) {
  const std::string trimmed = path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  if (trimmed.find('*') == std::string::npos) return fs::exists(kRoot / trimmed);
  const fs::path pattern(trimmed);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kRoot / pattern.parent_path(), ec))
    if (fnmatch(pattern.filename().c_str(), entry.path().filename().c_str(), 0) == 0) return true;
  return false;
}

bool isSource(const fs::path& file) {
  static const std::set<std::string> kExtensions = {".cc", ".h", ".cu", ".cuh", ".py", ".js"};
  return kExtensions.count(file.extension().string()) > 0;
}

// Build trees, git's folder and the test data hold no sources of the project.
bool outsideTheSources(const fs::path& relative) {
  const std::string first = relative.begin()->string();
  return first.starts_with("build") || first.starts_with(".") ||
         relative.string().starts_with("test/fuzz_corpus") ||
         relative.string().starts_with("test/neox");
}

}  // namespace

TEST_CASE("layout doc: every path docs/layout.md names exists") {
  const std::string text = layoutText();
  REQUIRE_FALSE(text.empty());
  const std::regex quoted("`([^`\\s]+)`");
  size_t checked = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), quoted), end; it != end; ++it) {
    const std::string path = (*it)[1];
    if (path.find('/') == std::string::npos || path.front() == '/' || path.front() == '~' ||
        path.starts_with("build") || path.starts_with("../") || hasPlaceholder(path))
      continue;
    INFO(path);
    CHECK(existsInTree(path));
    ++checked;
  }
  CHECK(checked > 50);  // the map names the tree's folders and files, not a handful
}

TEST_CASE("layout doc: every folder that holds sources is named in docs/layout.md") {
  const std::string text = layoutText();
  std::set<std::string> folders;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path relative = fs::relative(it->path(), kRoot);
    if (it->is_directory() && outsideTheSources(relative)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && isSource(it->path()) && relative.has_parent_path())
      folders.insert(relative.parent_path().generic_string());
  }
  CHECK(folders.size() > 30);
  for (const std::string& folder : folders) {
    INFO(folder);
    CHECK(text.find("`" + folder + "/") != std::string::npos);
  }
}

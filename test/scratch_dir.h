// The one way tests get a place to write: makeScratchDir returns a fresh directory under the
// system temp directory that is removed when the test process exits, also after failed
// assertions (Catch2 carries on to a normal exit) and exceptions.
#pragma once

#include <string>

namespace ds::test {

// A new, empty directory "ds-test-<name>-<pid>-<n>"; removed with everything in it at exit.
std::string makeScratchDir(const std::string& name);

}  // namespace ds::test

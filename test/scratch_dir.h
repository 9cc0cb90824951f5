// The one way tests get a place to write: makeScratchDir returns a fresh directory under the
// system temp directory that is removed when the test process exits, also after failed
// assertions (Catch2 carries on to a normal exit) and exceptions.
#pragma once

#include <string>

namespace ds::test {

// A new, empty directory "ds-test-<name>-<pid>-<n>"; removed with everything in it at exit.
std::string makeScratchDir(const std::string& name);

// The same, in a place whose files open with O_DIRECT, for the libaio engine: the system temp
// directory when it takes O_DIRECT, else the build tree (a tmpfs /tmp refuses it; the build tree
// is on a real disk). Empty when neither does, and `whyNot` says so naming both: the caller
// skips (test/skip.h), never falls back to the pread/pwrite engine and passes.
std::string makeDirectIoScratchDir(const std::string& name, std::string& whyNot);

}  // namespace ds::test

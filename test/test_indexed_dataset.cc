// The mmap indexed dataset: written and read back for both token types, the index byte layout
// NeoX's reader expects, and damaged files refused with the file named.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/indexed_dataset.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;

namespace {

void writeDataset(const std::string& prefix, TokenType type) {
  IndexedDatasetWriter writer(prefix, type);
  writer.addSequence({1, 2, 3});
  writer.addSequence({});
  writer.endDocument();  // one document of two sequences
  writer.addSequence({65535, 0, 7, 9});
  writer.endDocument();
  writer.finish();
}

// Replaces `count` bytes of a file at `offset`.
void patch(const std::string& path, size_t offset, const std::string& bytes) {
  std::string text = ds::readWholeFile(path, "file");
  text.replace(offset, bytes.size(), bytes);
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("indexed dataset: written and read back, uint16 and int32") {
  const std::string dir = ds::test::makeScratchDir("indexed");
  for (TokenType type : {TokenType::UInt16, TokenType::Int32}) {
    const std::string prefix = dir + "/sub/data" + std::to_string(static_cast<int>(type));
    writeDataset(prefix, type);
    const IndexedDataset data(prefix);
    CHECK(data.type() == type);
    CHECK(data.sequences() == 3);
    CHECK(data.documents() == 2);
    CHECK(data.documentIndex() == std::vector<int64_t>{0, 2, 3});
    CHECK(data.read(0) == std::vector<int32_t>{1, 2, 3});
    CHECK(data.read(1).empty());
    CHECK(data.read(2) == std::vector<int32_t>{65535, 0, 7, 9});
    CHECK(data.read(2, 1, 2) == std::vector<int32_t>{0, 7});
    CHECK_THROWS_WITH(data.read(2, 3, 2), Catch::Contains("tokens 3..5 of sequence 2 (4 tokens)"));
  }
  IndexedDatasetWriter narrow(dir + "/narrow", TokenType::UInt16);
  CHECK_THROWS_WITH(narrow.addSequence({65536}), Catch::Contains("does not fit uint16"));
}

TEST_CASE("indexed dataset: the index layout is NeoX's MMIDIDX version 1") {
  const std::string dir = ds::test::makeScratchDir("indexed-layout");
  writeDataset(dir + "/d", TokenType::UInt16);
  const std::string idx = ds::readWholeFile(dir + "/d.idx", "index");
  std::string expected("MMIDIDX\0\0", 9);
  auto u64 = [&](uint64_t v) { expected.append(reinterpret_cast<const char*>(&v), 8); };
  auto i32 = [&](int32_t v) { expected.append(reinterpret_cast<const char*>(&v), 4); };
  u64(1);
  expected += static_cast<char>(8);  // uint16
  u64(3);                            // sequences
  u64(3);                            // document index entries, the leading 0 included
  for (int32_t size : {3, 0, 4}) i32(size);
  for (uint64_t pointer : {0, 6, 6}) u64(pointer);  // bytes into .bin
  for (uint64_t entry : {0, 2, 3}) u64(entry);
  CHECK(idx == expected);
  CHECK(ds::readWholeFile(dir + "/d.bin", "data").size() == 14);
}

TEST_CASE("indexed dataset: damaged files are refused, naming the file") {
  const std::string dir = ds::test::makeScratchDir("indexed-bad");
  struct Case {
    const char* name;
    size_t offset;
    std::string bytes;
    const char* message;
  };
  const Case cases[] = {
      {"magic", 0, "XXIDIDX", "not an mmap indexed dataset index"},
      {"version", 9, std::string("\x02", 1), "index version 2"},
      {"dtype", 17, std::string("\x03", 1), "token dtype code 3"},
      {"count", 18, std::string("\x09", 1), "do not match its"},
      {"pointer past the data", 9 + 8 + 1 + 16 + 12 + 16, std::string("\x40", 1),
       "sequence 2 lies outside"},
      {"document index order", 9 + 8 + 1 + 16 + 12 + 24 + 8, std::string("\x05", 1),
       "document index entry 1 is out of order"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string prefix = dir + "/" + c.name;
    writeDataset(prefix, TokenType::UInt16);
    patch(prefix + ".idx", c.offset, c.bytes);
    CHECK_THROWS_WITH(IndexedDataset(prefix),
                      Catch::Contains(prefix) && Catch::Contains(c.message));
  }
  writeDataset(dir + "/short", TokenType::UInt16);
  std::string idx = ds::readWholeFile(dir + "/short.idx", "index");
  std::ofstream(dir + "/short.idx", std::ios::binary) << idx.substr(0, 20);
  CHECK_THROWS_WITH(IndexedDataset(dir + "/short"), Catch::Contains("truncated index"));
  CHECK_THROWS_WITH(IndexedDataset(dir + "/missing"), Catch::Contains("missing.idx"));
}

TEST_CASE("byte tokenizer: UTF-8 bytes in, the same text out, EOD 256") {
  const ByteTokenizer tokenizer;
  const std::string text = "née 東京";
  const auto ids = tokenizer.encode(text);
  CHECK(ids.size() == text.size());
  CHECK(ids[1] == 0xc3);
  auto withEod = ids;
  withEod.push_back(ByteTokenizer::kEndOfDocument);
  CHECK(tokenizer.decode(withEod) == text);
}

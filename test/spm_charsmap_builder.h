// SentencePiece normalization rules built by hand, for tests of damaged ones: a
// precompiled_charsmap in sentencepiece's format (a little-endian uint32 trie size in bytes, a
// darts-clone double array, the NUL-ended replacements), and a committed model given it.
// Written from darts-clone's unit layout, independently of runtime/data/spm_charsmap.cc.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ds::test {

struct SpmCharsmap {
  std::vector<uint32_t> units;  // the double array; units[0] is the root
  std::string replacements;     // each rule's replacement, NUL-ended, one after another

  std::string bytes(uint32_t trieBytes) const {
    std::string out;
    const auto put = [&out](uint32_t v) {
      for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (8 * i) & 0xFF);
    };
    put(trieBytes);
    for (const uint32_t unit : units) put(unit);
    return out + replacements;
  }
  std::string bytes() const { return bytes(static_cast<uint32_t>(4 * units.size())); }
};

// darts-clone's unit: label in bits 0-7, has-leaf in bit 8, offset from bit 10 (below 2^21 here:
// past that it reaches the top bit); a leaf (value) unit has the top bit set, so that it never
// matches a byte.
inline uint32_t spmNodeUnit(uint8_t label, bool hasLeaf, uint32_t offset) {
  return offset << 10 | (hasLeaf ? 1u << 8 : 0u) | label;
}
inline uint32_t spmValueUnit(uint32_t value) { return 1u << 31 | value; }

// The rules from -> to as a trie in which every node has a block of 256 units of its own for its
// children (its leaf's value in the block's first unit): simple, and a valid double array.
inline SpmCharsmap buildSpmCharsmap(const std::vector<std::pair<std::string, std::string>>& rules) {
  struct Node {
    std::map<uint8_t, std::unique_ptr<Node>> children;
    int64_t value = -1;
    uint32_t block = 0;
  };
  Node root;
  SpmCharsmap c;
  for (const auto& [from, to] : rules) {
    Node* node = &root;
    for (const char byte : from) {
      auto& child = node->children[static_cast<uint8_t>(byte)];
      if (!child) child = std::make_unique<Node>();
      node = child.get();
    }
    node->value = static_cast<int64_t>(c.replacements.size());
    c.replacements += to + '\0';
  }
  // Unused units get a label no probe of their block asks for (darts-clone does the same).
  const auto newBlock = [&c] {
    const auto base = static_cast<uint32_t>(c.units.size());
    for (uint32_t i = 0; i < 256; ++i)
      c.units.push_back(spmNodeUnit(static_cast<uint8_t>(i ^ 1), false, 0));
    return base;
  };
  newBlock();                                                      // the root's
  std::vector<std::pair<Node*, uint32_t>> pending = {{&root, 0}};  // node, its unit
  while (!pending.empty()) {
    const auto [node, at] = pending.back();
    pending.pop_back();
    node->block = newBlock();
    const uint8_t label = at == 0 ? 0 : static_cast<uint8_t>(at & 0xFF);
    c.units[at] = spmNodeUnit(label, node->value >= 0, at ^ node->block);
    if (node->value >= 0) c.units[node->block] = spmValueUnit(static_cast<uint32_t>(node->value));
    for (const auto& [byte, child] : node->children)
      pending.push_back({child.get(), node->block ^ byte});
  }
  return c;
}

// `model` (a serialized ModelProto) with `charsmap` as the precompiled_charsmap of field
// `specField` (3: normalizer_spec, 5: denormalizer_spec): a second spec appended, which protobuf
// merges into the first, a later bytes field replacing an earlier one.
inline std::string withSpmCharsmap(const std::string& model, const std::string& charsmap,
                                   int specField = 3) {
  const auto varint = [](uint64_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out += static_cast<char>(v & 0x7F | 0x80);
    return out + static_cast<char>(v);
  };
  const std::string spec = "\x12" + varint(charsmap.size()) + charsmap;  // field 2, bytes
  return model + static_cast<char>(specField << 3 | 2) + varint(spec.size()) + spec;
}

// The rules the valid charsmap of the tests holds: "Qu" is longer than "Q", so it wins.
inline const std::vector<std::pair<std::string, std::string>> kSpmTestRules = {
    {"Q", "q"}, {"Qu", "KW"}, {"\xC3\xA9", "e"}};

struct DamagedSpmModel {
  const char* name;
  std::string model;  // the committed model with damaged rules
  std::string why;    // what the refusal says after "FIELD: "
  std::string field = "normalizer_spec.precompiled_charsmap";
};

// `model` with each kind of damage libsentencepiece would read outside of (and crash on).
inline std::vector<DamagedSpmModel> damagedSpmModels(const std::string& model) {
  const SpmCharsmap valid = buildSpmCharsmap(kSpmTestRules);
  const auto units = static_cast<uint32_t>(valid.units.size());
  const auto damaged = [&](auto change) {
    SpmCharsmap c = valid;
    change(c);
    return withSpmCharsmap(model, c.bytes());
  };
  // A rule matched at every byte of "aaa...", its node its own child.
  SpmCharsmap loop;
  for (uint32_t i = 0; i < 512; ++i) loop.units.push_back(spmNodeUnit((i & 0xFF) ^ 1, false, 0));
  loop.units[0] = spmNodeUnit(0, false, 256);
  loop.units[256 ^ 'a'] = spmNodeUnit('a', true, (256 ^ 'a') ^ 256);
  loop.units[256] = spmValueUnit(0);
  loop.replacements = std::string("b") + '\0';
  std::vector<std::pair<std::string, std::string>> chain;
  for (int n = 1; n <= 40; ++n) chain.emplace_back(std::string(static_cast<size_t>(n), 'a'), "b");
  const uint32_t qUnit = 256 ^ 'Q';
  return {
      {"3 bytes", withSpmCharsmap(model, valid.bytes().substr(0, 3)),
       "3 bytes, too few for its 4-byte trie size"},
      {"truncated", withSpmCharsmap(model, valid.bytes().substr(0, 100)),
       "its trie size says " + std::to_string(4 * units) + " bytes, but 96 follow it"},
      {"size prefix past the blob", withSpmCharsmap(model, valid.bytes(0xFFFFFFF0)),
       "its trie size says 4294967280 bytes"},
      {"empty trie", withSpmCharsmap(model, valid.bytes(0)), "its trie size, 0 bytes, is not"},
      {"trie size not whole units", withSpmCharsmap(model, valid.bytes(4 * units - 2)),
       "its trie size, " + std::to_string(4 * units - 2) +
           " bytes, is not a positive whole number of 4-byte units"},
      {"root offset out of bounds",
       damaged([](SpmCharsmap& c) { c.units[0] = spmNodeUnit(0, false, 1u << 20); }),
       "trie unit 0 points at units 1048576..1048831, past the trie's " + std::to_string(units) +
           " units"},
      {"node offset out of bounds", damaged([&](SpmCharsmap& c) {
         c.units[qUnit] = spmNodeUnit('Q', true, qUnit ^ (1u << 20));
       }),
       "trie unit " + std::to_string(qUnit) + " points at units 1048576..1048831"},
      {"value past the replacements", damaged([](SpmCharsmap& c) {
         for (uint32_t& unit : c.units)
           if (unit >> 31) unit = spmValueUnit(100000);
       }),
       "trie unit " + std::to_string(qUnit) +
           " yields the replacement at byte 100000, past the 7 bytes of replacements"},
      {"replacements without a NUL", damaged([](SpmCharsmap& c) { c.replacements.pop_back(); }),
       "the replacement strings after the trie do not end with a NUL byte"},
      {"a loop", withSpmCharsmap(model, loop.bytes()),
       "the trie loops back to unit " + std::to_string(256 ^ 'a')},
      {"more than 32 rules in one lookup", withSpmCharsmap(model, buildSpmCharsmap(chain).bytes()),
       "one lookup can match more than 32 rules"},
      {"denormalizer", withSpmCharsmap(model, valid.bytes(0xFFFFFFF0), 5),
       "its trie size says 4294967280 bytes", "denormalizer_spec.precompiled_charsmap"},
  };
}

}  // namespace ds::test

// checkSpmCharsmaps: a protobuf walk to the two charsmaps, then every path of each trie followed
// once, with the bounds libsentencepiece's lookup (darts-clone's commonPrefixSearch) assumes.
#include "runtime/data/spm_charsmap.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ds::runtime {

namespace {

// ModelProto's normalizer_spec and denormalizer_spec (both NormalizerSpec), and its
// precompiled_charsmap (sentencepiece_model.proto).
constexpr uint64_t kNormalizerSpec = 3, kDenormalizerSpec = 5, kPrecompiledCharsmap = 2;
enum WireType {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};
constexpr int kMaxGroupDepth = 100;  // protobuf's recursion limit

// Just enough of protobuf's wire format to reach a nested bytes field. Each read returns false
// where protobuf's own parser fails too.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : rest_(bytes) {}

  bool atEnd() const { return rest_.empty(); }

  bool tag(uint64_t& field, int& wireType) {
    uint64_t key = 0;
    if (!varint(key) || key >> 3 == 0) return false;
    field = key >> 3;
    wireType = static_cast<int>(key & 7);
    return true;
  }

  bool lengthDelimited(std::string_view& value) {
    uint64_t size = 0;
    if (!varint(size) || size > rest_.size()) return false;
    value = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return true;
  }

  bool skip(int wireType, uint64_t field, int depth = 0) {
    uint64_t ignored = 0;
    std::string_view bytes;
    switch (wireType) {
      case kVarint:
        return varint(ignored);
      case kFixed64:
        return take(8);
      case kFixed32:
        return take(4);
      case kLengthDelimited:
        return lengthDelimited(bytes);
      case kStartGroup:
        return depth < kMaxGroupDepth && skipGroup(field, depth + 1);
      default:
        return false;  // an end-group without its start, or wire types 6 and 7
    }
  }

 private:
  bool varint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64 && !rest_.empty(); shift += 7) {
      const auto byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool take(size_t n) {
    if (rest_.size() < n) return false;
    rest_.remove_prefix(n);
    return true;
  }

  bool skipGroup(uint64_t field, int depth) {
    uint64_t inner = 0;
    int wireType = 0;
    while (tag(inner, wireType)) {
      if (wireType == kEndGroup) return inner == field;
      if (!skip(wireType, inner, depth)) return false;
    }
    return false;
  }

  std::string_view rest_;
};

// Where a message field occurs more than once, protobuf merges the occurrences, and a later bytes
// field replaces an earlier one: so the charsmap in effect is the last one seen.
bool lastCharsmapIn(std::string_view spec, std::optional<std::string_view>& charsmap) {
  WireReader r(spec);
  while (!r.atEnd()) {
    uint64_t field = 0;
    int wireType = 0;
    if (!r.tag(field, wireType)) return false;
    if (field == kPrecompiledCharsmap && wireType == kLengthDelimited) {
      std::string_view value;
      if (!r.lengthDelimited(value)) return false;
      charsmap = value;
    } else if (!r.skip(wireType, field)) {
      return false;
    }
  }
  return true;
}

struct Charsmaps {
  std::optional<std::string_view> normalizer, denormalizer;
};

bool findCharsmaps(std::string_view model, Charsmaps& found) {
  WireReader r(model);
  while (!r.atEnd()) {
    uint64_t field = 0;
    int wireType = 0;
    if (!r.tag(field, wireType)) return false;
    const bool spec = field == kNormalizerSpec || field == kDenormalizerSpec;
    if (spec && wireType == kLengthDelimited) {
      std::string_view value;
      if (!r.lengthDelimited(value) ||
          !lastCharsmapIn(value, field == kNormalizerSpec ? found.normalizer : found.denormalizer))
        return false;
    } else if (!r.skip(wireType, field)) {
      return false;
    }
  }
  return true;
}

// darts-clone's DoubleArrayUnit, bit for bit.
struct Unit {
  uint32_t bits;
  bool hasLeaf() const { return (bits >> 8 & 1) == 1; }
  uint32_t value() const { return bits & ((1u << 31) - 1); }
  // A leaf unit's label has the top bit set, so it never equals a byte.
  uint32_t label() const { return bits & ((1u << 31) | 0xFF); }
  uint64_t offset() const { return uint64_t{bits >> 10} << ((bits & (1u << 9)) >> 6); }
};

// Every node a lookup can reach from the root, each visited once (the trie is a DAWG: nodes are
// shared between paths), depth first without recursion (a damaged trie can be one long chain).
class TrieCheck {
 public:
  TrieCheck(std::vector<Unit> units, size_t replacementBytes)
      : units_(std::move(units)),
        replacementBytes_(replacementBytes),
        state_(units_.size(), kNew),
        rules_(units_.size(), 0) {}

  std::optional<std::string> run() {
    if (auto problem = open(0)) return problem;
    while (!stack_.empty()) {
      Frame& f = stack_.back();
      if (f.label > 0xFF) {
        close();
        continue;
      }
      const uint32_t label = f.label++;
      const size_t child = f.children ^ label;
      if (units_[child].label() != label) continue;  // no edge for this byte
      if (state_[child] == kOpen)
        return "the trie loops back to unit " + std::to_string(child) +
               ", so one lookup could match rules without end";
      if (state_[child] == kDone)
        f.most = std::max(f.most, rules_[child]);
      else if (auto problem = open(child))
        return problem;
    }
    // The root's own leaf is never reported: a lookup matches one byte or more.
    if (rules_[0] - (units_[0].hasLeaf() ? 1 : 0) > kSpmMaxRulesPerLookup)
      return "one lookup can match more than " + std::to_string(kSpmMaxRulesPerLookup) +
             " rules (libsentencepiece keeps " + std::to_string(kSpmMaxRulesPerLookup) + ")";
    return std::nullopt;
  }

 private:
  enum State : uint8_t { kNew, kOpen, kDone };
  struct Frame {
    size_t node, children;  // children: the unit the node's child for byte b is at, xor b
    uint32_t label;         // the next byte to try
    uint8_t most;           // the most rules on a path below the node, so far
  };

  // A lookup at `node` reads the 256 units of its children's block and, with a leaf, the value
  // at the block's first unit, which is where the node's replacement starts.
  std::optional<std::string> open(size_t node) {
    const size_t children = node ^ units_[node].offset();
    if ((children | 0xFF) >= units_.size())
      return "trie unit " + std::to_string(node) + " points at units " +
             std::to_string(children & ~size_t{0xFF}) + ".." + std::to_string(children | 0xFF) +
             ", past the trie's " + std::to_string(units_.size()) + " units";
    if (units_[node].hasLeaf() && units_[children].value() >= replacementBytes_)
      return "trie unit " + std::to_string(node) + " yields the replacement at byte " +
             std::to_string(units_[children].value()) + ", past the " +
             std::to_string(replacementBytes_) + " bytes of replacements";
    state_[node] = kOpen;
    stack_.push_back({node, children, 0, 0});
    return std::nullopt;
  }

  // Rules past the limit are counted as one more than it, which is enough to refuse.
  void close() {
    const Frame f = stack_.back();
    stack_.pop_back();
    const int rules = f.most + (units_[f.node].hasLeaf() ? 1 : 0);
    rules_[f.node] = static_cast<uint8_t>(std::min(rules, kSpmMaxRulesPerLookup + 1));
    state_[f.node] = kDone;
    if (!stack_.empty()) stack_.back().most = std::max(stack_.back().most, rules_[f.node]);
  }

  std::vector<Unit> units_;
  size_t replacementBytes_;
  std::vector<uint8_t> state_, rules_;
  std::vector<Frame> stack_;
};

uint32_t littleEndian32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

std::optional<std::string> checkCharsmap(std::string_view blob) {
  if (blob.empty()) return std::nullopt;  // no rules: the text is taken as it is
  if (blob.size() < 4)
    return std::to_string(blob.size()) + " bytes, too few for its 4-byte trie size";
  const uint64_t trieBytes = littleEndian32(blob.data());
  if (trieBytes > blob.size() - 4)
    return "its trie size says " + std::to_string(trieBytes) + " bytes, but " +
           std::to_string(blob.size() - 4) + " follow it";
  if (trieBytes == 0 || trieBytes % 4 != 0)
    return "its trie size, " + std::to_string(trieBytes) +
           " bytes, is not a positive whole number of 4-byte units";
  const std::string_view replacements = blob.substr(4 + trieBytes);
  // Each replacement is read up to its NUL; the last one must have its own.
  if (replacements.empty() || replacements.back() != '\0')
    return "the replacement strings after the trie do not end with a NUL byte";
  std::vector<Unit> units(trieBytes / 4);
  for (size_t i = 0; i < units.size(); ++i) units[i].bits = littleEndian32(blob.data() + 4 + 4 * i);
  return TrieCheck(std::move(units), replacements.size()).run();
}

}  // namespace

std::optional<std::string> checkSpmCharsmaps(std::string_view model) {
  Charsmaps found;
  if (!findCharsmaps(model, found)) return std::nullopt;
  for (const auto& [field, charsmap] :
       {std::pair{"normalizer_spec.precompiled_charsmap", found.normalizer},
        std::pair{"denormalizer_spec.precompiled_charsmap", found.denormalizer}}) {
    if (!charsmap) continue;
    if (auto problem = checkCharsmap(*charsmap)) return std::string(field) + ": " + *problem;
  }
  return std::nullopt;
}

}  // namespace ds::runtime

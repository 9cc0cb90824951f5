// readHfTokenizerFile: each top-level field of tokenizer.json checked against the list of what
// HfTokenizer implements; the BPE model's tokens and merges go through bpe_vocabulary's checks.
#include "runtime/data/hf_tokenizer_file.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "common/files.h"
#include "common/json_text.h"

namespace ds::runtime {

namespace {

using Json = nlohmann::json;

constexpr const char* kEndOfText = "<|endoftext|>";
constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void refuse(const std::string& field, const std::string& why) const {
    throw Error(path_ + ": " + field + ": " + why);
  }

  // The object at `field`, every key of which must be in `known` (an unknown key may change
  // what the tokenizer does).
  const Json& object(const Json& value, const std::string& field,
                     const std::set<std::string>& known) const {
    if (!value.is_object()) refuse(field, "expected an object, got " + value.dump());
    for (const auto& item : value.items())
      if (!known.contains(item.key()))
        refuse(field + "." + item.key(),
               "is not a field HFTokenizer knows; it may change the ids, so the file is refused");
    return value;
  }

  std::string type(const Json& value, const std::string& field) const {
    const auto it = value.find("type");
    if (it == value.end() || !it->is_string()) refuse(field + ".type", "missing or not a string");
    return it->get<std::string>();
  }

  bool flag(const Json& value, const std::string& key, const std::string& field,
            bool absent) const {
    const auto it = value.find(key);
    if (it == value.end() || it->is_null()) return absent;
    if (!it->is_boolean()) refuse(field + "." + key, "expected true or false, got " + it->dump());
    return it->get<bool>();
  }

  // A field that must be null (or absent) for the ids to be what HFTokenizer computes.
  void requireNull(const Json& value, const std::string& key, const std::string& field,
                   const std::string& why) const {
    const auto it = value.find(key);
    if (it != value.end() && !it->is_null())
      refuse(field + key, "is " + it->dump() + "; " + why + " (HFTokenizer takes null only)");
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::set<std::string> kTopKeys = {"version",        "truncation", "padding", "added_tokens",
                                        "normalizer",     "pre_tokenizer", "post_processor",
                                        "decoder",        "model"};
const std::set<std::string> kByteLevelKeys = {"type", "add_prefix_space", "trim_offsets",
                                              "use_regex"};
const std::set<std::string> kModelKeys = {
    "type",         "dropout",       "unk_token",   "continuing_subword_prefix",
    "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges",
    "vocab",        "merges"};
const std::set<std::string> kAddedKeys = {"id",     "content",    "single_word", "lstrip",
                                          "rstrip", "normalized", "special"};

void readNormalizer(const Reader& r, const Json& doc, HfTokenizerFile& f) {
  const auto it = doc.find("normalizer");
  if (it == doc.end() || it->is_null()) return;
  const std::string type = r.type(*it, "normalizer");
  if (type != "NFC")
    r.refuse("normalizer.type", type + " is not implemented (HFTokenizer takes NFC or null)");
  r.object(*it, "normalizer", {"type"});
  f.nfc = true;
}

void readPreTokenizer(const Reader& r, const Json& doc, HfTokenizerFile& f) {
  const auto it = doc.find("pre_tokenizer");
  if (it == doc.end() || it->is_null())
    r.refuse("pre_tokenizer", "is null; HFTokenizer takes the ByteLevel pre-tokenizer only");
  const std::string type = r.type(*it, "pre_tokenizer");
  if (type != "ByteLevel")
    r.refuse("pre_tokenizer.type",
             type + " is not implemented (HFTokenizer takes ByteLevel, as pythia and NeoX-20B)");
  r.object(*it, "pre_tokenizer", kByteLevelKeys);
  f.addPrefixSpace = r.flag(*it, "add_prefix_space", "pre_tokenizer", true);
  f.useRegex = r.flag(*it, "use_regex", "pre_tokenizer", true);
}

// Only offsets and the decoded text depend on these two; ids do not, except for a post-processor
// that adds tokens, which is refused.
void readPostProcessorAndDecoder(const Reader& r, const Json& doc) {
  const auto post = doc.find("post_processor");
  if (post != doc.end() && !post->is_null()) {
    const std::string type = r.type(*post, "post_processor");
    if (type != "ByteLevel")
      r.refuse("post_processor.type",
               type + " is not implemented: it adds ids to every encoding (HFTokenizer takes "
                      "ByteLevel or null)");
    r.object(*post, "post_processor", kByteLevelKeys);
  }
  const auto decoder = doc.find("decoder");
  if (decoder == doc.end() || decoder->is_null())
    r.refuse("decoder", "is null; HFTokenizer takes the ByteLevel decoder only");
  const std::string type = r.type(*decoder, "decoder");
  if (type != "ByteLevel")
    r.refuse("decoder.type", type + " is not implemented (HFTokenizer takes ByteLevel)");
  r.object(*decoder, "decoder", kByteLevelKeys);
}

int32_t readId(const Reader& r, const Json& value, const std::string& field) {
  if (!value.is_number_integer()) r.refuse(field, "the id must be an integer, got " + value.dump());
  const int64_t id = value.get<int64_t>();
  if (id < 0 || id > kMaxId)
    r.refuse(field, "id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxId));
  return static_cast<int32_t>(id);
}

// Tokens that take ids: model.vocab's and added_tokens' (bpeIdLimit bounds the ids by them).
size_t definedTokens(const Json& doc) {
  size_t n = 0;
  const auto model = doc.find("model");
  if (model != doc.end() && model->is_object()) {
    const auto vocab = model->find("vocab");
    if (vocab != model->end() && vocab->is_object()) n += vocab->size();
  }
  const auto added = doc.find("added_tokens");
  if (added != doc.end() && added->is_array()) n += added->size();
  return n;
}

void readModel(const Reader& r, const Json& doc, HfTokenizerFile& f) {
  const auto it = doc.find("model");
  if (it == doc.end()) r.refuse("model", "missing");
  const Json& model = *it;
  if (!model.is_object()) r.refuse("model", "expected an object");
  const std::string type = r.type(model, "model");
  if (type != "BPE")
    r.refuse("model.type", type + " is not implemented (HFTokenizer takes byte-level BPE; "
                                  "SentencePiece models are SPMTokenizer's)");
  r.object(model, "model", kModelKeys);
  r.requireNull(model, "dropout", "model.", "dropout makes encoding random");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto v = model.find(key);
    if (v != model.end() && !v->is_null() && *v != "")
      r.refuse(std::string("model.") + key,
               "is " + v->dump() + "; byte-level BPE has none (HFTokenizer takes null)");
  }
  if (r.flag(model, "ignore_merges", "model", false))
    r.refuse("model.ignore_merges", "true is not implemented (HFTokenizer takes false)");

  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object())
    r.refuse("model.vocab", "expected an object of token -> id");
  if (vocab->empty())
    r.refuse("model.vocab",
             "is empty, so every byte of the text would be dropped; a byte-level "
             "BPE model has a token for each of the 256 bytes");
  std::vector<BpeTokenSpelling> tokens;
  tokens.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items())
    tokens.emplace_back(token, readId(r, id, "model.vocab: token " + Json(token).dump()));

  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array())
    r.refuse("model.merges", "expected an array of \"a b\" strings or [a, b] pairs");
  std::vector<BpeMergeSpelling> spellings;
  spellings.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const Json& m = (*merges)[i];
    const std::string position = "model.merges[" + std::to_string(i) + "]";
    const std::string where = r.path() + ": " + position;
    if (m.is_string()) {
      spellings.push_back(splitMergeLine(m.get<std::string>(), where, "at " + position));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spellings.push_back(
          {m[0].get<std::string>(), m[1].get<std::string>(), where, "at " + position});
    } else {
      r.refuse(position, "expected \"a b\" or [\"a\", \"b\"], got " + m.dump());
    }
  }
  f.model =
      buildBpeVocabulary(tokens, r.path() + ": model.vocab", spellings,
                         "model.vocab and model.merges must belong together", definedTokens(doc));

  // unk_token and byte_fallback apply to a byte without a token; where every byte has one they
  // never do. Otherwise HF would put the unknown token (or <0xNN>) where this drops the byte.
  const bool allBytes = std::all_of(f.model.byteIds.begin(), f.model.byteIds.end(),
                                    [](int32_t id) { return id >= 0; });
  if (!allBytes) {
    r.requireNull(model, "unk_token", "model.",
                  "it would stand for the bytes model.vocab has no token for");
    if (r.flag(model, "byte_fallback", "model", false))
      r.refuse("model.byte_fallback", "true is not implemented where a byte has no token");
  }
}

std::string jsonQuote(const std::string& text) { return Json(text).dump(); }

// Each added token's id holds one content and each content one id: else encode would take one
// entry and decode, or the end of document, another. A repeat of the same pair is left out, as
// HF keeps the first.
class AddedTokenTable {
 public:
  AddedTokenTable(const Reader& r, int64_t idLimit, std::vector<HfAddedToken>& tokens)
      : r_(r), idLimit_(idLimit), tokens_(tokens) {}

  void add(size_t index, HfAddedToken token) {
    const std::string field = "added_tokens[" + std::to_string(index) + "]";
    if (token.id >= idLimit_)
      r_.refuse(field + ".id", "token " + jsonQuote(token.content) + ": id " +
                                   std::to_string(token.id) + " is far beyond the tokens the " +
                                   "file defines (ids are dense in real files, so they are " +
                                   "taken below " + std::to_string(idLimit_) + "); correct the id");
    const auto sameId = byId_.find(token.id);
    const auto sameContent = byContent_.find(token.content);
    if (sameId != byId_.end() && sameContent != byContent_.end() &&
        sameId->second == sameContent->second)
      return;
    if (sameId != byId_.end())
      r_.refuse(field + ".id", "id " + std::to_string(token.id) + " is also the id of " +
                                   describe(sameId->second) +
                                   "; each added token needs its own id");
    if (sameContent != byContent_.end())
      r_.refuse(field + ".content",
                jsonQuote(token.content) + " has id " + std::to_string(token.id) + " here and " +
                    std::to_string(tokens_[sameContent->second].id) + " at " +
                    describe(sameContent->second) + "; an added token has one id");
    byId_.emplace(token.id, tokens_.size());
    byContent_.emplace(token.content, tokens_.size());
    indexInFile_.push_back(index);
    tokens_.push_back(std::move(token));
  }

 private:
  std::string describe(size_t slot) const {
    return "added_tokens[" + std::to_string(indexInFile_[slot]) + "] " +
           jsonQuote(tokens_[slot].content);
  }

  const Reader& r_;
  int64_t idLimit_;
  std::vector<HfAddedToken>& tokens_;
  std::vector<size_t> indexInFile_;  // of each entry of tokens_
  std::unordered_map<int32_t, size_t> byId_;
  std::unordered_map<std::string, size_t> byContent_;
};

void readAddedTokens(const Reader& r, const Json& doc, HfTokenizerFile& f) {
  const auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_array()) r.refuse("added_tokens", "expected an array");
  AddedTokenTable table(r, bpeIdLimit(definedTokens(doc)), f.addedTokens);
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const Json& t = r.object((*it)[i], field, kAddedKeys);
    const auto content = t.find("content");
    if (content == t.end() || !content->is_string() || content->get<std::string>().empty())
      r.refuse(field + ".content", "expected a non-empty string");
    const auto id = t.find("id");
    if (id == t.end()) r.refuse(field + ".id", "missing");
    for (const char* key : {"single_word", "lstrip", "rstrip"})
      if (r.flag(t, key, field, false))
        r.refuse(field + "." + key, "true is not implemented (HFTokenizer takes false)");
    table.add(i, {readId(r, *id, field + ".id"), content->get<std::string>(),
                  r.flag(t, "special", field, false), r.flag(t, "normalized", field, true)});
  }
}

}  // namespace

HfTokenizerFile readHfTokenizerFile(const std::string& path) {
  const Reader r(path);
  const std::string text = readWholeFile(path, "Hugging Face tokenizer.json (vocab-file)");
  const Json doc = parseJsonText(text, path);
  r.object(doc, "the top level", kTopKeys);
  r.requireNull(doc, "truncation", "", "truncation cuts the ids");
  r.requireNull(doc, "padding", "", "padding adds ids");
  HfTokenizerFile f;
  readNormalizer(r, doc, f);
  readPreTokenizer(r, doc, f);
  readPostProcessorAndDecoder(r, doc);
  readModel(r, doc, f);
  readAddedTokens(r, doc, f);

  f.vocabularySize = static_cast<int32_t>(f.model.bytesOf.size());
  for (const HfAddedToken& t : f.addedTokens) f.vocabularySize = std::max(f.vocabularySize, t.id + 1);
  // As HF's token_to_id: the added tokens first, then the model's.
  for (const HfAddedToken& t : f.addedTokens)
    if (t.content == kEndOfText) f.endOfDocument = t.id;
  if (f.endOfDocument < 0) {
    const auto eod = f.model.idOf.find(kEndOfText);
    if (eod == f.model.idOf.end())
      throw Error(path + ": no \"<|endoftext|>\" token; HFTokenizer (as NeoX's) takes it as the "
                         "end of document, so the file needs it");
    f.endOfDocument = eod->second;
  }
  return f;
}

}  // namespace ds::runtime

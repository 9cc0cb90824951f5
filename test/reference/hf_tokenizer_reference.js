#!/usr/bin/env node
// Golden files for test/test_hf_tokenizer.cc, made with Hugging Face's own `tokenizers` library
// (its Node.js bindings), so the C++ HFTokenizer (runtime/data/hf_tokenizer.h) is checked against
// the reference without CI needing Node:
//   test/golden/hf_tokenizer.json      a small byte-level BPE tokenizer.json laid out like
//                                      pythia's / NeoX-20B's: NFC normalizer, ByteLevel
//                                      pre-tokenizer, post-processor and decoder, <|endoftext|> = 0
//                                      and <|padding|> = 1 (special, also in the model's vocab),
//                                      and non-special added tokens (a run of spaces matched after
//                                      normalization, a pair of tabs matched before it)
//   test/golden/hf_tokenizer_ids.json  encode ids and decoded text for each case below, for that
//                                      file and two variants the C++ test derives from it
// Regenerate (from the repository root; npm needs the registry):
//   mkdir -p /tmp/hf-node && (cd /tmp/hf-node && npm install tokenizers)
//   NODE_PATH=/tmp/hf-node/node_modules node test/reference/hf_tokenizer_reference.js
// Training is deterministic, so a rerun with the same library version rewrites the same files.
//
// Texts are stored as hex bytes. JavaScript strings cannot hold invalid UTF-8, so an invalid case
// reaches the library as Node's Buffer.toString('utf8') reads it: each maximal invalid subpart
// becomes U+FFFD (the WHATWG / Unicode rule; Python's errors="replace" reads it the same way).
// That is the reference the C++ tokenizer is held to for invalid bytes.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const {Tokenizer, BPE, AddedToken, nfcNormalizer, byteLevelPreTokenizer} = require('tokenizers');

const root = path.resolve(__dirname, '..', '..');
const tokenizerOut = path.join(root, 'test/golden/hf_tokenizer.json');
const idsOut = path.join(root, 'test/golden/hf_tokenizer_ids.json');

// What the BPE is learned from: several scripts, whitespace runs, code, emoji. Kept short so the
// committed tokenizer.json stays small; characters the tests use but this lacks have no token.
const corpus = [
  'The quick brown fox jumps over the lazy dog. It\'s 2024; we\'ll see what they\'ve done.',
  'She said: "I\'d rather not" -- and that\'s that!!! (really?) [yes] {no} <tag/> a+b=c',
  'Numbers: 1234567890, 3.14159, 1,000,000 and 42nd.',
  'Français: où est la bibliothèque? Été à Noël. Deutsch: Straße, über, Größe.',
  'Русский текст. Ελληνικά. 中文文本。日本語のテキスト。한국어',
  'Emoji: 🙂🙂 👍🏽 🇫🇷 👨‍👩‍👧',
  '    indented code();\n\tif (x) { return y; }\n\t\treturn z;',
  'the the the then there these those they their them',
].join('\n').repeat(3);

const toHex = (s) => Buffer.from(s, 'utf8').toString('hex');
const hex = (h) => h.replace(/\s+/g, '');

// name, text as hex (raw bytes, possibly invalid UTF-8)
const encodeCases = [
  ['empty', ''],
  ['english', toHex('The quick brown fox jumps over the lazy dog.')],
  ['contractions', toHex("It's I'm you're we've he'd they'll DON'T 'tis")],
  ['decomposed_accents_nfc', toHex('Cafe\u0301 re\u0301sume\u0301 No\u0308el A\u030A n\u0303')],
  ['precomposed_accents', toHex('Café résumé Noël Å ñ')],
  ['cjk', toHex('中文文本。日本語のテキスト。한국어 ﾃｷｽﾄ')],
  ['emoji', toHex('Emoji: 🙂🙂 👍🏽 🇫🇷 👨‍👩‍👧 🦀')],
  ['unseen_characters', toHex('Ωmega ∑ ऄ z@q')],
  ['whitespace', toHex('  lead, trail   \n\n\t x \r\n   \u00a0\u3000end  ')],
  ['added_spaces_token', toHex('a    b     c        d   e         f')],
  ['added_tabs_token', toHex('x\t\ty\t\t\tz\t')],
  ['special_tokens', toHex('<|endoftext|>start<|endoftext|> mid <|padding|>end<|endoftext|>')],
  ['special_token_partial', toHex('<|endoftext| <|endof<|endoftext|>text|>')],
  ['special_tokens_adjacent', toHex('<|endoftext|><|endoftext|><|padding|>')],
  ['code', toHex('    if (x) {\n\t\treturn y;\n    }\n')],
  ['invalid_lone_ff', hex('61 ff 62')],
  ['invalid_truncated_sequence', hex('41 e2 82 42 e2 82')],
  ['invalid_lone_continuation', hex('80 80 41 bf')],
  ['invalid_overlong', hex('c0 af 41 e0 80 af')],
  ['invalid_encoded_surrogate', hex('ed a0 80 41')],
  ['invalid_above_max', hex('f4 90 80 80 41 f8 88 80 80 80')],
  ['invalid_mixed_with_specials', hex('ff 3c 7c 65 6e 64 6f 66 74 65 78 74 7c 3e c3')],
];

// GPT-2's byte alphabet (bytes_to_unicode): the character a byte-level vocabulary writes for b.
function byteChar(b) {
  const printable = (x) => (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
  if (printable(b)) return String.fromCodePoint(b);
  let extra = 0;
  for (let x = 0; x < b; ++x) if (!printable(x)) ++extra;
  return String.fromCodePoint(0x100 + extra);
}

// Id lists decoded as NeoX decodes them (skip_special_tokens = true): special tokens, unknown ids,
// and the three bytes of U+65E5 split by a special token (left out: the bytes join up) or by an
// added token (written as it is: the bytes on each side are read apart).
function decodeCases(tok, spacesId) {
  const [e6, x97, a5] = [0xe6, 0x97, 0xa5].map((b) => tok.tokenToId(byteChar(b)));
  return [
    ['specials_skipped', [0, 1, 0]],
    ['unknown_ids_dropped', [999999]],
    ['partial_utf8_across_special', [e6, 0, x97, a5]],
    ['partial_utf8_across_added', [e6, spacesId, x97, a5]],
    ['partial_utf8_at_end', [e6, x97]],
  ];
}

async function main() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-ref-'));
  const corpusFile = path.join(work, 'corpus.txt');
  fs.writeFileSync(corpusFile, corpus);

  // 1. Learn the byte-level BPE.
  const trained = new Tokenizer(BPE.empty());
  trained.setNormalizer(nfcNormalizer());
  trained.setPreTokenizer(byteLevelPreTokenizer(false, true));
  trained.train([corpusFile]);
  const trainedFile = path.join(work, 'trained.json');
  trained.save(trainedFile, false);
  const model = JSON.parse(fs.readFileSync(trainedFile, 'utf8')).model;

  // 2. Lay it out as pythia's file is: the two special tokens first in the model's vocabulary.
  const vocab = {'<|endoftext|>': 0, '<|padding|>': 1};
  for (const [token, id] of Object.entries(model.vocab)) vocab[token] = id + 2;
  model.vocab = vocab;
  const nextId = Object.keys(vocab).length;
  const added = (id, content, special, normalized) =>
    ({id, content, single_word: false, lstrip: false, rstrip: false, normalized, special});
  const config = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      added(0, '<|endoftext|>', true, false),
      added(1, '<|padding|>', true, false),
      added(nextId, '    ', false, true),
      added(nextId + 1, '\t\t', false, false),
    ],
    normalizer: {type: 'NFC'},
    pre_tokenizer: {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true},
    post_processor: {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true},
    decoder: {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true},
    model,
  };
  // Through the library and back out, so the committed file is the library's own spelling.
  Tokenizer.fromString(JSON.stringify(config)).save(tokenizerOut, true);
  const text = fs.readFileSync(tokenizerOut, 'utf8');
  const main = JSON.parse(text);

  // Variants the C++ test derives the same way: merges as "a b" strings (pythia's spelling), and
  // a ByteLevel pre-tokenizer with add_prefix_space. Merge order as HF's BPE applies it (lowest
  // rank first, one merge at a time) on a hand-made file where a later-made pair ranks first.
  const variants = {
    main,
    string_merges: {...main, model: {...main.model,
      merges: main.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m))}},
    prefix_space: {...main, pre_tokenizer: {...main.pre_tokenizer, add_prefix_space: true}},
    merge_order: {...main, added_tokens: [main.added_tokens[0]], model: {...main.model,
      vocab: {'<|endoftext|>': 0, 'a': 1, 'b': 2, 'ab': 3, 'aba': 4, 'Ġ': 5},
      merges: [['ab', 'a'], ['a', 'b']]}},
  };
  const mergeOrderCases = [['merge_order', toHex('abab ababab bab')]];

  const out = {library: 'tokenizers (npm) ' + require('tokenizers/package.json').version,
               variants: {}};
  for (const [name, cfg] of Object.entries(variants)) {
    const tok = Tokenizer.fromString(JSON.stringify(cfg));
    const cases = [];
    for (const [caseName, textHex] of name === 'merge_order' ? mergeOrderCases : encodeCases) {
      const input = Buffer.from(textHex, 'hex').toString('utf8');
      const ids = (await tok.encode(input)).getIds();
      const decoded = await tok.decode(ids, true);
      cases.push({name: caseName, text_hex: textHex, ids, decoded_hex: toHex(decoded)});
    }
    const decodes = [];
    for (const [caseName, ids] of name === 'merge_order' ? [] : decodeCases(tok, nextId))
      decodes.push({name: caseName, ids, decoded_hex: toHex(await tok.decode(ids, true))});
    out.variants[name] = {vocab_size: tok.getVocabSize(true),
                          eod: tok.tokenToId('<|endoftext|>'), encode: cases, decode: decodes};
  }
  fs.writeFileSync(idsOut, JSON.stringify(out, null, 1) + '\n');
  fs.rmSync(work, {recursive: true});
}

main().catch((e) => { console.error(e); process.exit(1); });

#!/usr/bin/python3
"""The reference for the C++ SentencePiece tokenizer (runtime/data/spm_tokenizer.h): Python's
sentencepiece (Debian: python3-sentencepiece), called the way GPT-NeoX's SentencePieceTokenizer
calls it (megatron/tokenizer/tokenizer.py: encode(text) with no BOS/EOS, decode(ids),
eod = piece_to_id("<|endoftext|>"), vocab size = get_piece_size()). Two commands:

  spm_reference.py train OUT_DIR
      trains the two small test models from a corpus made of this repository's README.md and
      docs/*.md plus the multilingual lines below, and writes OUT_DIR/spm_llama_like.model
      (LLaMA's trainer settings: BPE, byte fallback, split digits, identity normalization, no
      <|endoftext|> piece, so NeoX's eod falls back to <unk>) and OUT_DIR/spm_endoftext.model
      (the same, 800 pieces, with <|endoftext|> as a user-defined piece)
  spm_reference.py golden MODEL... > OUT_JSON
      prints JSON: for each model, its vocabulary size, eod id and, for each test text (hex
      bytes: some are not UTF-8), the ids encode gives and the UTF-8 bytes decode gives back

The committed files came from, in the repository root:
  /usr/bin/python3 test/reference/spm_reference.py train test/golden
  /usr/bin/python3 test/reference/spm_reference.py golden test/golden/spm_llama_like.model \
      test/golden/spm_endoftext.model > test/golden/spm_tokenizer.json
Needs Debian's python3-sentencepiece (run with /usr/bin/python3). Retraining on unchanged docs gives
the same pieces (the .model bytes still differ: it records the temporary corpus path); after the
docs change it gives other models, so regenerate the golden file after retraining. The C++ tests
(test/test_spm_tokenizer.cc) only read the committed files.
"""
import glob
import json
import os
import sys
import tempfile

import sentencepiece as spm

MULTILINGUAL = [
    "Le café était déjà très animé à côté de l'hôpital; naïve façade, crème brûlée.",
    "Größere Übungen für Mädchen und Jungen: schön, müde, Straße.",
    "El niño comió piñata en la montaña. ¿Qué pasó? ¡Olé!",
    "深度学习模型的训练需要大量的数据和计算资源。我们在这里测试中文分词。",
    "日本語のテキストも少し入れておきます。東京は大きな都市です。",
    "한국어 문장도 조금 있습니다. 서울은 큰 도시입니다.",
    "Русский текст: обучение больших языковых моделей требует много данных.",
    "Emoji: 🚀 launch 🎉 party 👍🏽 ok 🇫🇷 flag 👨‍👩‍👧 family 😀😀😀",
    "Numbers 12345 and 3.14159, dates 2024-01-31, ids 0x7fff and 1e-5.",
]

# What each text exercises; the C++ test prints the name of a case that differs.
TEXTS = [
    ("empty", b""),
    ("ascii", b"Hello world, this is a test of the tokenizer."),
    ("one space", b" "),
    ("leading and trailing spaces", b"   leading and trailing   "),
    ("multiple inner spaces", b"a  b   c    d"),
    ("tabs", b"\tcol1\tcol2\t"),
    ("newlines", b"line one\nline two\n\nline four\r\n"),
    ("only newlines", b"\n\n\n"),
    ("digits", b"2024 has 366 days; pi is 3.14159 and 1000000 is a million."),
    ("accents", "crème brûlée à côté, naïve Größe".encode()),
    ("decomposed accents", "e\u0301 a\u0300 n\u0303".encode()),
    ("cjk", "深度学习模型的训练。日本語のテキスト。한국어 문장.".encode()),
    ("emoji", "🚀🎉 👍🏽 🇫🇷 👨‍👩‍👧 not-in-corpus: 🦀🧬".encode()),
    ("rare characters", "ℌ𝔢𝔩𝔩𝔬 ∑∫∂ ⟨ψ|φ⟩ ꙮ".encode()),
    ("fullwidth", "ＡＢＣ１２３".encode()),
    ("lone continuation byte", b"abc\x80def"),
    ("truncated sequence", b"caf\xc3"),
    ("overlong encoding", b"\xc0\xaf slash"),
    ("invalid lead byte", b"\xff\xfe text \xf8"),
    ("surrogate encoded", b"\xed\xa0\x80 x"),
    ("nul byte", b"before\x00after"),
    ("special pieces as text", b"<s> </s> <unk> <|endoftext|> <0x41>"),
    ("code", b"int main() {\n    return 0;  // done\n}\n"),
    ("long word", b"Pneumonoultramicroscopicsilicovolcanoconiosis" * 3),
]


def corpus_lines(root):
    lines = []
    for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        with open(path, encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f if line.strip()]
    return lines + MULTILINGUAL * 20


def train(out_dir):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(corpus_lines(root)) + "\n")
        common = dict(
            input=corpus, model_type="bpe", byte_fallback=True, split_digits=True,
            normalization_rule_name="identity", remove_extra_whitespaces=False,
            add_dummy_prefix=True, allow_whitespace_only_pieces=True,
            split_by_unicode_script=True, character_coverage=0.9995, max_sentencepiece_length=16,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
        for name, extra in (("spm_llama_like", dict(vocab_size=1000)),
                            ("spm_endoftext",
                             dict(vocab_size=800, user_defined_symbols=["<|endoftext|>"]))):
            prefix = os.path.join(tmp, name)
            spm.SentencePieceTrainer.train(model_prefix=prefix, **common, **extra)
            with open(prefix + ".model", "rb") as src, \
                    open(os.path.join(out_dir, name + ".model"), "wb") as dst:
                dst.write(src.read())


def golden(models):
    out = {"models": []}
    for path in models:
        sp = spm.SentencePieceProcessor(model_file=path)
        cases = []
        for name, text in TEXTS:
            ids = sp.encode(text)
            cases.append({"name": name, "text": text.hex(), "ids": ids,
                          "decoded": sp.decode(ids).encode("utf-8").hex()})
        out["models"].append({
            "file": os.path.basename(path),
            "vocab_size": sp.get_piece_size(),
            "eod": sp.piece_to_id("<|endoftext|>"),
            "cases": cases,
        })
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "train":
        train(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "golden":
        golden(sys.argv[2:])
    else:
        sys.exit(__doc__)

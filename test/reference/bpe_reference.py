#!/usr/bin/env python3
"""An independent reference for the C++ GPT-2 BPE tokenizer (runtime/data/bpe_tokenizer.h):
GPT-2's encoder algorithm written plainly in Python, with the `regex` module for GPT-2's
pre-tokenization pattern. Three commands:

  bpe_reference.py train SAMPLE MERGES OUT_DIR
      learns MERGES merges from the text file SAMPLE (most frequent pair first, ties to the
      smallest pair) and writes OUT_DIR/vocab.json and OUT_DIR/merges.txt in GPT-2's format
  bpe_reference.py encode VOCAB MERGES < lines
      each input line is a text as hex bytes; prints its ids, space separated, one line each.
      Bytes that are not UTF-8 are read with Python's "surrogateescape" handler, as the C++
      tokenizer defines it
  bpe_reference.py classes
      prints JSON: the code point ranges `regex` matches with \\p{L}, \\p{N} and \\s, and those
      unicodedata calls unassigned (their class depends on the Unicode version)
"""
import json
import sys
import unicodedata

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
END_OF_TEXT = "<|endoftext|>"


def byte_alphabet():
    """GPT-2's bytes_to_unicode: {byte: character}. Bytes printable in Latin-1 stand for
    themselves; the rest take U+0100 onwards in byte order."""
    printable = [b for b in range(256)
                 if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


BYTE_CHAR = byte_alphabet()


def words(text):
    """Pre-tokenization: the pattern's matches, each as its bytes in GPT-2's alphabet."""
    for piece in PATTERN.findall(text):
        raw = piece.encode("utf-8", "surrogateescape")
        yield "".join(BYTE_CHAR[b] for b in raw)


def adjacent_pairs(symbols):
    return {(symbols[i], symbols[i + 1]) for i in range(len(symbols) - 1)}


def merge_pair(symbols, pair):
    """Every occurrence of pair merged, scanning left to right without overlaps."""
    out = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def bpe(word, ranks):
    """GPT-2's loop: merge the lowest-ranked pair present, everywhere, until none is left."""
    symbols = list(word)
    while len(symbols) > 1:
        ranked = [p for p in adjacent_pairs(symbols) if p in ranks]
        if not ranked:
            break
        symbols = merge_pair(symbols, min(ranked, key=lambda p: ranks[p]))
    return symbols


def read_files(vocab_path, merges_path):
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    with open(merges_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    pairs = [tuple(line.split(" ")) for line in lines if line]
    return vocab, {pair: rank for rank, pair in enumerate(pairs)}


def encode(text, vocab, ranks, cache):
    ids = []
    for word in words(text):
        if word not in cache:
            cache[word] = [vocab[s] for s in bpe(word, ranks)]
        ids.extend(cache[word])
    return ids


def train(sample_path, merge_count, out_dir):
    with open(sample_path, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    counts = {}
    for word in words(text):
        counts[word] = counts.get(word, 0) + 1
    corpus = [(list(word), n) for word, n in counts.items()]
    merges = []
    for _ in range(merge_count):
        pair_counts = {}
        for symbols, n in corpus:
            for i in range(len(symbols) - 1):
                pair = (symbols[i], symbols[i + 1])
                pair_counts[pair] = pair_counts.get(pair, 0) + n
        if not pair_counts:
            break
        best = min(pair_counts, key=lambda p: (-pair_counts[p], p))
        merges.append(best)
        corpus = [(merge_pair(symbols, best), n) for symbols, n in corpus]
    # Ids as GPT-2 orders them: the byte characters (printable ones first), the merges, then
    # <|endoftext|>. So ids differ from byte values, which catches code that confuses the two.
    tokens = sorted(BYTE_CHAR.values(), key=lambda c: (ord(c) >= 0x100, ord(c)))
    tokens += [a + b for a, b in merges if a + b not in tokens]
    tokens.append(END_OF_TEXT)
    with open(out_dir + "/vocab.json", "w", encoding="utf-8") as f:
        json.dump({token: i for i, token in enumerate(tokens)}, f)
    with open(out_dir + "/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        f.writelines("%s %s\n" % pair for pair in merges)


def classes():
    everything = "".join(chr(cp) for cp in range(0x110000))

    def spans(pattern):
        return [[m.start(), m.end() - 1] for m in regex.finditer(pattern, everything)]

    unassigned = []
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)) == "Cn":
            if unassigned and unassigned[-1][1] == cp - 1:
                unassigned[-1][1] = cp
            else:
                unassigned.append([cp, cp])
    print(json.dumps({"unicodedata": unicodedata.unidata_version, "L": spans(r"\p{L}+"),
                      "N": spans(r"\p{N}+"), "S": spans(r"\s+"), "unassigned": unassigned}))


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "train" and len(sys.argv) == 5:
        train(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif command == "encode" and len(sys.argv) == 4:
        vocab, ranks = read_files(sys.argv[2], sys.argv[3])
        cache = {}
        for line in sys.stdin:
            text = bytes.fromhex(line.strip()).decode("utf-8", "surrogateescape")
            print(" ".join(str(i) for i in encode(text, vocab, ranks, cache)))
    elif command == "classes" and len(sys.argv) == 2:
        classes()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

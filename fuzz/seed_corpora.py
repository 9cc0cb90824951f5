#!/usr/bin/env python3
"""Writes the seed files of test/fuzz_corpus/NAME/ (seed-*; files of other names are left
alone: inputs the fuzzers found, and the manifests a real save wrote, saved-*). Seeds come from the tests' fixtures (test/golden, test/neox,
configs/) and inline strings (raw JSON strings of test/*.cc, the hostfile and selection tables);
the binary ones (.idx, coordinator requests, relay frames) are encoded here as the formats in
each target's header comment say. Run from anywhere: python3 fuzz/seed_corpora.py"""

import glob
import json
import os
import re
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "test", "fuzz_corpus")


def source(*parts):
    return os.path.join(ROOT, *parts)


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def write_seeds(target, seeds):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "seed-*")):
        os.remove(old)
    for name, data in seeds.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(folder, "seed-" + name), "wb") as f:
            f.write(data)


def raw_json_strings(pattern):
    """Raw string literals R"(...)" of the test sources that are JSON objects."""
    found = []
    for path in sorted(glob.glob(source("test", pattern))):
        for text in re.findall(r'R"\((.*?)\)"', read(path, "r"), re.S):
            try:
                if isinstance(json.loads(text), dict) and text not in found:
                    found.append(text)
            except ValueError:
                pass
    return found


# --- hostfile and node selection -----------------------------------------------------------------

HOSTFILES = {
    "plain": "w0 slots=4\nw1 slots=2\n",
    "comments": "# cluster\n\n   \nw0 slots=4\n  # indented comment\nw1 slots=1\n",
    "crlf": "w0 slots=4\r\nw1 slots=2\r\n",
    "lone-cr": "w0 slots=4\rw1 slots=2\r",
    "tabs": "\t w0\t\tslots=8  \t\n",
    "trailing-text": "w0 slots=4 max_slots=8\nw1 slots=2# c\n",
    "bom": "\xef\xbb\xbf127.0.0.1 slots=2\n",
    "leading-zeros": "w0 slots=007\n",
    "zero-slots": "w0 slots=0\nw1 slots=1\n",
    "odd-names": "fe80::1 slots=1\n[::1] slots=2\nuser@host slots=3\nw#0 slots=4\n",
    "unit-separator": "w0\x1fslots=5\n",
    "other-notation": "w0 slots=0x10\n",
    "digits-then-text": "w0 slots=3abc\n",
    "bad-colon": "w0 slots:4\n",
    "duplicate": "w0 slots=1\nw0 slots=2\n",
    "metacharacter": "w;0 slots=1\n",
    "too-many-slots": "w0 slots=65537\n",
    "empty": "# nothing\n",
}

# INCLUDE \n EXCLUDE \n NUM_NODES NUM_GPUS HOSTFILE_FOUND VISIBLE_DEVICES \n HOSTFILE
POOL = "worker-0 slots=4\nworker-1 slots=4\nworker-2 slots=2\nworker-3 slots=0\nworker-4 slots=1\n"
NODE_SPECS = {
    "everything": "\n\n-1 -1 1\n" + POOL,
    "include-slot": "worker-1:0\n\n-1 -1 1\n" + POOL,
    "include-hosts": "worker-0@worker-2:1\n\n-1 -1 1\n" + POOL,
    "include-merge": "worker-0:3,1@worker-0:1,0\n\n-1 -1 1\n" + POOL,
    "exclude-host": "\nworker-0\n-1 -1 1\n" + POOL,
    "exclude-slots": "\nworker-0:0,2@worker-1: 1\n-1 -1 1\n" + POOL,
    "both": "worker-0\nworker-1\n-1 -1 1\n" + POOL,
    "num-nodes-gpus": "\n\n2 2 1\n" + POOL,
    "visible-devices": "\n\n-1 -1 0 1,3\n",
    "visible-ignored": "localhost:0\n\n-1 -1 0 0,1\n",
    "bad-slot": "worker-0:x\n\n-1 -1 1\n" + POOL,
    "two-colons": "worker-0:1:2\n\n-1 -1 1\n" + POOL,
    "unknown-host": "worker-9\n\n-1 -1 1\n" + POOL,
}

# --- configs ------------------------------------------------------------------------------------


def ds_configs():
    seeds = {"configs-ds_config.json": read(source("configs", "ds_config.json"))}
    for i, text in enumerate(raw_json_strings("test_*.cc")):
        if len(text) < 4096:
            seeds["test-%03d.json" % i] = text
    return seeds


def neox_configs():
    seeds = {}
    yml = sorted(glob.glob(source("test", "neox", "configs", "*.yml")))
    for path in yml + sorted(glob.glob(source("configs", "*.yml"))):
        seeds[os.path.basename(path)] = read(path)
    # Several files merged, as `--config a.yml b.yml` merges them (the separator line is "#8<").
    small = read(source("test", "neox", "configs", "local_setup.yml"))
    seeds["merged-demo-local_setup"] = read(source("configs", "gpt_demo.yml")) + b"\n#8<\n" + small
    seeds["merged-twice-set"] = b"train-iters: 10\n#8<\ntrain_iters: 20\n"
    seeds["deepspeed_config-file"] = (
        b"num-layers: 2\nhidden-size: 64\nnum-attention-heads: 4\nseq-length: 32\n"
        b"max-position-embeddings: 32\ntrain-iters: 10\ntokenizer-type: ByteTokenizer\n"
        b"data-path: data/x\ndeepspeed_config: @DIR@/ds_config.json\n#json\n"
        + read(source("configs", "ds_config.json")))
    return seeds


# --- tokenizers ---------------------------------------------------------------------------------


def gpt2_char(byte):
    """GPT-2's bytes_to_unicode, as test/bpe_test_files.h spells it."""
    extra = 0
    for b in range(256):
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE
        cp = b if printable else 0x100 + extra
        if not printable:
            extra += 1
        if b == byte:
            return chr(cp)


def spelling(data):
    return "".join(gpt2_char(b) for b in data)


def small_bpe():
    """test/bpe_test_files.h's writeSmallBpe: vocab.json, NUL, merges.txt."""
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"ab", b"a"), (b"a", b"b"),
              (b"\xc3", b"\xa9"), (b"\n", b"\n")]
    ids = {bytes([b]): (b * 37 + 11) % 256 for b in range(256)}
    for a, b in merges:
        ids[a + b] = len(ids)
    vocab = {spelling(k): v for k, v in ids.items()}
    vocab["<|endoftext|>"] = len(ids)
    merge_text = "#version: 0.2\n" + "".join(spelling(a) + " " + spelling(b) + "\n"
                                            for a, b in merges)
    return vocab, merge_text


def gpt2_seeds():
    vocab, merges = small_bpe()
    text = json.dumps(vocab, ensure_ascii=False).encode()
    return {
        "small": text + b"\0" + merges.encode(),
        "no-version-line": text + b"\0" + merges.split("\n", 1)[1].encode(),
        "no-merges": text + b"\0",
        "escaped": json.dumps(vocab).encode() + b"\0" + merges.encode(),
    }


def hf_seeds():
    vocab, merges = small_bpe()
    end = vocab.pop("<|endoftext|>")
    small = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": end, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges.split("\n")[1:-1]},
    }
    pairs = json.loads(json.dumps(small))
    pairs["model"]["merges"] = [m.split(" ") for m in pairs["model"]["merges"]]
    pairs["normalizer"] = None
    return {
        "golden.json": read(source("test", "golden", "hf_tokenizer.json")),
        "small.json": json.dumps(small, ensure_ascii=False, indent=1),
        "merge-pairs.json": json.dumps(pairs, ensure_ascii=False),
    }


def spm_seeds():
    return {os.path.basename(p): read(p)
            for p in sorted(glob.glob(source("test", "golden", "*.model")))}


# --- checkpoint manifest and indexed dataset -----------------------------------------------------


def manifest_seeds():
    """Broken ones only: the good manifests (saved-*.json) were written by real saves, since
    only manifestText writes the checksum as parseManifest expects it."""
    return {
        "not-an-object.json": "[1, 2]",
        "format-1.json": '{"manifest_fnv1a64": "0123456789abcdef", "version": 1}',
        "wrong-checksum.json": '{"format": "deepspeed-native checkpoint", "version": 3, '
                               '"manifest_checksum": "crc32c:00000000"}',
        "deep.json": "[" * 40 + "]" * 40,
    }


def idx_file(sizes, pointers, doc_idx, dtype=8):
    head = b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, dtype, len(sizes), len(doc_idx))
    return (head + struct.pack("<%di" % len(sizes), *sizes) +
            struct.pack("<%dq" % len(pointers), *pointers) +
            struct.pack("<%dq" % len(doc_idx), *doc_idx))


def dataset(sequences, dtype=8, bin_extra=0):
    """[u16 bin length][idx] for back-to-back sequences of these lengths, one per document."""
    width = 2 if dtype == 8 else 4
    pointers, at = [], 0
    for n in sequences:
        pointers.append(at)
        at += n * width
    idx = idx_file(sequences, pointers, list(range(len(sequences) + 1)), dtype)
    return struct.pack("<H", at + bin_extra) + idx


def idx_seeds():
    return {
        "uint16": dataset([5, 3, 0, 7]),
        "int32": dataset([4, 1, 2], dtype=4),
        "empty": dataset([]),
        "two-per-document": struct.pack("<H", 20) + idx_file([4, 6], [0, 8], [0, 2]),
        "bin-too-short": dataset([5, 3], bin_extra=-2),
        "bad-magic": b"\x10\x00MMIDIDY\0\0" + b"\0" * 25,
    }


# --- coordinator requests and relay frames (protobuf wire format) --------------------------------


def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number, value):
    """int -> varint field; bytes/str -> length-delimited; float -> double (fixed64)."""
    if isinstance(value, float):
        return varint(number << 3 | 1) + struct.pack("<d", value)
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def message(*fields):
    return b"".join(field(n, v) for n, v in fields)


TOKEN = "fuzz-token"  # fuzz/coordinator.cc's and fuzz/relay_frames.cc's job token
AUTH = message((1, TOKEN), (2, 1))
OPS = ["Join", "NodeJoin", "KvSet", "KvGet", "KvWait", "KvMultiSet", "KvMultiGet", "KvAdd",
       "Heartbeat", "Report", "Offer", "Watch", "NodeSession"]
TOKEN_EPOCH, METADATA = 0x30, 0x40


def request(op, body, flags=TOKEN_EPOCH):
    return bytes([OPS.index(op) | flags]) + struct.pack("<H", len(body)) + body


def join(host="127.0.0.1", slot=0, auth=AUTH):
    return message((1, auth), (2, host), (3, slot), (4, 4242), (7, "node-a"))


def heartbeat(rank, step=5):
    collective = message((1, 1), (2, "world"), (3, 12))
    return message((1, AUTH), (2, rank), (3, 3), (4, step), (5, 2.5), (6, 100.0), (7, 1 << 20),
                   (8, "all_reduce 1.2 MB"), (10, collective))


def node_ups(*ups):
    return b"".join(struct.pack("<H", len(u)) + u for u in ups)


def coordinator_seeds():
    report = message((1, AUTH), (2, 0), (3, 0), (5, 5), (6, 2.25), (7, 3.5),
                     (8, message((1, "tokens/s"), (2, 1000.0))),
                     (9, message((1, "all_reduce"), (2, 4096), (3, 2), (4, 0.5), (7, "world"),
                                 (8, 4))))
    ups = node_ups(message((1, AUTH), (2, 0), (2, 1), (3, heartbeat(0)), (5, 0)),
                   message((3, heartbeat(1, 6)), (4, 1)))
    return {
        "join-heartbeat-report": request("Join", join()) + request("Heartbeat", heartbeat(0)) +
        request("Report", report),
        "join-by-rank": request("Join", message((1, AUTH), (5, 1), (6, 3), (4, 7))),
        "join-twice": request("Join", join("127.0.0.2", 1)) + request("Join", join("127.0.0.2", 1)),
        "node-join": request("NodeJoin", message((1, join()), (1, join("127.0.0.1", 1)))),
        "store": request("KvSet", message((1, AUTH), (2, "a"), (3, "1"))) +
        request("KvGet", message((1, AUTH), (2, "a"), (3, 10))) +
        request("KvAdd", message((1, AUTH), (2, "n"), (3, 5))) +
        request("KvMultiSet", message((1, AUTH), (2, message((1, "b"), (2, "2"))),
                                      (2, message((1, "c"), (2, ""))))) +
        request("KvMultiGet", message((1, AUTH), (2, "b"), (2, "c"), (3, 10))) +
        request("KvWait", message((1, AUTH), (2, "a"), (2, "missing"), (3, 5))),
        "offer": request("Offer", message((1, message((1, TOKEN))), (2, "node-7"), (3, 4))) +
        request("Offer", message((1, message((1, TOKEN))), (2, "-oProxy"), (3, 4))),
        "watch": request("Watch", message((1, AUTH), (2, 1))),
        "node-session": request("NodeSession", ups, TOKEN_EPOCH | METADATA),
        "node-session-no-metadata": request("NodeSession", ups),
        "wrong-token": request("Join", join(auth=message((1, "nope"), (2, 1))), 0),
        "stale-epoch": request("KvSet", message((1, message((1, TOKEN), (2, 7))), (2, "k")), 0x10),
    }


def frame(method, payload, call=1, deadline=5000):
    return struct.pack("<IIIBBH", len(payload), call, deadline, method, 0, 0) + payload


def relay_seeds():
    join_frame = frame(1, join())
    return {
        "join-heartbeat-watch": join_frame + frame(8, heartbeat(0), 2) +
        frame(10, message((1, AUTH), (2, 0)), 3),
        "store-calls": join_frame + frame(2, message((1, AUTH), (2, "a"), (3, "1")), 2) +
        frame(3, message((1, AUTH), (2, "a"), (3, 10)), 3),
        "unauthenticated": frame(2, message((1, message((1, "nope"))), (2, "a")), 1),
        "oversized-before-auth": struct.pack("<IIIBBH", 70000, 1, 0, 1, 0, 0) + b"x" * 64,
        "truncated": join_frame[:-3],
        "unknown-method": join_frame + frame(99, b"", 2),
    }


def main():
    write_seeds("hostfile", HOSTFILES)
    write_seeds("node_spec", NODE_SPECS)
    write_seeds("ds_config", ds_configs())
    write_seeds("neox_yaml", neox_configs())
    write_seeds("gpt2_bpe", gpt2_seeds())
    write_seeds("hf_tokenizer", hf_seeds())
    write_seeds("spm_model", spm_seeds())
    write_seeds("manifest", manifest_seeds())
    write_seeds("indexed_dataset", idx_seeds())
    write_seeds("coordinator", coordinator_seeds())
    write_seeds("relay_frames", relay_seeds())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An independent reader of TensorBoard event files for the tests: the TFRecord framing (with its
masked CRC32C checks) and the Event / Summary protocol buffers, decoded from the wire format by
hand. Prints one JSON object per record: {"wall_time", "step", "file_version"} or
{"wall_time", "step", "tag", "value"}. Exits non-zero on any malformed byte."""
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            length, i = varint(buf, i)
            value, i = buf[i:i + length], i + length
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield number, wire, value


def varint(buf, i):
    shift = result = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


def main(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        header = data[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert length_crc == masked(header), "bad length CRC at byte %d" % i
        record = data[i + 12:i + 12 + length]
        (record_crc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        assert record_crc == masked(record), "bad record CRC at byte %d" % i
        i += 16 + length
        out = {}
        for number, wire, value in fields(record):
            if number == 1:
                out["wall_time"] = struct.unpack("<d", value)[0]
            elif number == 2:
                out["step"] = value
            elif number == 3:
                out["file_version"] = value.decode()
            elif number == 5:
                for n, _, summary_value in fields(value):
                    assert n == 1
                    for vn, _, v in fields(summary_value):
                        if vn == 1:
                            out["tag"] = v.decode()
                        elif vn == 2:
                            out["value"] = struct.unpack("<f", v)[0]
        print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors header fuzz target (stdlib only; deterministic).

Run from anywhere: python3 tests/fuzz/make_safetensors_corpus.py
Valid files give the fuzzer structure to mutate; malformed ones pin one check each.
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors_header")


def file_bytes(header, data=b"", length=None, pad=True):
    text = header if isinstance(header, (bytes, bytearray)) else json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


CASES = {
    "valid_two_tensors": file_bytes({"a": entry("F32", [2, 3], 0, 24), "b": entry("BF16", [4], 24, 32),
                                     "__metadata__": {"format": "pt"}}, bytes(32)),
    "valid_scalar_and_empty": file_bytes({"s": entry("I64", [], 0, 8), "e": entry("F16", [0, 5], 8, 8)}, bytes(8)),
    "valid_no_tensors": file_bytes({}),
    "too_short": b"\x05\x00\x00",
    "length_over_limit": struct.pack("<Q", 200_000_000) + b"{}",
    "length_past_end": file_bytes({}, length=4096),
    "length_huge": struct.pack("<Q", 2**64 - 1) + b"{}",
    "not_an_object": file_bytes(b"[1,2,3]"),
    "invalid_json": file_bytes(b'{"a": {"dtype": "F32",'),
    "invalid_utf8": file_bytes(b'{"\xff\xfe": {}}'),
    "duplicate_name": file_bytes(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                 b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
    "unknown_dtype": file_bytes({"a": entry("F128", [1], 0, 16)}, bytes(16)),
    "negative_dim": file_bytes({"a": entry("F32", [-1], 0, 4)}, bytes(4)),
    "shape_overflow": file_bytes({"a": entry("F64", [2**62, 2**62], 0, 8)}, bytes(8)),
    "size_mismatch": file_bytes({"a": entry("F32", [3], 0, 8)}, bytes(8)),
    "offsets_reversed": file_bytes({"a": entry("U8", [0], 8, 0)}, bytes(8)),
    "offsets_past_end": file_bytes({"a": entry("U8", [64], 0, 64)}, bytes(8)),
    "overlap": file_bytes({"a": entry("U8", [8], 0, 8), "b": entry("U8", [8], 4, 12)}, bytes(12)),
    "gap": file_bytes({"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 8, 12)}, bytes(12)),
    "trailing_bytes": file_bytes({"a": entry("U8", [4], 0, 4)}, bytes(12)),
    "metadata_not_strings": file_bytes({"__metadata__": {"n": 1}}),
    "unknown_field": file_bytes({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 0}}, bytes(1)),
    "deep_nesting": file_bytes(b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"),
}

if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    for name, content in CASES.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(content)
    print(f"wrote {len(CASES)} files to {HERE}")

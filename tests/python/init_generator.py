#!/usr/bin/env python3
"""An independent transcription of ddx's parameter initialisation stream (trainers/models/init.cpp),
in plain Python, so the golden values that pin it (tests/models/init_golden.json) come from a
second implementation and not from the C++ they check.

Stream: every row of every parameter has its own counter keyed by (seed, parameter name, row);
splitmix64 turns the counter into 64-bit words, two 53-bit uniforms make one Box-Muller pair,
scaled by the parameter's init std and rounded to float32.

  python tests/python/init_generator.py tests/models/init_golden.json
exits 0 when every golden value equals this transcription bit for bit, 1 (naming the case and
value) otherwise. With --print it writes the values it computes instead.
"""
import argparse
import json
import math
import struct
import sys

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(text):
    h = 14695981039346656037
    for byte in text.encode():
        h = ((h ^ byte) * 1099511628211) & MASK
    return h


def to_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def row_values(seed, name, row, std, count):
    """The first `count` values of `row` of parameter `name` under `seed`, as float32."""
    name_key = mix64(mix64((seed + GOLDEN) & MASK) ^ fnv1a64(name))
    counter = mix64(name_key ^ mix64(row))
    out = []
    while len(out) < count:
        counter = (counter + GOLDEN) & MASK
        u1 = ((mix64(counter) >> 11) + 1) * 2.0**-53  # (0, 1]: log is finite
        counter = (counter + GOLDEN) & MASK
        u2 = (mix64(counter) >> 11) * 2.0**-53  # [0, 1)
        radius = std * math.sqrt(-2.0 * math.log(u1))
        out.append(to_float32(radius * math.cos(2.0 * math.pi * u2)))
        out.append(to_float32(radius * math.sin(2.0 * math.pi * u2)))
    return out[:count]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", help="tests/models/init_golden.json")
    parser.add_argument("--print", action="store_true", help="print computed values instead of checking")
    args = parser.parse_args()
    with open(args.golden) as f:
        cases = json.load(f)["cases"]
    failures = 0
    for case in cases:
        assert case["row"] < case["shape"][0] and len(case["values"]) <= math.prod(case["shape"][1:]), case
        ours = row_values(case["seed"], case["name"], case["row"], case["std"], len(case["values"]))
        label = f"{case['name']} seed {case['seed']} row {case['row']}"
        if args.print:
            print(label, json.dumps([float(f"{v:.9g}") for v in ours]))
            continue
        for i, (want, got) in enumerate(zip(case["values"], ours)):
            if to_float32(want) != got:
                print(f"{args.golden}: {label} value {i}: golden {want!r}, transcription {got:.9g}")
                failures += 1
    if not args.print:
        print(f"{len(cases)} cases, {failures} values differ from the transcription")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compare two cfgmask store files byte for byte, timing fields and checksum aside.

Usage: store_compare.py A.cfgm B.cfgm

A store (format 5) is a 56-byte header (magic, format, version, tokenizer
identity, payload size, checksum, index-part size, index checksum) and a
payload whose index part ends with the compile statistics
(CompiledStore::Stats, written as one struct: five doubles of seconds, eleven
64-bit counters, one double of seconds), the rows following it.  Everything but the checksum and the
seconds must be equal; the first difference is reported with its offset.
Exit status 0 when equal, 1 when not, 2 on unreadable input.
"""
import struct
import sys

HEADER = 8 + 4 + 4 + 8 * 5
STATS = 5 * 8 + 11 * 8 + 8
# Byte ranges of the statistics block that hold seconds (ignored).
SECONDS = [(0, 40), (128, 136)]


def masked(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if len(data) < HEADER + STATS or data[:8] != b"CFGMASK\n":
        raise ValueError(f"{path}: not a cfgmask store")
    (payload,) = struct.unpack_from("<Q", data, 24)
    if payload != len(data) - HEADER:
        raise ValueError(f"{path}: payload size {payload} does not match the file")
    (index_bytes,) = struct.unpack_from("<Q", data, 40)
    data[32:40] = bytes(8)  # checksums (whole payload, index part)
    data[48:56] = bytes(8)
    base = HEADER + index_bytes - STATS
    for a, b in SECONDS:
        data[base + a:base + b] = bytes(b - a)
    return bytes(data)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        a, b = masked(argv[1]), masked(argv[2])
    except (OSError, ValueError) as e:
        print(f"store_compare: {e}", file=sys.stderr)
        return 2
    if a == b:
        print(f"identical ({len(a)} bytes, timing and checksum aside)")
        return 0
    n = min(len(a), len(b))
    first = next((i for i in range(n) if a[i] != b[i]), n)
    print(f"differ: sizes {len(a)} and {len(b)}, first difference at byte {first}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

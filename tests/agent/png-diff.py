#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Compares two screenshots pixel by pixel (8-bit RGB/RGBA PNGs, not interlaced, as Chromium
# writes them; stdlib only). Usage: png-diff.py A.png B.png X0 Y0 X1 Y1
# Prints "outside N inside M total T block yes|no": pixels that differ outside and inside the
# box [X0,X1) x [Y0,Y1), and whether both images show the test page's static block (#1f6feb at
# 190,220). Exit 2 on a file it cannot read.
import struct
import sys
import zlib


def decode(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"{path}: depth {depth} colour type {ctype} interlace {interlace}")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif ftype != 0:
            raise ValueError(f"{path}: filter {ftype}")
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def pixel(img, x, y):
    _, _, bpp, rows = img
    return tuple(rows[y][x * bpp:x * bpp + 3])


def main():
    try:
        a, b = decode(sys.argv[1]), decode(sys.argv[2])
    except (OSError, ValueError, zlib.error, TypeError) as e:
        print(e)
        return 2
    x0, y0, x1, y1 = (int(v) for v in sys.argv[3:7])
    if a[:2] != b[:2]:
        print(f"sizes differ: {a[:2]} vs {b[:2]}")
        return 1
    width, height = a[:2]
    outside = inside = 0
    for y in range(height):
        ra, rb = a[3][y], b[3][y]
        if ra == rb and a[2] == b[2]:
            continue
        for x in range(width):
            if pixel(a, x, y) != pixel(b, x, y):
                if x0 <= x < x1 and y0 <= y < y1:
                    inside += 1
                else:
                    outside += 1
    block = all(pixel(img, 190, 220) == (0x1F, 0x6F, 0xEB) for img in (a, b))
    print(f"outside {outside} inside {inside} total {width * height} block {'yes' if block else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

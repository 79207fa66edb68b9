#!/usr/bin/env python3
# Migrates a v1/v2/v3 plan to v4. v2 added build_options' tactic sources; v3 the input and output formats (string
# lists at the end of build_options) and, per tensor of the io section, its layout flag (u8) and INT8 scale (f32); v4
# the kernel policy (a string at the end of build_options, empty for the defaults).
# Usage: python3 tests/fuzz/upgrade_plan.py FILE.plan (rewritten in place, checksum recomputed).
import struct, sys
p = sys.argv[1]
body = open(p, 'rb').read()[:-8]
pos = 8
ver = struct.unpack_from('<I', body, pos)[0]; assert ver in (1, 2, 3), ver
pos += 4
def take_str():
    global pos
    n = struct.unpack_from('<I', body, pos)[0]; s = body[pos:pos+4+n]; pos += 4+n; return s
def upgrade_io(data):  # two tensor lists: u32 count, then name (str), dtype (i32), shape (u32 rank, i64 dims)
    out, p = bytearray(), 0
    for _ in range(2):
        n = struct.unpack_from('<I', data, p)[0]; out += data[p:p+4]; p += 4
        for _ in range(n):
            q = p
            p += 4 + struct.unpack_from('<I', data, p)[0] + 4
            p += 4 + 8 * struct.unpack_from('<I', data, p)[0]
            out += data[q:p] + struct.pack('<Bf', 0, 0.0)
    assert p == len(data)
    return bytes(out)

out = bytearray(body[:8]) + struct.pack('<I', 4)
out += take_str() + take_str()
out += body[pos:pos+12]; pos += 12  # sm, CUDA and cuDNN versions
out += take_str()
start = pos
np_ = struct.unpack_from('<I', body, pos)[0]; pos += 4
for _ in range(np_):
    take_str()
    for _ in range(3):
        r = struct.unpack_from('<I', body, pos)[0]; pos += 4 + 8*r
out += body[start:pos]
ns = struct.unpack_from('<I', body, pos)[0]; out += body[pos:pos+4]; pos += 4
for _ in range(ns):
    name = take_str(); n = struct.unpack_from('<Q', body, pos)[0]; pos += 8
    data = body[pos:pos+n]; pos += n
    if name[4:] == b'build_options':
        data = data + struct.pack('<I', 0) * {1: 4, 2: 3, 3: 1}[ver]
    if name[4:] == b'io' and ver < 3:
        data = upgrade_io(data)
    out += name + struct.pack('<Q', len(data)) + data
assert pos == len(body)
h = 0xcbf29ce484222325
for b in out:
    h ^= b; h = (h * 0x100000001b3) & 0xffffffffffffffff
open(p, 'wb').write(bytes(out) + struct.pack('<Q', h))

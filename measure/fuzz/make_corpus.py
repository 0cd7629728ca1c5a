#!/usr/bin/env python3
"""Writes the seed corpus of estimator_fuzz (see estimator_fuzz.cpp for the input format):
1500 reads of a counter updating every 100 ms, densely (every 0.5 ms) and like the follower, with
update-time and read-time stamps and ±12 ms jitter; and RAPL raw values that wrap."""
import random
import struct
from pathlib import Path

out = Path(__file__).parent / "corpus"
out.mkdir(exist_ok=True)


def record(dt_code, dv_code, stamp_mode=0, stamp_off=0, asked=0, power=0, q=0, q2=0):
    return struct.pack("<HHBiHHHB", dt_code, dv_code, stamp_mode, stamp_off, asked, power, q, q2)


def history(name, jitter_ms, step_us, stamp_mode, seed):
    rng = random.Random(seed)
    data = bytearray([0x00, 0x00])  # selector (history), head: 100 ms nominal, capacity 512
    t, k = 0.0, 0
    nxt = 37_000 + rng.uniform(-jitter_ms, jitter_ms) * 1000
    while len(data) < 24000:  # 1500 reads: the schedule locks
        t += step_us
        dv = 0
        if t >= nxt:
            dv = (1 << 14) | 600  # a 30 mJ update
            k += 1
            nxt = 37_000 + k * 100_000 + rng.uniform(-jitter_ms, jitter_ms) * 1000
        data += record((1 << 13) | int(step_us),  # step_us µs
                       dv, stamp_mode, 0, rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(8))
    (out / name).write_bytes(bytes(data))


history("dense-grid", 0, 500, 0, 1)
history("dense-jitter12", 12, 500, 0, 2)
history("sparse-jitter12-readstamps", 12, 7000, 1, 3)
history("dense-floored-stamps", 1, 500, 4, 4)
history("dense-period-early-stamps", 1, 500, 5, 5)

rng = random.Random(6)
wrap = bytearray([0x80, 0x10 | 0x40])  # selector (wrap), head: package range, 1000 W
raw = 262143328850 - 5_000_000
for _ in range(200):
    raw = (raw + rng.randint(0, 3_000_000)) % 262143328850
    wrap += struct.pack("<Qq", raw, 100_000_000)
(out / "rapl-wrap").write_bytes(bytes(wrap))

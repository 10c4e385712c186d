#!/usr/bin/env python3
"""Write a log in which every line is a finding: N Harmovela 0.2 events of a
type outside the registry (envelope.unknown_type), for checking that a
report of a million findings stays within memory.
    python3 benches/many_findings.py N OUT.ndjson
"""
import sys

n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    for i in range(n):
        s, ms = divmod(i, 1000)
        m, s = divmod(s, 60)
        h, m = divmod(m, 60)
        f.write(
            '{"spec_version":"0.2","id":"evt_%09d","type":"vendor.custom_probe",'
            '"source":"agent:probe","session_id":"sess_1",'
            '"created_at":"2026-07-14T%02d:%02d:%02d.%03dZ","payload":{"n":%d}}\n'
            % (i, h % 24, m, s, ms, i)
        )

#!/usr/bin/env python3
"""Writes the committed seed corpora under fuzz/corpus/<target>/: well-formed queries for every
name and type of the fuzz fixture, one query for each row of spec/robustness.md, TCP streams of
framed queries, and record values of every shape. Run from anywhere; rewrites these seeds and
leaves other files (inputs kept from fuzzing runs, named regression-*) alone."""

import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

A, NS, CNAME, SOA, PTR, MX, TXT, AAAA, SRV, OPT, IXFR, AXFR, ANY = (
    1, 2, 5, 6, 12, 15, 16, 28, 33, 41, 251, 252, 255)
IN, CH, NONE = 1, 3, 254


def name(text):
    out = b""
    for label in text.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def opt(size=1232, version=0, do=False, options=()):
    rdata = b"".join(struct.pack(">HH", code, len(data)) + data for code, data in options)
    return b"\x00" + struct.pack(">HHBBHH", OPT, size, 0, version, 0x8000 if do else 0, len(rdata)) + rdata


def message(qname="web.east.skydns.local.", qtype=A, qclass=IN, flags=0x0100, counts=None,
            extra=b"", additional=(), raw_name=None, ident=0x1234):
    body = (raw_name if raw_name is not None else name(qname)) + struct.pack(">HH", qtype, qclass)
    counts = counts or (1, 0, 0, len(additional))
    return struct.pack(">HHHHHH", ident, flags, *counts) + body + extra + b"".join(additional)


def queries():
    names = [
        "skydns.local.", "web.east.skydns.local.", "1.web.east.skydns.local.", "east.skydns.local.",
        "api.east.skydns.local.", "info.east.skydns.local.", "c1.chain.skydns.local.",
        "l1.loop.skydns.local.", "self.skydns.local.", "external.skydns.local.",
        "mail.skydns.local.", "db.skydns.local.", "*.region1.skydns.local.",
        "production.any.skydns.local.", "local.dns.skydns.local.", "ns.dns.skydns.local.",
        "big.skydns.local.", "huge.skydns.local.", "w1.wall.skydns.local.", "wall.skydns.local.",
        "overflow.skydns.local.", "t.long.skydns.local.", "empty.skydns.local.",
        "nope.skydns.local.", "101.0.0.10.in-addr.arpa.", "9.9.9.10.in-addr.arpa.",
        "1.0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", "example.org.",
    ]
    seeds = {}
    for n in names:
        for t in (A, AAAA, SRV, TXT, MX, CNAME, NS, SOA, PTR, ANY):
            seeds[f"q-{n.rstrip('.')}-{t}"] = message(n, t)
        seeds[f"q-{n.rstrip('.')}-edns"] = message(n, A, additional=[opt()])
    rows = {
        "qdcount-0": message(counts=(0, 0, 0, 0), raw_name=b"", qtype=0, qclass=0)[:12],
        "qdcount-0-cookie": struct.pack(">HHHHHH", 1, 0, 0, 0, 0, 1) + opt(options=[(10, b"\x01" * 8)]),
        "qdcount-0-opt": struct.pack(">HHHHHH", 1, 0, 0, 0, 0, 1) + opt(),
        "qdcount-2": message(counts=(2, 0, 0, 0), extra=name("big.skydns.local.") + struct.pack(">HH", A, IN)),
        "qdcount-2-compressed": message(counts=(2, 0, 0, 0), extra=b"\x03www\xc0\x0c" + struct.pack(">HH", A, IN)),
        "opcode-status": message(flags=(2 << 11) | 0x07F0),
        "opcode-15": message(flags=(15 << 11) | 0x0100),
        "opcode-notify": message(flags=4 << 11),
        "qr-set": message(flags=0x8100),
        "header-only": struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0),
        "truncated-question": message()[:-3],
        "compression-loop": message(raw_name=b"\x01a\xc0\x0c"),
        "pointer-chain": message(counts=(1, 0, 0, 0), raw_name=b"\xc0\x0c"),
        "label-64": message(raw_name=b"\x40" + b"a" * 64 + b"\x00"),
        "name-over-255": message(raw_name=(b"\x3f" + b"a" * 63) * 4 + b"\x00"),
        "runt": b"\x12\x34\x01\x00\x00\x01",
        "garbage": bytes(range(256)),
        "edns-version-1": message(additional=[opt(version=1)]),
        "two-opt": message(additional=[opt(), opt()]),
        "opt-in-answer": message(counts=(1, 1, 0, 0), extra=opt()),
        "opt-overrun": message(additional=[opt(options=[(10, b"\x01" * 8)])[:-4]]),
        "unknown-option": message(additional=[opt(options=[(65001, b"xyz")])]),
        "edns-size-100": message("big.skydns.local.", additional=[opt(size=100)]),
        "edns-size-4096": message("huge.skydns.local.", additional=[opt(size=4096, do=True)]),
        "srv-glue": message("web.east.skydns.local.", SRV),
        "tc-z-set": message(flags=0x0340),
        "rd-clear": message(flags=0),
        "ad-cd": message(flags=0x0130),
        "axfr": message("skydns.local.", AXFR),
        "ixfr": message("skydns.local.", IXFR),
        "qtype-opt": message(qtype=OPT),
        "qtype-0": message(qtype=0),
        "qtype-250": message(qtype=250),
        "qtype-unknown": message(qtype=65280),
        "chaos-version": message("version.bind.", TXT, CH),
        "chaos-id": message("id.server.", TXT, CH),
        "class-none": message(qclass=NONE),
        "class-any": message(qclass=255),
        "outside": message("example.org."),
        "ancount": message(counts=(1, 1, 0, 0), extra=b"\x00" + struct.pack(">HHIH", A, IN, 60, 4) + b"\x01\x02\x03\x04"),
        "trailing": message(extra=b"junk"),
        "mixed-case": message("wEb.EaSt.SkYdNs.LoCaL."),
        "keepalive": message(additional=[opt(options=[(11, b"")])]),
        "wildcard-any": message("*.*.skydns.local.", ANY),
    }
    seeds.update(rows)
    return seeds


def tcp_streams(seeds):
    frame = lambda m: struct.pack(">H", len(m)) + m
    picks = ["q-web.east.skydns.local-1", "q-big.skydns.local-1", "two-opt", "runt", "qr-set"]
    return {
        "stream-pipelined": b"".join(frame(seeds[p]) for p in picks),
        "stream-partial": frame(seeds[picks[0]]) + frame(seeds[picks[1]])[:7],
        "stream-empty-message": frame(b"") + frame(seeds[picks[0]]),
        "stream-wall": frame(seeds["q-w1.wall.skydns.local-16"]) + frame(seeds["q-wall.skydns.local-16"]),
    }


def records():
    values = [
        {"host": "10.0.0.1"}, {"host": "2001:db8::1"}, {"host": "::ffff:10.0.0.1"},
        {"host": "web.skydns.local.", "port": 80}, {"host": "www.example.org"},
        {"host": "x.fuzz.skydns.local."}, {"host": "fuzz.skydns.local."}, {"host": "."},
        {"host": ""}, {}, {"text": "hello"}, {"text": "a" * 255}, {"text": "b" * 600},
        {"host": "10.0.0.1", "port": 65535, "priority": 65535, "weight": 65535, "ttl": 4294967295},
        {"host": "10.0.0.1", "port": 0, "priority": 0, "weight": 0, "ttl": 0},
        {"host": "mx.skydns.local.", "mail": True, "priority": 5},
        {"host": "10.0.0.1", "mail": True, "targetstrip": 3},
        {"host": "a.b.c.d.e.skydns.local.", "targetstrip": 100},
        {"host": "10.0.0.1", "group": "g"}, {"host": "10.0.0.1", "group": ""},
        {"HOST": "10.0.0.2", "Port": 53, "TTL": 5, "extra": [1, {"a": None}]},
        {"host": "10.0.0.1", "host": "10.0.0.2"},
    ]
    seeds = {f"value-{i:02}": json.dumps(v).encode() for i, v in enumerate(values)}
    seeds.update({
        "escaped": b'{"host":"\\u0031\\u0030.0.0.1","text":"\\ud83d\\ude00 \\n\\t"}',
        "duplicate-keys": b'{"host":"10.0.0.1","HOST":"x.skydns.local."}',
        "not-json": b"not json at all",
        "array": b"[1,2,3]",
        "string": b'"{\\"host\\":\\"10.0.0.1\\"}"',
        "bad-ip": b'{"host":"10.0.0.300"}',
        "numbers": b'{"port":1e2,"ttl":-0,"weight":1.0}',
        "deep": b'{"x":' + b"[" * 200 + b"]" * 200 + b',"host":"10.0.0.9"}',
        "long-label": json.dumps({"host": "a" * 63 + ".skydns.local."}).encode(),
        "long-name": json.dumps({"host": ("a" * 60 + ".") * 4 + "local."}).encode(),
    })
    return seeds


def write(target, seeds):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for key, data in seeds.items():
        with open(os.path.join(folder, key), "wb") as f:
            f.write(data)


def main():
    q = queries()
    rows = {k: v for k, v in q.items() if not k.startswith("q-")}
    typical = {k: v for k, v in q.items() if k.startswith("q-") and (k.endswith("-1") or k.endswith("-edns"))}
    some = dict(list(rows.items()) + list(typical.items())[:20])
    write("parse", some)
    write("roundtrip", some)
    write("answer", {**some, **tcp_streams(q)})
    write("record", records())


if __name__ == "__main__":
    main()

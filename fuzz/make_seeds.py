#!/usr/bin/env python3
"""Writes the committed seed corpora under fuzz/corpus/<target>/: well-formed queries for every
name and type of the fuzz fixture, one query for each row of docs/robustness.md ("Messages"), TCP
streams of framed queries, record values of every shape, and upstream replies of every kind a
forwarder meets. Run from anywhere; rewrites these seeds and leaves other files (inputs kept from
fuzzing runs, named regression-*) alone."""

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


# The upstream target's tables (fuzz_targets/upstream.rs): question names and types by index.
UPSTREAM_NAMES = [
    ".", "Example.COM.", "wWw.ExAmPlE.oRg.", "_Sip._Udp.Svc.Cluster.Local.", "1.2.0.192.In-Addr.Arpa.",
    "Host.Corp.Example.", "0123456789.Digits.Test.", "a.B.c.D.e.F.g.H.i.J.k.L.m.N.o.P.Example.Net.",
    "xn--Bcher-kva.Example.",
    "A" * 63 + "." + "b" * 63 + "." + "Cc" * 31 + "C." + "d" * 61 + ".",
]
NAPTR, DNAME, RRSIG, SVCB, HTTPS, CAA = 35, 39, 46, 64, 65, 257
UPSTREAM_QTYPES = [A, AAAA, CNAME, SRV, MX, TXT, PTR, NS, SOA, NAPTR, DNAME, SVCB, HTTPS, CAA, ANY, 65280]
UPSTREAM_ID = 0x5EED
# Control byte 3 picks EDNS sizes by nibble: 0 none, 1 512, 2 1232, 3 4096.
NO_EDNS, EDNS_512, EDNS_1232, EDNS_4096 = 0, 1, 2, 3
# Control byte 2.
DO, CD, TCP_LATER, DOWN_LATER, TCP_FIRST, TCP_SECOND, TCP_THIRD, ROTATE = (1 << i for i in range(8))
# Script events (high nibble; the low one is the argument).
(REPLY, NODATA, TRUNCATED, SERVFAIL, WRONG_ID, REFUSED, UNSENT, TIMEOUT, WAIT, ASK_AGAIN, ASK_OTHER,
 RELOAD, REFRESH) = range(13)
# The reply reaches the first try, and the TCP try when it was truncated.
REPLY_TWICE = ((REPLY, 0), (REPLY, 0))


def rr(owner, rtype, ttl, rdata, rclass=IN):
    """A record; `owner` is wire bytes (a name, or a pointer such as b"\xc0\x0c")."""
    return owner + struct.pack(">HHIH", rtype, rclass, ttl, len(rdata)) + rdata


def ptr(offset):
    return struct.pack(">H", 0xC000 | offset)


def soa(mname=b"\x02ns\xc0\x0c", rname=b"\x05admin\xc0\x0c", minimum=300):
    return mname + rname + struct.pack(">IIIII", 2024, 3600, 600, 86400, minimum)


def upstream_reply(qname, qtype, answers=(), authority=(), additional=(), rcode=0, flags=0x8180,
                   ident=UPSTREAM_ID, opt_rr=True):
    """A reply to skyline's upstream query for `qname` (spelled as the upstream echoes it)."""
    extra = list(additional) + ([opt(size=1232)] if opt_rr else [])
    header = struct.pack(">HHHHHH", ident, flags | rcode, 1, len(answers), len(authority), len(extra))
    return header + name(qname) + struct.pack(">HH", qtype, IN) + b"".join(answers) + b"".join(authority) + b"".join(extra)


def upstream_seed(qtype, name_index, bits=0, sizes=(EDNS_1232, NO_EDNS), age=0, reply=None, script=REPLY_TWICE):
    """Control bytes, the script of (event, argument) pairs, then the reply."""
    control = bytes([UPSTREAM_QTYPES.index(qtype), name_index, bits, sizes[0] | sizes[1] << 4, age])
    events = bytes(event << 4 | arg for event, arg in script)
    return control + bytes([len(events)]) + events + reply


def upstream():
    """Replies as real servers write them: compressed owners and targets, glue, SOAs in
    negative answers, OPTs, TC, failures, and the forgeries a forwarder must drop."""
    seeds = {}
    ex_com = UPSTREAM_NAMES[1].lower()
    www = UPSTREAM_NAMES[2].lower()
    sip = UPSTREAM_NAMES[3].lower()
    q_end = lambda qname: 12 + len(name(qname)) + 4
    seeds["a-two"] = upstream_seed(A, 1, age=30, reply=upstream_reply(ex_com, A, answers=[
        rr(ptr(12), A, 300, bytes([192, 0, 2, 1])), rr(ptr(12), A, 300, bytes([192, 0, 2, 2]))]))
    seeds["a-do-ad"] = upstream_seed(A, 1, bits=DO | CD, sizes=(EDNS_4096, EDNS_512), reply=upstream_reply(
        ex_com, A, flags=0x81A0, answers=[rr(ptr(12), A, 60, bytes([192, 0, 2, 1])),
                                          rr(ptr(12), RRSIG, 60, struct.pack(">HBBIIIH", A, 13, 2, 60, 2, 1, 7) + b"\x07example\x03com\x00" + b"s" * 64)]))
    seeds["aaaa"] = upstream_seed(AAAA, 2, bits=TCP_FIRST, reply=upstream_reply(www, AAAA, answers=[
        rr(ptr(12), AAAA, 3600, bytes.fromhex("20010db8000000000000000000000001"))]))
    # www CNAME a.example.org. (compressed to the question's example.org.), a CNAME b, b A.
    first = rr(ptr(12), CNAME, 300, b"\x01a" + ptr(16))
    a_at = q_end(www) + 12
    second = rr(ptr(a_at), CNAME, 120, b"\x01b" + ptr(16))
    b_at = q_end(www) + len(first) + 12
    chain = [first, second, rr(ptr(b_at), A, 60, bytes([192, 0, 2, 3]))]
    seeds["cname-chain"] = upstream_seed(A, 2, sizes=(NO_EDNS, EDNS_1232), age=100,
                                         reply=upstream_reply(www, A, answers=chain))
    target = b"\x04node" + ptr(12 + 1 + 4 + 1 + 4)
    srv_rdata = struct.pack(">HHH", 10, 5, 5060) + target
    srv = rr(ptr(12), SRV, 30, srv_rdata)
    glue_at = q_end(sip) + len(srv) - len(target)
    seeds["srv-glue"] = upstream_seed(SRV, 3, bits=TCP_SECOND, sizes=(EDNS_512, EDNS_1232), reply=upstream_reply(
        sip, SRV, answers=[srv], additional=[rr(ptr(glue_at), A, 30, bytes([10, 0, 0, 7]))]))
    cluster = 12 + 1 + 4 + 1 + 4 + 1 + 3
    seeds["nxdomain-cluster"] = upstream_seed(SRV, 3, bits=DOWN_LATER, age=10, reply=upstream_reply(
        sip, SRV, rcode=3, authority=[rr(ptr(cluster), SOA, 30, soa(ptr(cluster), ptr(cluster), 30))]))
    seeds["nxdomain"] = upstream_seed(A, 1, bits=DOWN_LATER, age=200, reply=upstream_reply(
        ex_com, A, rcode=3, authority=[rr(ptr(12), SOA, 900, soa())]))
    seeds["nodata"] = upstream_seed(AAAA, 1, age=5, reply=upstream_reply(
        ex_com, AAAA, authority=[rr(ptr(12), SOA, 900, soa(minimum=60))]))
    seeds["nodata-no-soa"] = upstream_seed(AAAA, 1, reply=upstream_reply(ex_com, AAAA))
    seeds["tc"] = upstream_seed(A, 1, reply=upstream_reply(
        ex_com, A, flags=0x8380, answers=[rr(ptr(12), A, 300, bytes([192, 0, 2, i])) for i in range(3)]))
    seeds["tc-over-tcp"] = upstream_seed(A, 1, script=((TRUNCATED, 0), (REPLY, 0)), reply=upstream_reply(
        ex_com, A, flags=0x8380, answers=[rr(ptr(12), A, 300, bytes([192, 0, 2, i])) for i in range(3)]))
    seeds["big"] = upstream_seed(A, 1, sizes=(NO_EDNS, EDNS_1232), bits=TCP_THIRD, age=3, reply=upstream_reply(
        ex_com, A, answers=[rr(ptr(12), A, 300, bytes([10, 1, i // 250, i % 250])) for i in range(90)],
        additional=[rr(b"\x02ns" + ptr(12), A, 300, bytes([10, 0, 0, 53]))]))
    seeds["servfail"] = upstream_seed(A, 1, reply=upstream_reply(ex_com, A, rcode=2))
    seeds["refused"] = upstream_seed(A, 1, reply=upstream_reply(ex_com, A, rcode=5, opt_rr=False))
    seeds["wrong-id"] = upstream_seed(A, 1, reply=upstream_reply(
        ex_com, A, ident=UPSTREAM_ID ^ 1, answers=[rr(ptr(12), A, 300, bytes([6, 6, 6, 6]))]))
    seeds["wrong-question"] = upstream_seed(A, 1, reply=upstream_reply(
        "other.test.", A, answers=[rr(ptr(12), A, 300, bytes([6, 6, 6, 7]))]))
    seeds["not-a-response"] = upstream_seed(A, 1, reply=upstream_reply(ex_com, A, flags=0x0100))
    seeds["mx-glue"] = upstream_seed(MX, 1, reply=upstream_reply(
        ex_com, MX, answers=[rr(ptr(12), MX, 3600, struct.pack(">H", 10) + b"\x04mail" + ptr(12))],
        additional=[rr(ptr(q_end(ex_com) + 12 + 2), A, 3600, bytes([192, 0, 2, 25]))]))
    seeds["txt"] = upstream_seed(TXT, 1, sizes=(EDNS_512, EDNS_4096), reply=upstream_reply(
        ex_com, TXT, answers=[rr(ptr(12), TXT, 60, b"\x05hello\x00" + bytes([255]) + b"t" * 255),
                              rr(ptr(12), TXT, 60, b"\x0bv=spf1 -all")]))
    rev = UPSTREAM_NAMES[4].lower()
    seeds["ptr"] = upstream_seed(PTR, 4, reply=upstream_reply(
        rev, PTR, answers=[rr(ptr(12), PTR, 86400, name("host.example.net."))]))
    corp = UPSTREAM_NAMES[5].lower()
    seeds["ns-stub"] = upstream_seed(NS, 5, reply=upstream_reply(
        corp, NS, answers=[rr(ptr(12), NS, 600, b"\x03ns1" + ptr(17)), rr(ptr(12), NS, 600, b"\x03ns2" + ptr(17))],
        additional=[rr(ptr(q_end(corp) + 12), A, 600, bytes([10, 0, 0, 1])),
                    rr(ptr(q_end(corp) + 18 + 12), AAAA, 600, bytes(15) + b"\x01")]))
    seeds["soa-root"] = upstream_seed(SOA, 0, reply=upstream_reply(
        ".", SOA, answers=[rr(b"\x00", SOA, 86400, name("a.root-servers.net.") + name("nstld.verisign-grs.com.")
                              + struct.pack(">IIIII", 2024010100, 1800, 900, 604800, 86400))]))
    seeds["ns-root"] = upstream_seed(NS, 0, bits=DO, reply=upstream_reply(
        ".", NS, answers=[rr(b"\x00", NS, 518400, name(f"{c}.root-servers.net.")) for c in "abc"]))
    seeds["svcb-https"] = upstream_seed(HTTPS, 1, reply=upstream_reply(
        ex_com, HTTPS, answers=[rr(ptr(12), HTTPS, 300, struct.pack(">H", 1) + b"\x00" + struct.pack(">HH", 1, 3) + b"\x02h2")]))
    seeds["svcb-alias"] = upstream_seed(SVCB, 1, reply=upstream_reply(
        ex_com, SVCB, answers=[rr(ptr(12), SVCB, 300, struct.pack(">H", 0) + b"\x03svc" + ptr(12))]))
    seeds["caa"] = upstream_seed(CAA, 1, reply=upstream_reply(
        ex_com, CAA, answers=[rr(ptr(12), CAA, 300, b"\x00\x05issueletsencrypt.org")]))
    seeds["naptr"] = upstream_seed(NAPTR, 1, reply=upstream_reply(
        ex_com, NAPTR, answers=[rr(ptr(12), NAPTR, 300, struct.pack(">HH", 100, 10) + b"\x01U\x07E2U+sip"
                                  + b"\x18!^.*$!sip:x@example.com!" + b"\x00")]))
    long_name = UPSTREAM_NAMES[9]
    seeds["dname-long"] = upstream_seed(DNAME, 9, reply=upstream_reply(
        long_name, DNAME, answers=[rr(ptr(12), DNAME, 300, name("example.net."))]))
    many = UPSTREAM_NAMES[7]
    seeds["any"] = upstream_seed(ANY, 7, sizes=(EDNS_512, NO_EDNS), reply=upstream_reply(
        many, ANY, answers=[rr(ptr(12), A, 60, bytes([192, 0, 2, 9])), rr(ptr(12), TXT, 60, b"\x03any"),
                            rr(ptr(12), 65280, 60, b"\xde\xad")]))
    seeds["unknown-type"] = upstream_seed(65280, 6, reply=upstream_reply(
        UPSTREAM_NAMES[6], 65280, answers=[rr(ptr(12), 65280, 60, b"opaque")]))
    seeds["ttl-top-bit"] = upstream_seed(A, 8, reply=upstream_reply(
        UPSTREAM_NAMES[8].lower(), A, answers=[rr(ptr(12), A, 0x80000001, bytes([192, 0, 2, 4]))]))
    seeds["records-after-opt"] = upstream_seed(A, 1, reply=upstream_reply(
        ex_com, A, answers=[rr(ptr(12), A, 300, bytes([192, 0, 2, 1]))])
        + rr(ptr(12), A, 300, bytes([192, 0, 2, 2])))

    # What happens around the reply: the forwarder's state machine driven by the script.
    a_two = upstream_reply(ex_com, A, answers=[
        rr(ptr(12), A, 300, bytes([192, 0, 2, 1])), rr(ptr(12), A, 300, bytes([192, 0, 2, 2]))])
    scripts = {
        "retry-after-timeout": ((TIMEOUT, 0), (REPLY, 1)),
        "late-answer": ((TIMEOUT, 0), (REPLY, 0)),
        "silent": (),
        "servfail-then-answer": ((SERVFAIL, 0), (REPLY, 0)),
        "refused-then-answer": ((REFUSED, 0), (REPLY, 0)),
        "unsent-then-answer": ((UNSENT, 0), (TIMEOUT, 0), (REPLY, 1)),
        "out-of-sockets": ((UNSENT, 1), (TIMEOUT, 0)),
        "tcp-timeout": ((TRUNCATED, 0), (TIMEOUT, 0), (REPLY, 0)),
        "wrong-id-then-answer": ((WRONG_ID, 0), (WAIT, 3), (REPLY, 0)),
        "down-and-probe": ((TIMEOUT, 0),) * 4 + ((ASK_OTHER, 0),) + ((TIMEOUT, 0),) * 4
        + ((ASK_OTHER, 1),) + ((TIMEOUT, 0),) * 4 + ((NODATA, 3), (ASK_AGAIN, 0), (REPLY, 0)),
        "merge-and-reload": ((ASK_AGAIN, 0), (ASK_AGAIN, 1), (RELOAD, 1), (REPLY, 0)),
        "bound": ((ASK_OTHER, 0), (ASK_OTHER, 1), (ASK_OTHER, 2), (ASK_OTHER, 3), (REPLY, 0), (NODATA, 1)),
        "refresh-rotated": ((RELOAD, 3), (REFRESH, 0), (REPLY, 0), (ASK_AGAIN, 0)),
    }
    for key, script in scripts.items():
        seeds[f"script-{key}"] = upstream_seed(A, 1, bits=ROTATE if "rotated" in key else 0, age=30,
                                               reply=a_two, script=script)
    seeds["script-stub-gone"] = upstream_seed(NS, 5, script=((RELOAD, 2),), reply=upstream_reply(
        UPSTREAM_NAMES[5].lower(), NS, answers=[rr(ptr(12), NS, 600, b"\x03ns1" + ptr(17))]))
    seeds["script-stale-after-failure"] = upstream_seed(A, 1, bits=DOWN_LATER | TCP_LATER, age=120, reply=upstream_reply(
        ex_com, A, answers=[rr(ptr(12), A, 5, bytes([192, 0, 2, 7]))]), script=(
        (REPLY, 0), (WAIT, 15), (WAIT, 15), (WAIT, 15), (WAIT, 15), (WAIT, 15), (WAIT, 15), (WAIT, 15),
        (ASK_AGAIN, 0), (TIMEOUT, 0), (TIMEOUT, 0), (REPLY, 0)))
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
    write("upstream", upstream())


if __name__ == "__main__":
    main()

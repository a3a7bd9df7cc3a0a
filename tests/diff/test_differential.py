"""herd's request-head parser, chunked decoder and upstream response parser
against h11 0.16 on generated messages.

For every case herd's verdict must be h11's or stricter: herd may reject
what h11 accepts, never accept what h11 rejects or waits on; and when both
accept, they must agree on where the message ends and on what it says
(method, target, headers, framing; the body's data bytes). herd must not
wait for more bytes where h11 has a whole message either: that is two
parsers seeing different message boundaries.

Two allowances. RFC 9112 2.2 lets a server ignore empty lines before a
request line: herd does (up to 64 bytes), h11 rejects them; the rest of such
a head is held to h11's verdict. And h11 as a client refuses a 101 its
request did not ask for; herd's response parser reads a 101 head, and
models/proxy_conn.c refuses it right after (herd never forwards Upgrade).
One reading differs on purpose: for an absolute-form target herd's Host is
the target's authority (RFC 9112 3.2.2), so h11's Host is compared as that.

Reproduce a failure with the seed it prints: HERD_DIFF_SEED=N make diff.
"""

import random
import re
import time

import pytest

from gen_chunked import H11_REJECTS, HERD_WAS_LAXER, NEXT, chunked_bodies
from gen_requests import request_heads
from gen_responses import response_heads
from seed import diff_cases, diff_seed
from verdicts import h11_chunked, h11_request, h11_response, herd_verdicts

LEADING_EMPTY_LINES = re.compile(rb"^(?:\r?\n)+")


def h11_request_allowing_empty_lines(h11, data):
    lead = LEADING_EMPTY_LINES.match(data)
    if not lead or lead.end() > 64:
        return h11_request(h11, data)
    v = h11_request(h11, data[lead.end():])
    return v._replace(taken=v.taken + lead.end()) if v.kind == "accept" else v


def end_to_end(headers):
    # h11 folds equal Content-Length headers into one and lower-cases
    # Transfer-Encoding's value: both are compared as framing instead.
    return [(n, v) for n, v in headers
            if n.lower() not in (b"content-length", b"transfer-encoding")]


ABSOLUTE_FORM = re.compile(rb"(?i)https?://([^/?]*)")


def as_origin_server(fields):
    """h11's headers as herd should read them: for an absolute-form target,
    the Host field is the target's authority (RFC 9112 3.2.2), whatever the
    client sent as Host; h11 leaves that to its user."""
    absolute = ABSOLUTE_FORM.match(fields["target"])
    if not absolute:
        return fields["headers"]
    return [(n, absolute.group(1) if n.lower() == b"host" else v) for n, v in fields["headers"]]


def field_differences(kind, herd, ref):
    a, b = herd.fields, ref.fields
    if kind == "C":
        keys = ["data"]
    elif kind == "H":
        b = dict(b, headers=as_origin_server(b))
        keys = ["method", "target", "minor", "chunked", "content_length"]
        if b["close"] and not a["close"]:
            return "h11 reads Connection: close, herd does not"
    else:
        keys = ["status", "reason", "minor", "chunked", "content_length"]
    for k in keys:
        if a[k] != b[k]:
            return "%s: herd %r, h11 %r" % (k, a[k], b[k])
    if kind != "C" and end_to_end(a["headers"]) != end_to_end(b["headers"]):
        return "headers: herd %r, h11 %r" % (a["headers"], b["headers"])
    return None


def difference(kind, herd, ref):
    """Why herd's verdict is not h11's or stricter, or None."""
    if herd.kind == "split-mismatch":
        return "herd's verdict depends on where the input is cut (%s)" % herd.fields["why"]
    if herd.kind == "incomplete" and ref.kind == "accept":
        return "herd waits for more bytes, h11 has a whole message"
    if herd.kind != "accept":
        return None
    if ref.kind != "accept":
        if kind == "R" and herd.fields["status"] == 101 and ref.kind == "reject":
            return None  # the second allowance above
        return "herd accepts, h11 says %s" % ref.kind
    if herd.taken != ref.taken:
        return "message ends at byte %d for herd, %d for h11" % (herd.taken, ref.taken)
    return field_differences(kind, herd, ref)


def run_differential(kind, cases, ref_fn, driver):
    t0 = time.monotonic()
    herd = herd_verdicts(driver, kind, cases)
    ref = [ref_fn(c) for c in cases]
    counts, failures = {}, []
    for i, (case, h, r) in enumerate(zip(cases, herd, ref)):
        key = (h.kind, r.kind)
        counts[key] = counts.get(key, 0) + 1
        why = difference(kind, h, r)
        if why:
            failures.append("case %d: %s\n    %r" % (i, why, case[:400]))
    seconds = time.monotonic() - t0
    print("%s: %d cases in %.1fs, seed %d; (herd, h11) verdicts: %s"
          % (kind, len(cases), seconds, diff_seed(), sorted(counts.items())))
    assert not failures, "%d of %d cases differ (HERD_DIFF_SEED=%d):\n%s" % (
        len(failures), len(cases), diff_seed(), "\n".join(failures[:15]))
    return counts


def rng_for(kind):
    # one stream per kind, so a new generator in one kind leaves the others' cases alone
    return random.Random("%d-%s" % (diff_seed(), kind))


def assert_both_ways(counts, n):
    """The run means something only if many cases land on each side."""
    both_accept = counts.get(("accept", "accept"), 0)
    both_reject = counts.get(("reject", "reject"), 0)
    assert both_accept > n // 5, "only %d of %d cases accepted by both" % (both_accept, n)
    assert both_reject > n // 10, "only %d of %d cases rejected by both" % (both_reject, n)


def test_request_heads(reference, verdict_bin):
    n = diff_cases()
    cases = request_heads(rng_for("H"), n)
    counts = run_differential(
        "H", cases, lambda c: h11_request_allowing_empty_lines(reference, c), verdict_bin)
    assert_both_ways(counts, n)


def test_chunked_bodies(reference, verdict_bin):
    n = diff_cases()
    cases = chunked_bodies(rng_for("C"), n)
    counts = run_differential("C", cases, lambda c: h11_chunked(reference, c), verdict_bin)
    assert_both_ways(counts, n)


def test_response_heads(reference, verdict_bin):
    n = diff_cases() // 2
    cases = response_heads(rng_for("R"), n)
    counts = run_differential("R", cases, lambda c: h11_response(reference, c), verdict_bin)
    assert_both_ways(counts, n)


@pytest.mark.parametrize("name", sorted(H11_REJECTS) + sorted(HERD_WAS_LAXER))
def test_known_chunked_forms_rejected_by_both(reference, verdict_bin, name):
    body = (H11_REJECTS.get(name) or HERD_WAS_LAXER[name]) + NEXT
    assert h11_chunked(reference, body).kind == "reject", "h11 %s no longer rejects it" % (
        reference.__version__)
    assert herd_verdicts(verdict_bin, "C", [body])[0].kind == "reject"


def test_valid_body_accepted_by_both(reference, verdict_bin):
    """The comparison itself works: a plain body is data for both."""
    body = b"5\r\nhello\r\n6;a=\"b\"\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
    herd = herd_verdicts(verdict_bin, "C", [body + NEXT])[0]
    ref = h11_chunked(reference, body + NEXT)
    assert herd.kind == ref.kind == "accept"
    assert herd.taken == ref.taken == len(body)
    assert herd.fields["data"] == ref.fields["data"] == b"hello world"

"""Building blocks for generated HTTP messages: a message is built from
fields that are mostly valid, then some of its pieces are swapped for the
forms parsers disagree on (line ends, whitespace, control bytes, obs-text),
and some whole messages get a few byte-level edits on top.

Every choice goes through one random.Random, so a seed replays a run.
"""

TCHARS = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# Line ends: mostly right, else the forms smuggling lives on.
GOOD_EOL = b"\r\n"
BAD_EOLS = [b"\n", b"\r", b"\r\r\n", b"\n\r", b" \r\n", b"\t\r\n", b"\r \n", b""]

# Bytes worth putting anywhere: delimiters, whitespace, controls, obs-text.
SPECIAL = [b"\x00", b"\r", b"\n", b"\t", b" ", b"\x7f", b"\x80", b"\xff", b"\x01",
           b"\x0b", b"\x0c", b"\x1f", b":", b";", b",", b"=", b'"', b"\\", b"#", b"?",
           b"/", b"@", b"(", b"{", b"\r\n", b"\r\n ", b"\r\n\t", b"\n\n", b"\r\n\r\n"]


def chance(rng, p):
    return rng.random() < p


def token(rng, lo=1, hi=12):
    return bytes(rng.choice(TCHARS) for _ in range(rng.randint(lo, hi)))


def value(rng, hi=24):
    """A field value: visible bytes, inner spaces and tabs, some obs-text."""
    out = bytearray()
    for _ in range(rng.randint(0, hi)):
        r = rng.random()
        if r < 0.8:
            out.append(rng.randint(0x21, 0x7e))
        elif r < 0.9:
            out += rng.choice([b" ", b"\t"])
        else:
            out.append(rng.randint(0x80, 0xff))
    return bytes(out)


def eol(rng, p_bad=0.06):
    return rng.choice(BAD_EOLS) if chance(rng, p_bad) else GOOD_EOL


def poke(rng, s, p=0.5):
    """s with one special byte inserted or put in place of one of its bytes
    (with probability p; else s as it is)."""
    if not chance(rng, p):
        return s
    i = rng.randint(0, len(s))
    sp = rng.choice(SPECIAL)
    if chance(rng, 0.5) and i < len(s):
        return s[:i] + sp + s[i + 1:]
    return s[:i] + sp + s[i:]


def mutate_bytes(rng, data, edits):
    """A few byte-level edits: insert, replace, delete, duplicate a slice."""
    data = bytearray(data)
    for _ in range(edits):
        if not data:
            data += rng.choice(SPECIAL)
            continue
        i = rng.randrange(len(data))
        op = rng.randrange(5)
        if op == 0:
            data[i:i] = rng.choice(SPECIAL)
        elif op == 1:
            data[i:i + 1] = rng.choice(SPECIAL)
        elif op == 2:
            del data[i:i + rng.randint(1, 3)]
        elif op == 3:
            j = min(len(data), i + rng.randint(1, 16))
            data[j:j] = data[i:j]
        else:
            data[i] = rng.randrange(256)
    return bytes(data)


def pick(rng, weighted):
    """One item of [(weight, item)...]."""
    total = sum(w for w, _ in weighted)
    r = rng.uniform(0, total)
    for w, item in weighted:
        r -= w
        if r <= 0:
            return item
    return weighted[-1][1]

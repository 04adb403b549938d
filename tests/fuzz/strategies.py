"""Hypothesis strategies for what a hostile personal agent can send the endpoint.

Valid-ish values dominate so each request gets past the early refusals often enough to
reach the later checks; broken ones (wrong types, bad ids, garbage, forged proofs and
tokens) are mixed in everywhere.

``hostile`` (the default) adds the input classes that once answered 500: ``NaN``/
``Infinity``, U+0000 and lone surrogates, JSON nested ~1,000 deep, a non-ASCII proof
``ath`` and non-finite token and proof times. Without it the values are what PostgreSQL's
``jsonb`` can hold (for rows written directly, as the desk campaign does).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

ID_ALPHABET = string.ascii_letters + string.digits + "_-"

#: Strings that break naive storage and encoding (the wire refuses them).
HOSTILE_CHARACTERS = ["\x00", "\ud800", "\udfff"]


def mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any], tenths: int = 6):
    """``usual`` about ``tenths``/10 of the time, else ``other``."""
    return st.integers(0, 9).flatmap(lambda n: usual if n < tenths else other)


valid_ids = st.text(ID_ALPHABET, min_size=1, max_size=40) | st.text(
    ID_ALPHABET, min_size=250, max_size=256
)
bad_ids = st.one_of(
    st.just(""),
    st.text(ID_ALPHABET, min_size=257, max_size=400),
    st.text(min_size=1, max_size=20).filter(lambda s: any(c not in ID_ALPHABET for c in s)),
)


def texts(hostile: bool = True, max_size: int = 40) -> st.SearchStrategy[str]:
    # UTF-8-encodable (no lone surrogates) and no U+0000, unless hostile.
    plain = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=max_size)
    if not hostile:
        return plain
    odd = st.lists(
        st.sampled_from(HOSTILE_CHARACTERS) | st.text(max_size=5), min_size=1, max_size=6
    ).map("".join)
    return plain | odd


def json_values(hostile: bool = True) -> st.SearchStrategy[Any]:
    leaves = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=10**30, max_value=10**400)
        | st.floats(allow_nan=hostile, allow_infinity=hostile)
        | texts(hostile)
    )
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(texts(hostile, 12), children, max_size=4)
        ),
        max_leaves=12,
    )


def objects(hostile: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(texts(hostile, 12), json_values(hostile), max_size=5)


def messages(hostile: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """A wire message: each field usually right, sometimes any JSON, sometimes absent."""
    anything = json_values(hostile)
    valid_context = st.fixed_dictionaries(
        {},
        optional={
            "locale": st.sampled_from(["en", "de-CH"]) | anything,
            "time_zone": st.sampled_from(["Europe/Zurich", "UTC"]) | anything,
            "user_available": st.booleans() | anything,
            "extra": anything,
        },
    )
    components = st.lists(
        st.fixed_dictionaries(
            {"name": texts(hostile, 12)}, optional={"props": anything, "fallback_text": anything}
        )
        | anything,
        max_size=3,
    )
    data = st.fixed_dictionaries(
        {}, optional={"components": components | anything, "actions": anything}
    ) | objects(hostile)
    return st.fixed_dictionaries(
        {},
        optional={
            "id": valid_ids | valid_ids | bad_ids | anything,
            "sender": st.sampled_from(["agent", "human"]) | anything,
            "text": texts(hostile, 200) | anything,
            "data": data | data | anything,
            "context": valid_context | valid_context | anything,
            "unknown_field": anything,
        },
    )


def nested(depth: int) -> bytes:
    """A message whose data nests ``depth`` arrays deep (built as text: no recursion)."""
    return (
        b'{"message": {"id": "deep", "sender": "agent", "data": {"d": '
        + b"[" * depth
        + b"]" * depth
        + b"}}}"
    )


def valid_messages(hostile: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Messages the wire accepts (their text and data still any Unicode and any JSON)."""
    return st.fixed_dictionaries(
        {
            "id": st.text(ID_ALPHABET, min_size=1, max_size=40),
            "sender": st.sampled_from(["agent", "human"]),
            "text": texts(hostile, 200).filter(bool),
        },
        optional={
            "data": objects(hostile),
            "context": st.fixed_dictionaries(
                {}, optional={"locale": st.text(max_size=10), "user_available": st.booleans()}
            ),
        },
    )


def bodies(hostile: bool = True) -> st.SearchStrategy[bytes]:
    """Request bodies: wire messages mostly, any JSON, and bytes that are not JSON at all."""
    accepted = st.fixed_dictionaries({"message": valid_messages(hostile)}).map(
        lambda value: json.dumps(value, allow_nan=True).encode()
    )
    wire = st.fixed_dictionaries(
        {"message": messages(hostile) | messages(hostile) | json_values(hostile)},
        optional={"parent_conversation_id": valid_ids | bad_ids | json_values(hostile)},
    )
    encoded = (wire | json_values(hostile)).map(
        lambda value: json.dumps(value, allow_nan=True).encode()
    )
    depth = st.integers(min_value=1, max_value=1200 if hostile else 400)
    return mostly(
        accepted,
        st.one_of(
            encoded,
            encoded,
            encoded,
            st.just(b""),
            st.binary(max_size=200),
            st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
            depth.map(nested),
            st.sampled_from([b"{", b"[]", b'{"message": {}}', b"null", b'"x"', b"\xef\xbb\xbf{}"]),
        ),
        tenths=4,
    )


#: Header values: printable Latin-1 (what HTTP/1.1 can carry), short and long.
header_values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=60,
).map(lambda s: s.strip(" ").encode("latin-1"))  # no padding: HTTP strips it


def extra_headers() -> st.SearchStrategy[list[tuple[bytes, bytes]]]:
    """The headers a client may send besides its credentials."""
    accept = (
        st.sampled_from([b"application/json", b"*/*", b"text/event-stream", b"text/html", b""])
        | header_values
    )
    content_type = (
        st.sampled_from(
            [b"application/json", b"text/plain", b"application/x-www-form-urlencoded", b""]
        )
        | header_values
    )
    return mostly(
        st.just([]),
        st.fixed_dictionaries(
            {},
            optional={
                b"accept": accept,
                b"content-type": content_type,
                b"x-request-id": header_values | valid_ids.map(str.encode),
                b"last-event-id": header_values | valid_ids.map(str.encode),
                b"x-forwarded-proto": st.sampled_from([b"https", b"http", b"gopher"]),
                b"x-forwarded-host": header_values,
            },
        ).map(lambda headers: list(headers.items())),
        tenths=3,
    )


def waits() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["0", "0.01", "0.05", "30", "31", "-1", "nan", "inf", "1e309", "", "x"]),
        st.text(max_size=8),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.text("0123456789", min_size=4000, max_size=5000),
    )


def cursors(valid: list[str]) -> st.SearchStrategy[str]:
    """Cursors: issued ones (when there are), plausible forgeries, and garbage."""
    forged = st.builds(
        lambda key, seq: f"evt_{key}_{seq}",
        st.text(ID_ALPHABET, max_size=30),
        st.integers(min_value=-5, max_value=10**25) | st.text("0123456789٣²", max_size=30),
    )
    base = st.one_of(forged, valid_ids, bad_ids, st.text(max_size=30))
    return st.sampled_from(valid) | base if valid else base


@dataclass
class Credentials:
    """How a request authenticates: a kind and the forged parts it needs."""

    kind: str
    proof_claims: dict[str, Any] = field(default_factory=dict)
    proof_header: dict[str, Any] = field(default_factory=dict)
    token_claims: dict[str, Any] = field(default_factory=dict)
    token_header: dict[str, Any] = field(default_factory=dict)
    garbage: bytes = b""
    drop: tuple[str, ...] = ()


def credentials(hostile: bool = True) -> st.SearchStrategy[Credentials]:
    """Valid credentials half the time; otherwise one of the forgeries a verifier meets."""
    anything = json_values(hostile)
    times = st.integers(min_value=-(10**12), max_value=10**12) | anything
    if hostile:
        times = times | st.sampled_from([float("nan"), float("inf"), -float("inf")])
    ath = st.text(string.ascii_letters, max_size=43) | anything
    if hostile:
        ath = ath | st.text(min_size=1, max_size=10).map(lambda s: s + "é")
    proof_claims = st.fixed_dictionaries(
        {},
        optional={
            "htm": st.sampled_from(["GET", "POST", "PUT"]) | anything,
            "htu": st.sampled_from(["https://evil.example/poppy/conversations"]) | anything,
            "iat": times,
            "jti": st.text(max_size=20) | anything,
            "ath": ath,
            "nonce": anything,
        },
    )
    proof_header = st.fixed_dictionaries(
        {},
        optional={
            "typ": st.sampled_from(["JWT", "dpop+jwt", ""]) | anything,
            "jwk": st.sampled_from(["other", "garbage"]).map(lambda k: {"kty": k}) | anything,
            "kid": st.text(max_size=10) | st.text(min_size=5000, max_size=5000),
            "alg": st.just("none"),
        },
    )
    token_claims = st.fixed_dictionaries(
        {},
        optional={
            "iss": st.text(max_size=20) | anything,
            "aud": st.text(max_size=20) | anything,
            "exp": times,
            "nbf": times,
            "iat": times,
            "sub": anything,
            "client_id": anything,
            "cnf": anything,
            "scope": anything,
            "acct": anything,
        },
    )
    token_header = st.fixed_dictionaries(
        {},
        optional={
            "kid": st.text(max_size=10) | st.text(min_size=5000, max_size=5000),
            "typ": st.sampled_from(["dpop+jwt", "at+jwt"]) | anything,
        },
    )
    garbage = st.binary(max_size=100) | st.text(
        string.ascii_letters + string.digits + "-_.", max_size=300
    ).map(str.encode)
    return mostly(
        st.just(Credentials("valid")),
        st.one_of(
            st.just(Credentials("none")),
            st.just(Credentials("bearer")),
            st.just(Credentials("two_proofs")),
            st.builds(Credentials, st.just("garbage_token"), garbage=garbage),
            st.builds(Credentials, st.just("garbage_proof"), garbage=garbage),
            st.builds(
                Credentials,
                st.just("forged_proof"),
                proof_claims=proof_claims,
                proof_header=proof_header,
                drop=st.lists(st.sampled_from(["htm", "htu", "iat", "jti", "ath"]), max_size=2).map(
                    tuple
                ),
            ),
            st.builds(
                Credentials,
                st.just("forged_token"),
                token_claims=token_claims,
                token_header=token_header,
            ),
            st.builds(Credentials, st.just("other_issuer_key"), token_header=token_header),
        ),
    )

"""The lexicon's fingerprint recomputed (issue 14's mutation campaign).

``test_lexicon.py`` checks that the fingerprint follows the word lists (stable
under their order, changed by another word); this pins its value: the
BLAKE2b-128 digest of the canonical encoding of the domain tag
``grid.lexicon.v1``, the grammar's terminals (name, pattern) and the sorted word
list of each category, so a lexicon of another version or domain never shares a
fingerprint (and a cache entry) with this one.
"""

from __future__ import annotations

import hashlib

from toy import CRUD

from grid_core.dfa import build_union_dfa
from grid_core.fingerprint import canonical
from grid_core.lexicon import build_lexicon


def test_the_fingerprint_is_the_tagged_digest() -> None:
    dfa = build_union_dfa([(t.name, t.pattern) for t in CRUD.terminals])
    lexicon = build_lexicon(CRUD, dfa, {"TABLE_NAME": [b"orders", b"employees"]})
    encoded = canonical(
        (
            "grid.lexicon.v1",
            [(t.name, t.pattern) for t in CRUD.terminals],
            {"TABLE_NAME": [b"employees", b"orders"]},
        )
    )
    assert lexicon.fingerprint == hashlib.blake2b(encoded, digest_size=16).hexdigest()

"""A seeded corpus of CRUD-grammar statements and byte-level mutations of it.

The generator follows ``grammars/crud.lark`` rule by rule. Identifiers are drawn
from a pool that includes keyword look-alikes (``selection``, ``fromage``,
``set_id``) so that maximal munch and the contextual pick are exercised, and the
separators include newlines, tabs and ``--`` comments.
"""

from __future__ import annotations

import random
from pathlib import Path

GRAMMARS = Path(__file__).parent / "grammars"

IDENTS = [
    "employees",
    "employees_public",
    "orders",
    "salaries",
    "a",
    "b_1",
    "_x",
    "id",
    "name",
    "selection",
    "fromage",
    "wherever",
    "and_then",
    "set_id",
    "values_",
    "into2",
    "deleted",
    "update_at",
    "order_total",
    "o",
]
HANDWRITTEN = [
    "select * from employees;",
    "select*from employees;",
    "select name,id from employees where id=1;",
    "select name from employees where name = 'O''Brien';",
    "select name from employees where name = '';",
    "select id from orders where id >= 10 and id <> 3;",
    "select id from orders where id<=10.5;",
    "select selection from fromage where wherever = 1;",
    "select a from b --trailing comment\n;",
    "-- leading comment\nselect a from b;",
    "insert into orders (id, name) values (1, 'x');",
    "insert into orders(id)values(1);",
    "update employees set name = 'y', id = 2 where id = 1;",
    "delete from orders;",
    "delete from orders where id = 1 and name = 'z';",
    "select\ta\nfrom\tb\n;",
    "update set_id set set_id = 1;",
    "select into2 from values_;",
]


def _ws(rng: random.Random) -> str:
    return rng.choice([" ", " ", " ", "  ", "\n", "\t", " -- note\n", "\n  "])


def _value(rng: random.Random) -> str:
    if rng.random() < 0.5:
        n = str(rng.randint(0, 999))
        return n + (f".{rng.randint(0, 99)}" if rng.random() < 0.2 else "")
    body = rng.choice(["", "x", "abc", "it''s", "a b", "--no", "select"])
    return f"'{body}'"


def _where(rng: random.Random) -> list[str]:
    out = ["where"]
    for i in range(rng.randint(1, 3)):
        if i:
            out.append("and")
        out += [rng.choice(IDENTS), rng.choice(["=", "<", ">", "<=", ">=", "<>"]), _value(rng)]
    return out


def statement(rng: random.Random) -> str:
    """One random statement of crud.lark, lexemes joined by random separators."""
    kind = rng.choice(["select", "select", "insert", "update", "delete"])
    cols = [rng.choice(IDENTS) for _ in range(rng.randint(1, 3))]
    if kind == "select":
        parts = ["select", *(["*"] if rng.random() < 0.3 else " , ".join(cols).split())]
        parts += ["from", rng.choice(IDENTS)] + (_where(rng) if rng.random() < 0.6 else [])
    elif kind == "insert":
        vals = " , ".join(_value(rng) for _ in cols).split(" ")
        parts = ["insert", "into", rng.choice(IDENTS), "(", *" , ".join(cols).split(), ")"]
        parts += ["values", "(", *vals, ")"]
    elif kind == "update":
        parts = ["update", rng.choice(IDENTS), "set"]
        for i, c in enumerate(cols):
            parts += ([","] if i else []) + [c, "=", _value(rng)]
        parts += _where(rng) if rng.random() < 0.6 else []
    else:
        parts = ["delete", "from", rng.choice(IDENTS)] + (_where(rng) if rng.random() < 0.6 else [])
    out = parts[0]
    for p in [*parts[1:], ";"]:
        needs_space = (out[-1].isalnum() or out[-1] in "_'") and (p[0].isalnum() or p[0] in "_'")
        out += _ws(rng) if needs_space or rng.random() < 0.5 else ""
        out += p
    return out


def corpus(n: int = 320, seed: int = 20261129) -> list[bytes]:
    """The handwritten statements followed by ``n`` generated ones."""
    rng = random.Random(seed)
    return [s.encode() for s in HANDWRITTEN] + [statement(rng).encode() for _ in range(n)]


MUTATION_BYTES = b" \n'();,=<>*-_.0123456789abcdefghijklmnopqrstuvwxyz\xc3\xa9"


def mutate(s: bytes, rng: random.Random) -> bytes:
    """One byte insertion, deletion or adjacent swap at a random position."""
    i = rng.randrange(len(s))
    op = rng.choice(["insert", "delete", "swap"])
    if op == "insert":
        return s[:i] + bytes([rng.choice(MUTATION_BYTES)]) + s[i:]
    if op == "delete":
        return s[:i] + s[i + 1 :]
    j = min(i + 1, len(s) - 1)
    return s[:i] + s[j : j + 1] + s[i : i + 1] + s[j + 1 :] if j > i else s


def mutations(sentences: list[bytes], n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    return [mutate(rng.choice(sentences), rng) for _ in range(n)]

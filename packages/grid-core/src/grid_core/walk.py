"""The trie walk: the exact mask of a configuration, split into CI and CD parts.

``walk_from(node, pending, A, include_self)`` runs a depth-first search over the
token trie below ``node`` with the scan state of the remainder in every frame
(DESIGN.md section 6). At each trie node the byte on its edge is scanned:

- the automaton lives on: the token ending here is admitted iff the new
  remainder is live under A; the subtree is entered iff the remainder is live
  or its last accepted lexeme has a viable pick (it could still be emitted by a
  later death). Otherwise no extension is viable and the subtree is skipped
  whole: rejection is monotone.
- the byte kills the automaton: the last accepted lexeme is emitted. No
  accepted prefix, or no viable pick, rejects the subtree. An ignored pick
  (whitespace, comment) leaves the stack unchanged, so the walk continues
  inline on the requeued tail. Any other pick changes the stack: the verdict of
  every token in the subtree depends on the stack after the shift, not on
  (r, A) alone. The subtree becomes one **CD entry** ``(node, terminal, tail)``.

Everything else is **CI** (context-independent): decided by (r, A) and the
lexicon alone, hence cacheable. A CD entry is decided against the live stack:
shift its terminal, take the new allowed set A', and walk the entry's subtree
again from its tail (``walk_from(node, tail, A', True)``), which may itself
yield CI nodes and further CD entries one shift deeper. CD entries that share a
terminal share that shift: they form one verdict class.

Results are trie node indices (every id of the node's alias class is admitted).
"""

from __future__ import annotations

from grid_core.lexer import START, Scanner, ScanState
from grid_core.lexicon import NO_NODE
from grid_core.trie import TokenTrie

CDEntry = tuple[int, int, bytes]
"""(trie node, emitted terminal, requeued tail bytes)."""


def rescan(
    scanner: Scanner, data: bytes, allowed: int
) -> tuple[ScanState, bytes] | tuple[int, bytes] | None:
    """Scan ``data`` from the start state under a fixed allowed set.

    Returns ``(scan state, remainder)`` when it stays on the stack it started
    with, ``(terminal, tail)`` at the first emission that would shift, and None
    when an emission fails.
    """
    scan: ScanState = START
    start, i = 0, 0
    while i < len(data):
        nxt = scanner.step(scan, i + 1 - start, data[i])
        if nxt is not None:
            scan = nxt
            i += 1
            continue
        la_len = scan[2]
        if la_len == 0:
            return None
        t = scanner.pick(scan[3], allowed)
        if t < 0:
            return None
        if not scanner.ignored >> t & 1:
            return t, data[start + la_len :]
        start += la_len
        i, scan = start, START
    return scan, data[start:]


def walk_from(
    scanner: Scanner, trie: TokenTrie, node: int, pending: bytes, allowed: int, include_self: bool
) -> tuple[list[int], list[CDEntry]]:
    """CI nodes and CD entries of the subtree at ``node``, whose path ends ``pending``.

    ``pending`` is the remainder as it stands at ``node`` (for the root: the
    configuration's remainder). With ``include_self`` the token at ``node`` is
    judged too (the root has none).
    """
    ci: list[int] = []
    cd: list[CDEntry] = []
    first = rescan(scanner, pending, allowed)
    if first is None:
        return ci, cd
    if isinstance(first[0], int):
        cd.append((node, first[0], first[1]))
        return ci, cd
    scan0, pref0 = first
    assert isinstance(scan0, tuple)

    edge, token, size = trie.edge, trie.token, trie.size
    trans, accept_tab, live_tab = scanner.dfa.trans, scanner.dfa.accept, scanner.dfa.live
    lexicon = scanner.lexicon
    cats = lexicon.categories
    kids, prefix_cats = lexicon.children, lexicon.prefix_cats
    ok = allowed | scanner.ignored
    ok_plain, ok_lex = ok & ~cats, ok & cats
    ignored = scanner.ignored
    candidates, pick = scanner.candidates, scanner.pick

    def live(q: int, ln: int) -> bool:
        return bool(live_tab[q] & ok_plain) or (ln != NO_NODE and bool(prefix_cats[ln] & ok_lex))

    q0, ln0, ll0, lc0 = scan0
    if pref0 and not live(q0, ln0) and not (ll0 and pick(lc0, allowed) >= 0):
        return ci, cd
    if include_self and token[node] >= 0 and (not pref0 or live(q0, ln0)):
        ci.append(node)

    path = bytearray(256)
    # A frame is a trie node whose children are being visited: (end of its subtree,
    # scan state after it, pending prefix, depth where the prefix ends, depth of
    # its children). ``cursor`` holds each frame's next child.
    Frame = tuple[int, int, int, int, int, bytes, int, int]
    frames: list[Frame] = [(node + size[node], q0, ln0, ll0, lc0, pref0, 0, 0)]
    cursor = [node + 1]
    while frames:
        c = cursor[-1]
        end, q, ln, ll, lc, pref, d0, d = frames[-1]
        if c >= end:
            frames.pop()
            cursor.pop()
            continue
        cursor[-1] = c + size[c]
        b = edge[c]
        if d >= len(path):
            path.extend(bytes(len(path)))
        path[d] = b
        q2 = trans[q * 256 + b]
        if q2 >= 0:
            ln2 = kids[ln].get(b, NO_NODE) if ln != NO_NODE else NO_NODE
            acc = accept_tab[q2]
            if acc:
                ll2, lc2 = len(pref) + d - d0 + 1, candidates(acc, ln2)
            else:
                ll2, lc2 = ll, lc
            if live(q2, ln2):
                if token[c] >= 0:
                    ci.append(c)
            elif not (ll2 and pick(lc2, allowed) >= 0):
                continue
            if size[c] > 1:
                frames.append((c + size[c], q2, ln2, ll2, lc2, pref, d0, d + 1))
                cursor.append(c + 1)
            continue
        # The byte kills the automaton: emit the last accepted lexeme.
        if not ll:
            continue
        t = pick(lc, allowed)
        if t < 0:
            continue
        tail = (pref + bytes(path[d0 : d + 1]))[ll:]
        if not ignored >> t & 1:
            cd.append((c, t, tail))
            continue
        again = rescan(scanner, tail, allowed)
        if again is None:
            continue
        if isinstance(again[0], int):
            cd.append((c, again[0], again[1]))
            continue
        scan2, pref2 = again
        assert isinstance(scan2, tuple)
        q2, ln2, ll2, lc2 = scan2
        if live(q2, ln2):
            if token[c] >= 0:
                ci.append(c)
        elif not (ll2 and pick(lc2, allowed) >= 0):
            continue
        if size[c] > 1:
            frames.append((c + size[c], q2, ln2, ll2, lc2, pref2, d + 1, d + 1))
            cursor.append(c + 1)
    return ci, cd

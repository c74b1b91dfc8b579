//! The token trie: every token spelling of a vocabulary in one DFS array.
//!
//! Mirrors `grid_core.trie.TokenTrie` (DESIGN.md section 6): node 0 is the root
//! (the empty spelling); the subtree of node `i` is `i .. i + size[i]`, its
//! children `c0 = i + 1, c1 = c0 + size[c0], ...` sorted by edge byte, so a
//! rejected subtree is skipped whole by jumping `size` nodes ahead. Node
//! records are packed ([`TrieNode`]); the alias classes (every id spelled at a
//! node, ascending) and the vocabulary's EOS ids ride along, since a bitmask
//! fill needs them; so do the spellings (`token_bytes(id)`, read off the trie
//! paths), since a session's accept needs them. A special id is exactly an id
//! the trie does not spell. One [`Trie`] per tokenizer, shared (`Arc`) by every
//! grammar and projection; validated once, so walks never index out of bounds.

use crate::error::{bad_table, Result};

/// A token trie as grid-core's `TokenTrie` hands it over, plus the vocabulary
/// facts a bitmask needs (`n_vocab`, the EOS ids).
#[derive(Clone, Debug, Default)]
pub struct RawTrie {
    pub edge: Vec<u8>,
    pub token: Vec<i32>,
    pub size: Vec<i32>,
    pub alias_offset: Vec<i32>,
    pub alias_ids: Vec<i32>,
    pub n_vocab: usize,
    pub eos_ids: Vec<i32>,
}

/// Subtrees of at least this many nodes carry a [`Wide`] record.
pub const WIDE_MIN: u32 = 8;

/// One trie node, packed: what the walk reads at a node is one record, so a
/// cache line holds several whole nodes (DESIGN.md section 6: "one
/// DFS-contiguous array of packed nodes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrieNode {
    /// Nodes in the subtree, this one included.
    pub size: u32,
    /// Smallest token id spelled here, or -1.
    pub token: i32,
    /// Byte on the edge into this node (0 for the root).
    pub edge: u8,
    /// With `size >= WIDE_MIN`: the index of its [`Wide`] record, 24 bits
    /// little-endian (in what would be padding).
    wide: [u8; 3],
}

/// What a walk asks of a large subtree before walking it: the bytes on its
/// edges, and whether its paths are valid UTF-8 ([`Trie::wide`]). Kept apart
/// from the nodes, for the subtrees of at least [`WIDE_MIN`] nodes only (one
/// in seven nodes of a 150k vocabulary), so the records a walk reads stay
/// few and close together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wide {
    /// The bytes on the edges of the subtree, its own edge included (a
    /// 256-bit set).
    pub bytes: [u64; 4],
    /// Every path of the subtree, read from a UTF-8 character boundary (its
    /// own edge first), is a prefix of valid UTF-8.
    pub utf8: bool,
    /// Bytes on the longest path down from the node, its own edge included
    /// (a leaf: 1), saturating at `u16::MAX`.
    pub height: u16,
}

/// The packed, validated token trie (see `grid_core.trie` for the layout).
#[derive(Clone, Debug)]
pub struct Trie {
    pub(crate) nodes: Vec<TrieNode>,
    pub(crate) alias_offset: Vec<u32>,
    pub(crate) alias_ids: Vec<u32>,
    pub(crate) n_vocab: usize,
    pub(crate) eos_ids: Vec<u32>,
    pub(crate) max_depth: usize,
    /// `spellings[spell_at[i]..spell_at[i + 1]]` is `token_bytes(i)` (empty
    /// for a special id).
    spell_at: Vec<u32>,
    spellings: Vec<u8>,
    /// The [`Wide`] records of the subtrees of at least [`WIDE_MIN`] nodes, in
    /// preorder; lets a walk take a subtree whole when no byte in it can
    /// leave the scanner's state.
    wide: Vec<Wide>,
    /// The nodes that spell a token, ascending, and per node `i` how many of
    /// them precede it (`n + 1` entries), so the token nodes of a subtree
    /// are one slice ([`Trie::token_nodes`]).
    token_nodes: Vec<u32>,
    tokens_before: Vec<u32>,
}

impl RawTrie {
    /// Pack a vocabulary's spellings into the DFS layout, exactly as
    /// grid-core's `build_trie` does (same arrays, bit for bit): every id whose
    /// spelling is non-empty and which is not in `special` is in the trie,
    /// once; the distinct spellings sorted bytewise are the spelling-bearing
    /// nodes in preorder, and one pass with a stack of open ancestors emits
    /// the inner nodes and closes each subtree when the next spelling leaves
    /// it. `eos_ids` is left empty (the vocabulary's, not the trie's).
    pub fn pack(spellings: &[&[u8]], special: &[bool]) -> Self {
        let n_vocab = spellings.len();
        // (spelling, id), sorted: spellings bytewise, the ids of one ascending.
        let mut order: Vec<(&[u8], u32)> = spellings
            .iter()
            .enumerate()
            .filter(|&(t, b)| !b.is_empty() && !special.get(t).copied().unwrap_or(false))
            .map(|(t, &b)| (b, t as u32))
            .collect();
        order.sort_unstable();
        let mut raw = RawTrie {
            edge: vec![0],
            token: vec![-1],
            size: vec![0],
            alias_offset: vec![0],
            alias_ids: Vec::with_capacity(order.len()),
            n_vocab,
            eos_ids: Vec::new(),
        };
        let mut stack: Vec<usize> = vec![0];
        let mut prev: &[u8] = b"";
        let mut i = 0;
        while i < order.len() {
            let spelling = order[i].0;
            let common = prev
                .iter()
                .zip(spelling)
                .take_while(|(a, b)| a == b)
                .count();
            while stack.len() > common + 1 {
                let node = stack.pop().expect("the root stays on the stack");
                raw.size[node] = (raw.edge.len() - node) as i32;
            }
            for &byte in &spelling[common..] {
                stack.push(raw.edge.len());
                raw.edge.push(byte);
                raw.token.push(-1);
                raw.size.push(0);
                raw.alias_offset.push(raw.alias_ids.len() as i32);
            }
            *raw.token.last_mut().expect("a spelling is not empty") = order[i].1 as i32;
            while i < order.len() && order[i].0 == spelling {
                raw.alias_ids.push(order[i].1 as i32);
                i += 1;
            }
            prev = spelling;
        }
        while let Some(node) = stack.pop() {
            raw.size[node] = (raw.edge.len() - node) as i32;
        }
        raw.alias_offset.push(raw.alias_ids.len() as i32);
        raw
    }
}

impl Trie {
    /// Validate and take over a raw trie: shapes, the preorder tiling of every
    /// subtree, sorted children, alias classes consistent with `token`.
    pub fn new(raw: RawTrie) -> Result<Self> {
        const T: &str = "trie";
        let n = raw.edge.len();
        if n == 0 {
            return Err(bad_table(T, "no root node"));
        }
        if raw.token.len() != n || raw.size.len() != n {
            return Err(bad_table(
                T,
                format!(
                    "edge/token/size lengths differ: {}/{}/{}",
                    n,
                    raw.token.len(),
                    raw.size.len()
                ),
            ));
        }
        if raw.alias_offset.len() != n + 1 {
            return Err(bad_table(
                T,
                format!("alias_offset must have {} entries", n + 1),
            ));
        }
        if u32::try_from(n).is_err() || u32::try_from(raw.alias_ids.len()).is_err() {
            return Err(bad_table(T, "more than 2^32 nodes or ids"));
        }
        let size: Vec<u32> = raw
            .size
            .iter()
            .map(|&s| u32::try_from(s).ok().filter(|&s| s >= 1))
            .collect::<Option<_>>()
            .ok_or_else(|| bad_table(T, "a subtree size is below 1"))?;
        if size[0] as usize != n {
            return Err(bad_table(T, "the root's subtree is not the whole trie"));
        }
        let alias_offset: Vec<u32> = raw
            .alias_offset
            .iter()
            .map(|&o| u32::try_from(o).ok())
            .collect::<Option<_>>()
            .ok_or_else(|| bad_table(T, "a negative alias offset"))?;
        if alias_offset[0] != 0 || alias_offset[n] as usize != raw.alias_ids.len() {
            return Err(bad_table(T, "alias_offset does not span alias_ids"));
        }
        if raw.n_vocab == 0 {
            return Err(bad_table(T, "the vocabulary is empty (n_vocab 0)"));
        }
        let in_vocab = |t: i32| usize::try_from(t).ok().filter(|&t| t < raw.n_vocab);
        let alias_ids: Vec<u32> = raw
            .alias_ids
            .iter()
            .map(|&t| in_vocab(t).map(|t| t as u32))
            .collect::<Option<_>>()
            .ok_or_else(|| bad_table(T, "an alias id is outside the vocabulary"))?;
        let eos_ids: Vec<u32> = raw
            .eos_ids
            .iter()
            .map(|&t| in_vocab(t).map(|t| t as u32))
            .collect::<Option<_>>()
            .ok_or_else(|| bad_table(T, "an EOS id is outside the vocabulary"))?;
        for i in 0..n {
            let (lo, hi) = (alias_offset[i] as usize, alias_offset[i + 1] as usize);
            if lo > hi {
                return Err(bad_table(T, format!("alias_offset decreases at node {i}")));
            }
            let expected = if lo < hi { raw.alias_ids[lo] } else { -1 };
            if raw.token[i] != expected {
                return Err(bad_table(
                    T,
                    format!("token[{i}] is not the first id of its alias class"),
                ));
            }
        }
        // Preorder tiling: every child's subtree lies inside its parent's, and
        // siblings are sorted by edge byte. `open` holds (end, last child byte);
        // a node whose subtree ended at `i` is closed before node `i`.
        let mut open: Vec<(usize, i32)> = vec![(n, -1)];
        let mut max_depth = 0;
        for (i, &sz) in size.iter().enumerate().skip(1) {
            while open.last().is_some_and(|&(end, _)| end <= i) {
                open.pop();
            }
            let Some(parent) = open.last_mut() else {
                return Err(bad_table(T, format!("node {i} lies outside the root")));
            };
            let end = i + sz as usize;
            if end > parent.0 {
                return Err(bad_table(T, format!("node {i} overflows its parent")));
            }
            if i32::from(raw.edge[i]) <= parent.1 {
                return Err(bad_table(T, format!("children not sorted at node {i}")));
            }
            parent.1 = i32::from(raw.edge[i]);
            open.push((end, -1));
            max_depth = max_depth.max(open.len() - 1);
        }
        if raw.token[0] != -1 {
            return Err(bad_table(T, "the root spells a token (the empty spelling)"));
        }
        let (spell_at, spellings) =
            spell(&raw.edge, &size, &alias_offset, &alias_ids, raw.n_vocab)?;
        let mut nodes: Vec<TrieNode> = (0..n)
            .map(|i| TrieNode {
                size: size[i],
                token: raw.token[i],
                edge: raw.edge[i],
                wide: [0; 3],
            })
            .collect();
        let (bytes, utf8) = (subtree_bytes(&nodes), utf8_prefixes(&nodes));
        let heights = subtree_heights(&nodes);
        let mut wide = Vec::new();
        for (i, node) in nodes.iter_mut().enumerate() {
            if node.size >= WIDE_MIN {
                let at = u32::try_from(wide.len())
                    .ok()
                    .filter(|&w| w < 1 << 24)
                    .ok_or_else(|| bad_table(T, "more than 2^24 subtrees of 8 nodes"))?;
                node.wide.copy_from_slice(&at.to_le_bytes()[..3]);
                wide.push(Wide {
                    bytes: bytes[i],
                    utf8: utf8[i],
                    height: heights[i],
                });
            }
        }
        let mut token_nodes = Vec::new();
        let mut tokens_before = Vec::with_capacity(n + 1);
        for (i, node) in nodes.iter().enumerate() {
            tokens_before.push(token_nodes.len() as u32);
            if node.token >= 0 {
                token_nodes.push(i as u32);
            }
        }
        tokens_before.push(token_nodes.len() as u32);
        Ok(Self {
            nodes,
            alias_offset,
            alias_ids,
            n_vocab: raw.n_vocab,
            eos_ids,
            max_depth,
            spell_at,
            spellings,
            wide,
            token_nodes,
            tokens_before,
        })
    }

    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Node `i` (panics out of range).
    #[inline]
    pub fn node(&self, i: usize) -> TrieNode {
        self.nodes[i]
    }

    /// The bytes on the path from the root down to `node` (a CD member's
    /// subtree: what its tokens spell up to there). O(depth x fan-out).
    pub fn path(&self, node: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = 0usize;
        while at != node {
            let mut child = at + 1;
            let end = at + self.node(at).size as usize;
            while child < end && child + self.node(child).size as usize <= node {
                child += self.node(child).size as usize;
            }
            assert!(child < end && child <= node, "node {node} is below {at}");
            out.push(self.node(child).edge);
            at = child;
        }
        out
    }

    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Words of a packed bitmask over the vocabulary: `ceil(n_vocab / 32)`.
    pub fn n_words(&self) -> usize {
        self.n_vocab.div_ceil(32)
    }

    pub fn eos_ids(&self) -> &[u32] {
        &self.eos_ids
    }

    /// The longest spelling, in bytes.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Every token id spelled at `node` (its alias class; empty for an inner node).
    #[inline]
    pub fn ids_at(&self, node: usize) -> &[u32] {
        &self.alias_ids[self.alias_offset[node] as usize..self.alias_offset[node + 1] as usize]
    }

    /// Every token id spelled in the subtree at `i` (itself included): one
    /// slice, since nodes and their alias classes are both in preorder.
    #[inline]
    pub fn subtree_ids(&self, i: usize) -> &[u32] {
        let end = i + self.nodes[i].size as usize;
        &self.alias_ids[self.alias_offset[i] as usize..self.alias_offset[end] as usize]
    }

    /// The nodes of the subtree at `i` (itself included) that spell a token,
    /// ascending.
    #[inline]
    pub fn token_nodes(&self, i: usize) -> &[u32] {
        let end = i + self.nodes[i].size as usize;
        &self.token_nodes[self.tokens_before[i] as usize..self.tokens_before[end] as usize]
    }

    /// The [`Wide`] record of `node`, a subtree of at least [`WIDE_MIN`]
    /// nodes (of another, some other record).
    #[inline]
    pub fn wide(&self, node: &TrieNode) -> &Wide {
        debug_assert!(node.size >= WIDE_MIN);
        let [a, b, c] = node.wide;
        &self.wide[u32::from_le_bytes([a, b, c, 0]) as usize]
    }

    /// `token_bytes(id)`: the path to the node spelling `id`; empty for a
    /// special id. Precondition: `id < n_vocab`.
    #[inline]
    pub fn spelling(&self, id: usize) -> &[u8] {
        &self.spellings[self.spell_at[id] as usize..self.spell_at[id + 1] as usize]
    }

    /// Assert the invariants [`Trie::new`] establishes (for tests).
    pub fn check_invariants(&self) {
        let n = self.n_nodes();
        assert_eq!(self.spell_at.len(), self.n_vocab + 1);
        let spelled = (0..self.n_vocab)
            .filter(|&i| !self.spelling(i).is_empty())
            .count();
        assert_eq!(spelled, self.alias_ids.len(), "one spelling per trie id");
        let size = |i: usize| self.nodes[i].size as usize;
        assert_eq!(size(0), n);
        assert_eq!(self.alias_offset.len(), n + 1);
        for i in 0..n {
            let ids = self.ids_at(i);
            assert_eq!(self.nodes[i].token, ids.first().map_or(-1, |&t| t as i32));
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "alias class of {i} not ascending"
            );
            let mut c = i + 1;
            while c < i + size(i) {
                c += size(c);
            }
            assert_eq!(c, i + size(i), "subtree of {i} does not tile");
            let here = self.tokens_before[i + 1] - self.tokens_before[i];
            assert_eq!(here == 1, self.nodes[i].token >= 0, "token nodes at {i}");
            if here == 1 {
                assert_eq!(self.token_nodes[self.tokens_before[i] as usize], i as u32);
            }
        }
        assert_eq!(self.tokens_before[n] as usize, self.token_nodes.len());
        let wide: Vec<&TrieNode> = self.nodes.iter().filter(|x| x.size >= WIDE_MIN).collect();
        assert_eq!(wide.len(), self.wide.len());
        for (k, node) in wide.into_iter().enumerate() {
            assert!(
                std::ptr::eq(self.wide(node), &self.wide[k]),
                "wide records in preorder"
            );
        }
    }
}

/// [`Wide::height`] of every node, children before parents.
fn subtree_heights(nodes: &[TrieNode]) -> Vec<u16> {
    let mut out = vec![1u16; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let (mut c, end) = (i + 1, i + nodes[i].size as usize);
        while c < end {
            out[i] = out[i].max(out[c].saturating_add(1));
            c += nodes[c].size as usize;
        }
    }
    out
}

/// [`Wide::bytes`] of every node, children before parents.
fn subtree_bytes(nodes: &[TrieNode]) -> Vec<[u64; 4]> {
    let mut out = vec![[0u64; 4]; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let mut acc = [0u64; 4];
        let b = nodes[i].edge as usize;
        acc[b / 64] |= 1 << (b % 64);
        let (mut c, end) = (i + 1, i + nodes[i].size as usize);
        while c < end {
            for (a, x) in acc.iter_mut().zip(&out[c]) {
                *a |= x;
            }
            c += nodes[c].size as usize;
        }
        out[i] = acc;
    }
    out
}

/// The phases of a UTF-8 decoder: at a boundary, or the continuation bytes
/// still owed with the range the next one must lie in.
const UTF8_PHASES: usize = 8;

/// The decoder phase after `byte` in phase `phase`, or `None` (invalid).
/// Phases: 0 boundary; 1 one more in 80-BF; 2 two more (80-BF first); 3 two
/// more (A0-BF first: E0); 4 two more (80-9F first: ED); 5 three more (80-BF
/// first); 6 three more (90-BF first: F0); 7 three more (80-8F first: F4).
pub(crate) fn utf8_step(phase: usize, byte: u8) -> Option<usize> {
    let cont = |lo: u8, hi: u8, next: usize| (lo..=hi).contains(&byte).then_some(next);
    match phase {
        0 => match byte {
            0x00..=0x7F => Some(0),
            0xC2..=0xDF => Some(1),
            0xE0 => Some(3),
            0xE1..=0xEC | 0xEE..=0xEF => Some(2),
            0xED => Some(4),
            0xF0 => Some(6),
            0xF1..=0xF3 => Some(5),
            0xF4 => Some(7),
            _ => None,
        },
        1 => cont(0x80, 0xBF, 0),
        2 => cont(0x80, 0xBF, 1),
        3 => cont(0xA0, 0xBF, 1),
        4 => cont(0x80, 0x9F, 1),
        5 => cont(0x80, 0xBF, 2),
        6 => cont(0x90, 0xBF, 2),
        _ => cont(0x80, 0x8F, 2),
    }
}

/// [`Wide::utf8`] of every node: per phase, whether every path of the
/// subtree read from that phase is valid, children before parents.
fn utf8_prefixes(nodes: &[TrieNode]) -> Vec<bool> {
    let mut valid = vec![0u8; nodes.len()];
    for i in (1..nodes.len()).rev() {
        let mut ok = 0u8;
        for phase in 0..UTF8_PHASES {
            let Some(next) = utf8_step(phase, nodes[i].edge) else {
                continue;
            };
            let (mut c, end) = (i + 1, i + nodes[i].size as usize);
            let mut all = true;
            while c < end && all {
                all = valid[c] >> next & 1 == 1;
                c += nodes[c].size as usize;
            }
            if all {
                ok |= 1 << phase;
            }
        }
        valid[i] = ok;
    }
    valid.iter().map(|v| v & 1 == 1).collect()
}

/// Every id's spelling, read off the trie paths in preorder: `(spell_at,
/// spellings)` as in [`Trie`]. Each id is spelled at most once.
fn spell(
    edge: &[u8],
    size: &[u32],
    alias_offset: &[u32],
    alias_ids: &[u32],
    n_vocab: usize,
) -> Result<(Vec<u32>, Vec<u8>)> {
    let mut at: Vec<Option<(u32, u32)>> = vec![None; n_vocab];
    let mut paths: Vec<u8> = Vec::new();
    let mut path: Vec<u8> = Vec::new();
    let mut open: Vec<usize> = vec![size[0] as usize]; // subtree ends, root first
    for i in 1..edge.len() {
        while open.last().is_some_and(|&end| end <= i) {
            open.pop();
        }
        path.truncate(open.len() - 1);
        path.push(edge[i]);
        open.push(i + size[i] as usize);
        let ids = &alias_ids[alias_offset[i] as usize..alias_offset[i + 1] as usize];
        if ids.is_empty() {
            continue;
        }
        let span = (paths.len() as u32, (paths.len() + path.len()) as u32);
        paths.extend_from_slice(&path);
        for &id in ids {
            if at[id as usize].replace(span).is_some() {
                return Err(bad_table("trie", format!("token {id} is spelled twice")));
            }
        }
    }
    let mut spell_at = Vec::with_capacity(n_vocab + 1);
    let mut spellings = Vec::with_capacity(paths.len());
    spell_at.push(0);
    for span in at {
        if let Some((lo, hi)) = span {
            spellings.extend_from_slice(&paths[lo as usize..hi as usize]);
        }
        spell_at.push(spellings.len() as u32);
    }
    Ok((spell_at, spellings))
}

#[cfg(test)]
mod tests {

    #[test]
    fn pack_lays_out_preorder_with_alias_classes() {
        let spellings: [&[u8]; 6] = [b"ab", b"a", b"", b"b", b"ab", b"x"];
        let raw = RawTrie::pack(&spellings, &[false, false, false, false, false, true]);
        // Nodes: root, a, ab, b.
        assert_eq!(raw.edge, [0, b'a', b'b', b'b']);
        assert_eq!(raw.token, [-1, 1, 0, 3]);
        assert_eq!(raw.size, [4, 2, 1, 1]);
        assert_eq!(raw.alias_offset, [0, 0, 1, 3, 4]);
        assert_eq!(raw.alias_ids, [1, 0, 4, 3]);
        let mut raw = raw;
        raw.eos_ids = vec![2];
        Trie::new(raw).expect("a packed trie is valid");
    }

    use super::*;

    /// The trie of "a", "ab", "b": root (4 nodes), a (2), ab (1), b (1).
    fn small() -> Trie {
        let spellings: [&[u8]; 3] = [b"a", b"ab", b"b"];
        Trie::new(RawTrie::pack(&spellings, &[false; 3])).unwrap()
    }

    #[test]
    fn a_nodes_path_is_what_its_tokens_spell() {
        let trie = small();
        let paths: Vec<Vec<u8>> = (0..trie.n_nodes()).map(|n| trie.path(n)).collect();
        assert_eq!(
            paths,
            [b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"b".to_vec()]
        );
        for (n, path) in paths.iter().enumerate() {
            for &id in trie.ids_at(n) {
                assert_eq!(trie.spelling(id as usize), path);
            }
        }
    }

    #[test]
    fn utf8_phases_accept_exactly_the_prefixes_of_valid_utf8() {
        // Every sequence of up to four bytes from the boundaries of the
        // UTF-8 ranges: the phase machine reads it through iff the standard
        // library finds it valid or only cut short (no invalid byte).
        let bytes = [
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xC3, 0xDF,
            0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ];
        let mut seq = Vec::with_capacity(4);
        let mut checked = 0;
        let mut stack: Vec<usize> = vec![0];
        while let Some(top) = stack.pop() {
            // `top` encodes the sequence in base 27 (digit 0: no byte).
            seq.clear();
            let mut k = top;
            while k > 0 {
                seq.push(bytes[k % 27 - 1]);
                k /= 27;
            }
            let phases = seq.iter().try_fold(0, |p, &b| utf8_step(p, b));
            let std_prefix = match std::str::from_utf8(&seq) {
                Ok(_) => true,
                Err(e) => e.error_len().is_none(),
            };
            assert_eq!(phases.is_some(), std_prefix, "{seq:02x?}");
            checked += 1;
            if seq.len() < 4 {
                for d in 1..=bytes.len() {
                    stack.push(top * 27 + d);
                }
            }
        }
        assert!(checked > 400_000, "{checked}");
    }

    #[test]
    fn check_invariants_holds_on_a_packed_trie() {
        small().check_invariants();
    }

    #[test]
    #[should_panic(expected = "subtree of 1 does not tile")]
    fn check_invariants_finds_a_subtree_that_overruns_its_parent() {
        // "ab" claiming 2 nodes: "a"'s children end past "a" itself, though
        // the root's still tile (a 2 + ab 2 would reach b).
        let mut t = small();
        t.nodes[2].size = 2;
        t.check_invariants();
    }

    fn node(edge: u8, size: u32) -> TrieNode {
        TrieNode {
            size,
            token: 0,
            edge,
            wide: [0; 3],
        }
    }

    #[test]
    fn utf8_steps_follow_the_encoding() {
        let read = |bytes: &[u8]| bytes.iter().try_fold(0, |p, &b| utf8_step(p, b));
        assert_eq!(read("aé中😀".as_bytes()), Some(0));
        assert_eq!(read(&"中".as_bytes()[..2]), Some(1), "a prefix owes bytes");
        for bad in [
            &b"\xa9"[..],
            b"\xc3A",
            b"\xe0\x80",
            b"\xed\xa0",
            b"\xf4\x90",
            b"\xf5",
            b"\xc0",
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn utf8_subtrees_hold_only_valid_prefixes() {
        // root; "a"; "\xc3" with children "A" (invalid) and "\xa9" ("é");
        // a lone "\xa9"; "\xc2" with the one child "\xa0".
        let nodes = [
            node(0, 8),
            node(b'a', 1),
            node(0xC3, 3),
            node(b'A', 1),
            node(0xA9, 1),
            node(0xA9, 1),
            node(0xC2, 2),
            node(0xA0, 1),
        ];
        let got = utf8_prefixes(&nodes);
        assert_eq!(&got[1..], [true, false, true, false, false, true, false]);
        let bytes = subtree_bytes(&nodes);
        // Node 2's subtree: 0xC3, 'A' (0x41) and 0xA9, one bit per byte.
        assert_eq!(
            bytes[2],
            [0, 1 << (0x41 - 64), 1 << (0xA9 - 128), 1 << (0xC3 - 192)]
        );
    }
}

//! The rolling configuration hash against values Python's hashlib computes
//! (`grid_core.parser.Node`: `low64(BLAKE2b-128(u64 parent || u32 state ||
//! u32 symbol))`, little-endian): the crate's other tests never read a hash,
//! so mutants of `node_hash` survived `cargo test` (bench/results/mutation).

use grid_kernels::parser::node_hash;

#[test]
fn node_hash_matches_python() {
    // python: int.from_bytes(hashlib.blake2b(bytes(8) + (3).to_bytes(4, "little")
    //         + (7).to_bytes(4, "little"), digest_size=16).digest()[:8], "little")
    let first = node_hash(0, 3, 7);
    assert_eq!(first, 0xffbd_ff49_e408_3bcc);
    // A goto label of -1 (the root's) is u32::MAX, as Python masks it.
    assert_eq!(node_hash(first, 5, u32::MAX), 0x111d_daf7_7c85_bd0e);
    assert_ne!(node_hash(0, 3, 7), node_hash(0, 7, 3));
}

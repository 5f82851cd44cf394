//! Structure-blind mutations of a seed input, in the spirit of libFuzzer's: bit flips, byte
//! and integer overwrites with boundary values (the lengths and counts decoders trust),
//! inserted and erased runs, truncation, duplication, and splices with another seed.

use crate::rng::Rng;

/// Values that sit on the edges decoders get wrong: zero, one, all ones, sign bits, and the
/// largest lengths a prefix can claim.
const INTERESTING_32: [u32; 10] = [
    0,
    1,
    2,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

/// Apply one to four mutations to `input` (a copy of a seed), drawing from `rng`; `other` is
/// another seed to splice from.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        mutate_once(rng, input, other);
    }
    input.truncate(max_len);
}

fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    if input.is_empty() {
        input.extend((0..1 + rng.below(16)).map(|_| rng.byte()));
        return;
    }
    let at = rng.below(input.len());
    match rng.below(10) {
        0 => input[at] ^= 1 << rng.below(8),
        1 => input[at] = rng.byte(),
        2 => {
            // An interesting integer, big-endian (Kafka's order), 1, 2 or 4 bytes wide.
            let v = INTERESTING_32[rng.below(INTERESTING_32.len())];
            let width = [1, 2, 4][rng.below(3)];
            let bytes = &v.to_be_bytes()[4 - width..];
            let end = (at + width).min(input.len());
            input[at..end].copy_from_slice(&bytes[..end - at]);
        }
        3 => {
            // An unsigned varint (compact lengths, record fields): small, or huge.
            let v = if rng.one_in(2) {
                rng.below(8) as u64
            } else {
                rng.next_u64() >> rng.below(64)
            };
            let end = (at + 10).min(input.len());
            let varint = varint(v);
            input.splice(at..end.min(at + varint.len()), varint);
        }
        4 => {
            let n = 1 + rng.below(8);
            let fill = rng.byte();
            input.splice(at..at, std::iter::repeat_n(fill, n));
        }
        5 => {
            let n = 1 + rng.below((input.len() - at).min(16));
            input.drain(at..at + n);
        }
        6 => input.truncate(at),
        7 => {
            // Duplicate a run (repeated array elements, repeated batches).
            let n = 1 + rng.below((input.len() - at).min(64));
            let run = input[at..at + n].to_vec();
            input.splice(at..at, run);
        }
        8 if !other.is_empty() => {
            let from = rng.below(other.len());
            let n = 1 + rng.below((other.len() - from).min(64));
            input.splice(at..at, other[from..from + n].iter().copied());
        }
        _ => {
            let n = (input.len() - at).min(8);
            for b in &mut input[at..at + n] {
                *b = rng.byte();
            }
        }
    }
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_a_function_of_the_seed() {
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut v = b"hello, seed".to_vec();
            for _ in 0..50 {
                mutate(&mut rng, &mut v, b"other", 64);
            }
            v
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}

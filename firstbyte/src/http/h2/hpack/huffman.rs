//! HPACK's Huffman code (RFC 7541 §5.2, Appendix B) decoded four bits at a time.
//!
//! The code is canonical: Appendix B assigns codes in order of length and, within a length,
//! of symbol value, so the code lengths below (read off Appendix B) determine every code.
//! From them a `const fn` builds, at compile time, the code tree and then a state machine:
//! one state per inner node of the tree (256 for 257 symbols), and for each state and each
//! nibble of input the state reached, the symbol completed on the way (at most one: no code
//! is shorter than five bits), whether the EOS symbol was met, and whether the input may end
//! there (the bits since the last symbol are all ones and fewer than eight: the EOS prefix
//! as padding). Decoding is then a table lookup per nibble, straight into the caller's
//! buffer, with no allocation beyond that buffer's growth.

/// The code length of each symbol, 0–255 and EOS (256), from RFC 7541 Appendix B.
pub(crate) const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0x00
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 0x10
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // ' ' .. '/'
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // '0' .. '?'
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // '@' .. 'O'
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 'P' .. '_'
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // '`' .. 'o'
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 'p' .. 0x7f
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 0x80
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 0x90
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 0xa0
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 0xb0
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 0xc0
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 0xd0
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 0xe0
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 0xf0
    30, // EOS
];

/// The symbol number of end-of-string.
const EOS: u16 = 256;

/// Each symbol's code (right-aligned), assigned canonically from [`LENGTHS`].
const fn codes() -> [u32; 257] {
    let mut codes = [0u32; 257];
    let mut code: u64 = 0;
    let mut len = 1;
    while len <= 30 {
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] as usize == len {
                codes[sym] = code as u32;
                code += 1;
            }
            sym += 1;
        }
        if len < 30 {
            code <<= 1;
        }
        len += 1;
    }
    // The code is complete (Kraft's sum is exactly one) and its last code, EOS's, is thirty
    // ones: a wrong length anywhere above breaks this.
    assert!(code == 1 << 30);
    assert!(codes[EOS as usize] == (1 << 30) - 1);
    codes
}

pub(crate) const CODES: [u32; 257] = codes();

/// A child in the code tree: an inner node's index, or a symbol (with this bit set).
const LEAF: u16 = 0x8000;

/// The code tree: `tree[node][bit]`; node 0 is the root; 256 inner nodes in all.
const fn tree() -> [[u16; 2]; 256] {
    let mut tree = [[0u16; 2]; 256];
    let mut nodes = 1;
    let mut sym = 0;
    while sym < 257 {
        let len = LENGTHS[sym] as u32;
        let code = CODES[sym];
        let mut node = 0;
        let mut i = len;
        while i > 1 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            if tree[node][bit] == 0 {
                tree[node][bit] = nodes as u16;
                nodes += 1;
            }
            node = tree[node][bit] as usize;
        }
        tree[node][(code & 1) as usize] = LEAF | sym as u16;
        sym += 1;
    }
    assert!(nodes == 256);
    tree
}

/// The state machine's step flags.
const EMIT: u8 = 1;
const ACCEPT: u8 = 2;
const FAIL: u8 = 4;

/// One step: the state reached, the symbol completed (with [`EMIT`]), and flags.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

/// `STEPS[state * 16 + nibble]`.
const fn steps() -> [Step; 256 * 16] {
    let tree = tree();
    // For each inner node: its depth, and whether the path to it is all ones.
    let mut depth = [0u8; 256];
    let mut ones = [false; 256];
    ones[0] = true;
    let mut node = 0;
    while node < 256 {
        let mut bit = 0;
        while bit < 2 {
            let child = tree[node][bit];
            if child & LEAF == 0 {
                depth[child as usize] = depth[node] + 1;
                ones[child as usize] = ones[node] && bit == 1;
            }
            bit += 1;
        }
        node += 1;
    }
    let mut steps = [Step {
        next: 0,
        sym: 0,
        flags: 0,
    }; 256 * 16];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step = Step {
                next: 0,
                sym: 0,
                flags: 0,
            };
            let mut i = 4;
            while i > 0 {
                i -= 1;
                let child = tree[node][(nibble >> i) & 1];
                if child & LEAF != 0 {
                    let sym = child & !LEAF;
                    if sym == EOS {
                        step.flags |= FAIL;
                        break;
                    }
                    step.sym = sym as u8;
                    step.flags |= EMIT;
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            step.next = node as u8;
            if step.flags & FAIL == 0 && ones[node] && depth[node] < 8 {
                step.flags |= ACCEPT;
            }
            steps[state * 16 + nibble] = step;
            nibble += 1;
        }
        state += 1;
    }
    steps
}

static STEPS: [Step; 256 * 16] = steps();

/// A Huffman-coded string that does not decode (RFC 7541 §5.2): an EOS symbol in it, or
/// padding longer than seven bits or other than the EOS code's leading ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HuffmanError;

/// Decodes `src`, appending the string to `dst`.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HuffmanError> {
    // At least five bits a symbol.
    dst.reserve(src.len() * 8 / 5);
    let mut state = 0usize;
    // An empty string is accepted.
    let mut accept = true;
    for &b in src {
        for nibble in [b >> 4, b & 0xf] {
            let step = STEPS[state * 16 + nibble as usize];
            if step.flags & FAIL != 0 {
                return Err(HuffmanError);
            }
            if step.flags & EMIT != 0 {
                dst.push(step.sym);
            }
            state = step.next as usize;
            accept = step.flags & ACCEPT != 0;
        }
    }
    if accept {
        Ok(())
    } else {
        Err(HuffmanError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = b"pre".to_vec();
        decode(src, &mut out)?;
        assert_eq!(&out[..3], b"pre", "appends");
        Ok(out[3..].to_vec())
    }

    /// Encodes with the codes above (for tests: padding with ones).
    fn enc(s: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0u32, Vec::new());
        for &c in s {
            acc = (acc << LENGTHS[c as usize]) | u64::from(CODES[c as usize]);
            bits += u32::from(LENGTHS[c as usize]);
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) | (0xff >> bits)) as u8);
        }
        out
    }

    #[test]
    fn codes_match_appendix_b() {
        // A sample of Appendix B's codes: (symbol, code, length).
        for (sym, code, len) in [
            (0usize, 0x1ff8u32, 13u8),
            (1, 0x7fffd8, 23),
            (9, 0xffffea, 24),
            (10, 0x3ffffffc, 30),
            (b' ' as usize, 0x14, 6),
            (b'0' as usize, 0x0, 5),
            (b'/' as usize, 0x18, 6),
            (b'X' as usize, 0xfc, 8),
            (b'a' as usize, 0x3, 5),
            (b'z' as usize, 0x7b, 7),
            (b'\\' as usize, 0x7fff0, 19),
            (127, 0xffffffc, 28),
            (128, 0xfffe6, 20),
            (195, 0x7fff1, 19),
            (220, 0xffffffd, 28),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ] {
            assert_eq!((CODES[sym], LENGTHS[sym]), (code, len), "symbol {sym}");
        }
    }

    #[test]
    fn rfc_7541_appendix_c_strings() {
        // C.4.1–C.4.3 and C.6.1's Huffman-coded strings.
        let cases: [(&[u8], &[u8]); 6] = [
            (
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
                b"www.example.com",
            ),
            (&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], b"no-cache"),
            (
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f],
                b"custom-key",
            ),
            (
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf],
                b"custom-value",
            ),
            (&[0x64, 0x02], b"302"),
            (&[0xae, 0xc3, 0x77, 0x1a, 0x4b], b"private"),
        ];
        for (src, want) in cases {
            assert_eq!(dec(src).as_deref(), Ok(want));
            assert_eq!(enc(want), src);
        }
        assert_eq!(dec(b"").as_deref(), Ok(&b""[..]));
    }

    #[test]
    fn every_byte_round_trips() {
        for b in 0..=255u8 {
            for s in [vec![b], vec![b; 3], vec![b'a', b, b'/', b]] {
                assert_eq!(dec(&enc(&s)), Ok(s.clone()), "{s:?}");
            }
        }
    }

    #[test]
    fn padding_and_eos_are_checked() {
        // "a" is 00011: padded with 111 it is 0x1f; with zeros, or with a zero in it, no.
        assert_eq!(dec(&[0x1f]).as_deref(), Ok(&b"a"[..]));
        assert_eq!(dec(&[0x18]), Err(HuffmanError));
        assert_eq!(dec(&[0x1d]), Err(HuffmanError));
        // Eight bits of padding: a whole 0xff after a complete string.
        assert_eq!(dec(&[0x1f, 0xff]), Err(HuffmanError));
        // Padding alone: up to seven ones are fine only as the end of a symbol's byte, so a
        // lone 0xff (eight ones) is refused.
        assert_eq!(dec(&[0xff]), Err(HuffmanError));
        // EOS (thirty ones) inside a string, and at its end.
        assert_eq!(dec(&[0xff, 0xff, 0xff, 0xfc, 0x1f]), Err(HuffmanError));
        assert_eq!(dec(&[0x1f, 0xff, 0xff, 0xff, 0xff]), Err(HuffmanError));
        // A truncated long code: the first two bytes of 0x7fffd8 (23 bits).
        assert_eq!(dec(&[0xff, 0xfe]), Err(HuffmanError));
    }
}

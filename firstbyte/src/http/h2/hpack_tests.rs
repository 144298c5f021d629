//! Tests of the HPACK decoder: RFC 7541 Appendix C's examples, round trips against
//! loona-hpack (an independent encoder and decoder), and malformed blocks.

use super::*;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn run(d: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut out = Vec::new();
    d.decode(block, |n, v| out.push((n.to_vec(), v.to_vec())))?;
    Ok(out)
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// The dynamic table, newest first, and its size.
fn table(d: &Decoder) -> (Fields, usize) {
    let t = d
        .table
        .entries
        .iter()
        .map(|e| (e.name().to_vec(), e.value().to_vec()))
        .collect();
    (t, d.table.size)
}

#[test]
fn c2_field_representations() {
    // C.2.1: literal with indexing.
    let mut d = Decoder::new(4096);
    let b = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    let want = fields(&[("custom-key", "custom-header")]);
    assert_eq!(run(&mut d, &b), Ok(want.clone()));
    assert_eq!(table(&d), (want, 55));
    // C.2.2: literal without indexing.
    let mut d = Decoder::new(4096);
    let b = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(run(&mut d, &b), Ok(fields(&[(":path", "/sample/path")])));
    assert_eq!(table(&d), (vec![], 0));
    // C.2.3: never indexed.
    let b = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(run(&mut d, &b), Ok(fields(&[("password", "secret")])));
    assert_eq!(table(&d), (vec![], 0));
    // C.2.4: indexed.
    assert_eq!(run(&mut d, &[0x82]), Ok(fields(&[(":method", "GET")])));
    assert_eq!(table(&d), (vec![], 0));
}

/// C.3 and C.4: three requests on one connection, as literals and Huffman-coded.
fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let r1 = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ];
    assert_eq!(run(&mut d, &hex(blocks[0])), Ok(fields(&r1)));
    assert_eq!(
        table(&d),
        (fields(&[(":authority", "www.example.com")]), 57)
    );
    let mut r2 = r1.to_vec();
    r2.push(("cache-control", "no-cache"));
    assert_eq!(run(&mut d, &hex(blocks[1])), Ok(fields(&r2)));
    assert_eq!(
        table(&d),
        (
            fields(&[
                ("cache-control", "no-cache"),
                (":authority", "www.example.com")
            ]),
            110
        )
    );
    let r3 = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];
    assert_eq!(run(&mut d, &hex(blocks[2])), Ok(fields(&r3)));
    assert_eq!(
        table(&d),
        (
            fields(&[
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                (":authority", "www.example.com")
            ]),
            164
        )
    );
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

/// C.5 and C.6: three responses with a 256-byte table, evicting as they go.
fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    d.table.set_max_size(256);
    let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
    let loc = "https://www.example.com";
    let r1 = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", date1),
        ("location", loc),
    ];
    assert_eq!(run(&mut d, &hex(blocks[0])), Ok(fields(&r1)));
    assert_eq!(
        table(&d),
        (
            fields(&[
                ("location", loc),
                ("date", date1),
                ("cache-control", "private"),
                (":status", "302")
            ]),
            222
        )
    );
    let r2 = [
        (":status", "307"),
        ("cache-control", "private"),
        ("date", date1),
        ("location", loc),
    ];
    assert_eq!(run(&mut d, &hex(blocks[1])), Ok(fields(&r2)));
    assert_eq!(
        table(&d),
        (
            fields(&[
                (":status", "307"),
                ("location", loc),
                ("date", date1),
                ("cache-control", "private")
            ]),
            222
        )
    );
    let date3 = "Mon, 21 Oct 2013 20:13:22 GMT";
    let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    let r3 = [
        (":status", "200"),
        ("cache-control", "private"),
        ("date", date3),
        ("location", loc),
        ("content-encoding", "gzip"),
        ("set-cookie", cookie),
    ];
    assert_eq!(run(&mut d, &hex(blocks[2])), Ok(fields(&r3)));
    assert_eq!(
        table(&d),
        (
            fields(&[
                ("set-cookie", cookie),
                ("content-encoding", "gzip"),
                ("date", date3)
            ]),
            215
        )
    );
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

/// A Huffman-coded string literal (test encoder from the codes in `huffman`).
fn huff_literal(s: &[u8]) -> Vec<u8> {
    let (mut acc, mut bits, mut code) = (0u64, 0u32, Vec::new());
    for &c in s {
        let len = u32::from(huffman::LENGTHS[c as usize]);
        acc = (acc << len) | u64::from(huffman::CODES[c as usize]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            code.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        code.push(((acc << (8 - bits)) | (0xff >> bits)) as u8);
    }
    let mut out = loona_hpack::encoder::encode_integer(code.len(), 7);
    out[0] |= 0x80;
    out.extend_from_slice(&code);
    out
}

#[test]
fn every_byte_round_trips_against_loona_hpack() {
    let mut enc = loona_hpack::Encoder::new();
    let mut ours = Decoder::new(4096);
    let mut theirs = loona_hpack::Decoder::new();
    for b in 0..=255u8 {
        let value = vec![b'x', b, b, b'/', b];
        let name = vec![b'n', b];
        // loona-hpack's encoder (literals, with indexing) into both decoders.
        let block = enc.encode([(&name[..], &value[..]), (&name[..], &value[..])]);
        let want = vec![(name.clone(), value.clone()); 2];
        assert_eq!(run(&mut ours, &block), Ok(want.clone()), "byte {b}");
        assert_eq!(theirs.decode(&block).unwrap(), want, "byte {b}");
        // Huffman-coded (literal without indexing, new name): loona-hpack's decoder agrees.
        let mut block = vec![0x00];
        block.extend(huff_literal(&name));
        block.extend(huff_literal(&value));
        let want = vec![(name.clone(), value.clone())];
        assert_eq!(run(&mut ours, &block), Ok(want.clone()), "byte {b}");
        assert_eq!(theirs.decode(&block).unwrap(), want, "byte {b}");
    }
}

#[test]
fn malformed_blocks_are_refused() {
    let d = || Decoder::new(4096);
    // Index 0, and past the static table with an empty dynamic one.
    assert_eq!(run(&mut d(), &[0x80]), Err(DecodeError::BadIndex));
    assert_eq!(run(&mut d(), &[0xbe]), Err(DecodeError::BadIndex));
    assert_eq!(run(&mut d(), &[0xff, 0x7f]), Err(DecodeError::BadIndex));
    assert_eq!(
        run(&mut d(), &[0x7f, 0x00, 0x00]),
        Err(DecodeError::BadIndex)
    );
    assert_eq!(run(&mut d(), &[0x80 | 61]).map(|f| f.len()), Ok(1));
    // Integer overflow: past 2^32 - 1, and too many continuation bytes.
    assert_eq!(
        run(&mut d(), &[0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(DecodeError::IntegerOverflow)
    );
    assert_eq!(
        run(&mut d(), &[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
        Err(DecodeError::IntegerOverflow)
    );
    // Truncated: an integer, a string length, a string, a missing value.
    for b in [
        &[0xff][..],
        &[0xff, 0x80],
        &[0x00],
        &[0x00, 0x05, b'a'],
        &[0x00, 0x01, b'a'],
        &[0x44],
        &[0x44, 0x7f],
    ] {
        assert_eq!(run(&mut d(), b), Err(DecodeError::Truncated), "{b:?}");
    }
    // Huffman: zero padding, eight bits of padding, EOS in the string.
    assert_eq!(
        run(&mut d(), &[0x04, 0x81, 0x18]),
        Err(DecodeError::Huffman)
    );
    assert_eq!(
        run(&mut d(), &[0x04, 0x82, 0x1f, 0xff]),
        Err(DecodeError::Huffman)
    );
    assert_eq!(
        run(&mut d(), &[0x04, 0x85, 0xff, 0xff, 0xff, 0xfc, 0x1f]),
        Err(DecodeError::Huffman)
    );
    assert_eq!(
        run(&mut d(), &[0x04, 0x81, 0x1f]),
        Ok(fields(&[(":path", "a")]))
    );
}

#[test]
fn table_size_updates() {
    // Up to the bound, at the block's start (two in a row are fine), evicting.
    let mut d = Decoder::new(4096);
    run(
        &mut d,
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
    )
    .unwrap();
    assert_eq!(table(&d).1, 55);
    assert_eq!(
        run(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]).map(|f| f.len()),
        Ok(1)
    );
    assert_eq!((table(&d).1, d.table.max_size), (0, 4096));
    // Past the bound (4097), and after a field.
    assert_eq!(
        run(&mut d, &[0x3f, 0xe2, 0x1f]),
        Err(DecodeError::SizeUpdate)
    );
    assert_eq!(run(&mut d, &[0x82, 0x20]), Err(DecodeError::SizeUpdate));
    // Between two fields: refused here (RFC 7541 §4.2), taken by loona-hpack's decoder,
    // which refuses a size update only at a block's end.
    assert_eq!(
        run(&mut d, &[0x82, 0x20, 0x82]),
        Err(DecodeError::SizeUpdate)
    );
    assert!(loona_hpack::Decoder::new()
        .decode(&[0x82, 0x20, 0x82])
        .is_ok());
    // An entry larger than the table empties it; a smaller size evicts the oldest.
    let mut d = Decoder::new(4096);
    let mut enc = loona_hpack::Encoder::new();
    let big = vec![b'v'; 5000];
    let b = enc.encode([(&b"a"[..], &b"1"[..]), (&b"b"[..], &b"2"[..])]);
    run(&mut d, &b).unwrap();
    assert_eq!(table(&d), (fields(&[("b", "2"), ("a", "1")]), 68));
    assert_eq!(run(&mut d, &[0x3f, 0x15]).map(|f| f.len()), Ok(0));
    assert_eq!(table(&d), (fields(&[("b", "2")]), 34));
    assert_eq!(run(&mut d, &[0xbf]), Err(DecodeError::BadIndex));
    let mut b = vec![0x40, 0x01, b'c'];
    b.extend(loona_hpack::encoder::encode_integer(big.len(), 7));
    b.extend(&big);
    assert_eq!(run(&mut d, &b).map(|f| f.len()), Ok(1));
    assert_eq!(table(&d), (vec![], 0));
}

#[test]
fn indexed_name_survives_its_own_eviction() {
    // A literal with indexing whose name is the dynamic table's only entry, in a table
    // too small for both: the new entry takes the name before the old one goes.
    let mut d = Decoder::new(4096);
    run(&mut d, &[0x3f, 0x1b]).unwrap(); // size 58
    run(&mut d, &[0x40, 0x01, b'n', 0x01, b'1']).unwrap(); // n: 1, 34
    assert_eq!(
        run(&mut d, &[0x7e, 0x02, b'2', b'2']),
        Ok(fields(&[("n", "22")]))
    );
    assert_eq!(table(&d), (fields(&[("n", "22")]), 35));
}

/// The fuzz target `hpack`'s comparison, on blocks made by mutating loona-hpack's encodings
/// (a deterministic xorshift stream): same fields, and the same refusals but the differences
/// the target allows.
#[test]
fn differential_against_loona_hpack() {
    use loona_hpack::decoder::{DecoderError as L, IntegerDecodingError as I};
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let words: [&[u8]; 8] = [
        b":path",
        b"/assets/js/application-3f2a9c.js",
        b"cookie",
        b"x",
        b"",
        b"\x00\xff\x7f~",
        b"user-agent",
        b"Mozilla/5.0 (X11; Linux x86_64)",
    ];
    let (mut agreed, mut refused) = (0, 0);
    for _ in 0..3000 {
        let mut enc = loona_hpack::Encoder::new();
        let mut ours = Decoder::new(4096);
        let mut theirs = loona_hpack::Decoder::new();
        theirs.set_max_allowed_table_size(4096);
        for _ in 0..4 {
            let n = (rnd() % 4) as usize;
            let list: Vec<(&[u8], &[u8])> = (0..n)
                .map(|_| (words[rnd() as usize % 8], words[rnd() as usize % 8]))
                .collect();
            let mut block = enc.encode(list);
            if rnd() % 3 == 0 && !block.is_empty() {
                let i = rnd() as usize % block.len();
                block[i] ^= 1 << (rnd() % 8);
            }
            if rnd() % 5 == 0 {
                block.push(rnd() as u8);
            }
            if rnd() % 7 == 0 {
                let huff = huff_literal(words[rnd() as usize % 8]);
                block.push(0x00);
                block.extend(&huff);
                block.extend(&huff);
            }
            let mut got = Vec::new();
            let a = ours.decode(&block, |n, v| got.push((n.to_vec(), v.to_vec())));
            match (a, theirs.decode(&block)) {
                (Ok(()), Ok(want)) => {
                    assert_eq!(got, want, "{block:02x?}");
                    agreed += 1;
                }
                (Err(DecodeError::SizeUpdate), Ok(_)) => break,
                (Ok(()), Err(L::SizeUpdateAtEnd | L::IntegerDecodingError(I::TooManyOctets))) => {
                    break
                }
                (Err(_), Err(_)) => {
                    refused += 1;
                    break;
                }
                (a, b) => panic!("{block:02x?}: {a:?} against {b:?}"),
            }
            // The encoder's table moves on only with blocks both decoded as it encoded them.
            if got.len() != n {
                break;
            }
        }
    }
    assert!(agreed > 3000 && refused > 100, "{agreed} {refused}");
}

//! HPACK header blocks, differential: firstbyte's decoder (`http::h2::hpack`) against
//! loona-hpack's, the same blocks in turn on one connection (so the dynamic table is
//! exercised across blocks). The input is a run of blocks, each a length byte and that many
//! bytes. Besides never panicking:
//! - every block loona-hpack decodes, firstbyte decodes to the same fields;
//! - firstbyte refuses nothing loona-hpack takes but a table size update after a field (RFC
//!   7541 §4.2: only at a block's start; loona-hpack only refuses one at the end), and takes
//!   nothing loona-hpack refuses but a block of size updates alone and integers of five
//!   continuation bytes (up to 2^32 - 1, where loona-hpack stops at four);
//! - after an error the connection is over (nothing more is compared).

#![no_main]

use firstbyte::fuzzing::{HpackDecoder, HpackError};
use libfuzzer_sys::fuzz_target;
use loona_hpack::decoder::{DecoderError, IntegerDecodingError};

fuzz_target!(|data: &[u8]| {
    let mut ours = HpackDecoder::new(4096);
    let mut theirs = loona_hpack::Decoder::new();
    theirs.set_max_allowed_table_size(4096);
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (block, tail) = tail.split_at(usize::from(len).min(tail.len()));
        rest = tail;
        let mut got = Vec::new();
        let a = ours.decode(block, |n, v| got.push((n.to_vec(), v.to_vec())));
        let b = theirs.decode(block);
        match (a, b) {
            (Ok(()), Ok(want)) => assert_eq!(got, want, "{block:02x?}"),
            (Err(HpackError::SizeUpdate), Ok(_)) => return, // one after a field
            (Err(e), Ok(_)) => panic!("{block:02x?}: firstbyte refuses ({e:?}), loona-hpack takes"),
            (
                Ok(()),
                Err(
                    DecoderError::SizeUpdateAtEnd
                    | DecoderError::IntegerDecodingError(IntegerDecodingError::TooManyOctets),
                ),
            ) => return,
            (Ok(()), Err(e)) => {
                panic!("{block:02x?}: firstbyte takes, loona-hpack refuses ({e:?})")
            }
            (Err(_), Err(_)) => return,
        }
    }
});

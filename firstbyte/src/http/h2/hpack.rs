//! HPACK decoding (RFC 7541): a header block's representations turned into (name, value)
//! pairs handed to a callback, with the connection's dynamic table kept in step.
//!
//! Nothing is allocated per string: literal strings are handed on as slices of the block,
//! Huffman-coded ones are decoded into one scratch buffer the decoder keeps (and reuses) for
//! the connection, indexed ones are slices of the static or dynamic table. An entry added to
//! the dynamic table takes one allocation (name and value together).
//!
//! Errors are the connection's COMPRESSION_ERROR (RFC 9113 §4.3); the caller maps them.

pub mod huffman;

use std::collections::VecDeque;
use std::ops::Range;

/// Why a header block does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The block ends inside a representation.
    Truncated,
    /// An integer past 2^32 - 1 (RFC 7541 §5.1 lets decoders set a limit).
    IntegerOverflow,
    /// Index 0, or past the static and dynamic tables (RFC 7541 §2.3.3).
    BadIndex,
    /// A Huffman-coded string that does not decode (RFC 7541 §5.2).
    Huffman,
    /// A dynamic table size update above the SETTINGS_HEADER_TABLE_SIZE bound, or after a
    /// field of the block (RFC 7541 §4.2, §6.3).
    SizeUpdate,
}

impl From<huffman::HuffmanError> for DecodeError {
    fn from(_: huffman::HuffmanError) -> DecodeError {
        DecodeError::Huffman
    }
}

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// An entry's size beyond its name and value (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The scratch buffer's capacity kept between blocks (a larger one, left by an unusually
/// long Huffman-coded string, is given back).
const SCRATCH_KEEP: usize = 16 * 1024;

/// A dynamic table entry: name and value in one allocation.
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The dynamic table (RFC 7541 §2.3.2, §4): newest entry first.
struct Table {
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
}

impl Table {
    fn get(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        match index {
            0 => Err(DecodeError::BadIndex),
            1..=61 => Ok(STATIC[index - 1]),
            _ => self
                .entries
                .get(index - 62)
                .map(|e| (e.name(), e.value()))
                .ok_or(DecodeError::BadIndex),
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.entries.pop_back() {
                Some(e) => self.size -= e.size(),
                None => break,
            }
        }
    }

    fn set_max_size(&mut self, max: usize) {
        self.max_size = max;
        self.evict_to(max);
    }

    /// Adds an entry; one larger than the table empties it (RFC 7541 §4.4).
    fn insert(&mut self, entry: Entry) {
        let size = entry.size();
        if size > self.max_size {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max_size - size);
        self.entries.push_front(entry);
        self.size += size;
    }
}

/// A string as decoded: a slice of the block, or a range of the scratch buffer.
enum Str<'b> {
    Block(&'b [u8]),
    Scratch(Range<usize>),
}

/// A connection's HPACK decoder.
pub struct Decoder {
    table: Table,
    /// The largest table size the client may set (our SETTINGS_HEADER_TABLE_SIZE).
    max_allowed: usize,
    scratch: Vec<u8>,
}

impl Decoder {
    /// A decoder whose table starts at, and may not be resized past, `max_table_size`
    /// (the SETTINGS_HEADER_TABLE_SIZE advertised, 4096 unless another is sent).
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: Table {
                entries: VecDeque::new(),
                size: 0,
                max_size: max_table_size,
            },
            max_allowed: max_table_size,
            scratch: Vec::new(),
        }
    }

    /// Decodes a whole header block, calling `field(name, value)` for each field in order.
    /// After an error the decoder's table may be out of step with the peer's: the
    /// connection is to be closed.
    pub fn decode<F: FnMut(&[u8], &[u8])>(
        &mut self,
        block: &[u8],
        mut field: F,
    ) -> Result<(), DecodeError> {
        let mut at = 0;
        let mut fields_seen = false;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = int(block, &mut at, 7)?;
                let (n, v) = self.table.get(index)?;
                field(n, v);
                fields_seen = true;
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the block's first field.
                let size = int(block, &mut at, 5)?;
                if fields_seen || size > self.max_allowed {
                    return Err(DecodeError::SizeUpdate);
                }
                self.table.set_max_size(size);
            } else {
                // Literals (§6.2): with incremental indexing (01), without (0000), never
                // indexed (0001).
                let indexing = b & 0x40 != 0;
                let index = int(block, &mut at, if indexing { 6 } else { 4 })?;
                self.scratch.clear();
                let name = if index == 0 {
                    Some(self.string(block, &mut at)?)
                } else {
                    // Checked now, read once the value is decoded.
                    self.table.get(index)?;
                    None
                };
                let value = self.string(block, &mut at)?;
                let v: &[u8] = match &value {
                    Str::Block(s) => s,
                    Str::Scratch(r) => &self.scratch[r.clone()],
                };
                let n: &[u8] = match &name {
                    Some(Str::Block(s)) => s,
                    Some(Str::Scratch(r)) => &self.scratch[r.clone()],
                    None => self.table.get(index)?.0,
                };
                field(n, v);
                fields_seen = true;
                if indexing {
                    // The entry is built from copies before the insertion, which may evict
                    // the entry the name came from.
                    let mut bytes = Vec::with_capacity(n.len() + v.len());
                    bytes.extend_from_slice(n);
                    bytes.extend_from_slice(v);
                    let name_len = n.len();
                    self.table.insert(Entry {
                        bytes: bytes.into_boxed_slice(),
                        name_len,
                    });
                }
            }
        }
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        Ok(())
    }

    /// A string literal (§5.2) at `block[*at..]`.
    fn string<'b>(&mut self, block: &'b [u8], at: &mut usize) -> Result<Str<'b>, DecodeError> {
        let huffman = block.get(*at).ok_or(DecodeError::Truncated)? & 0x80 != 0;
        let len = int(block, at, 7)?;
        let end = at.checked_add(len).ok_or(DecodeError::Truncated)?;
        let src = block.get(*at..end).ok_or(DecodeError::Truncated)?;
        *at = end;
        if !huffman {
            return Ok(Str::Block(src));
        }
        let start = self.scratch.len();
        huffman::decode(src, &mut self.scratch)?;
        Ok(Str::Scratch(start..self.scratch.len()))
    }
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1) at `block[*at..]`; at most 2^32 - 1.
fn int(block: &[u8], at: &mut usize, n: u32) -> Result<usize, DecodeError> {
    let mask = (1u8 << n) - 1;
    let first = *block.get(*at).ok_or(DecodeError::Truncated)? & mask;
    *at += 1;
    if first < mask {
        return Ok(usize::from(first));
    }
    let mut value = u64::from(mask);
    let mut shift = 0;
    loop {
        let b = *block.get(*at).ok_or(DecodeError::Truncated)?;
        *at += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(DecodeError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| DecodeError::IntegerOverflow);
        }
        shift += 7;
        if shift > 28 {
            return Err(DecodeError::IntegerOverflow);
        }
    }
}

#[cfg(test)]
#[path = "hpack_tests.rs"]
mod tests;

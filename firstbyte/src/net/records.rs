//! Reads that stop at TLS record boundaries, for connections that may hand their record layer
//! to the kernel (kernel TLS): rustls must not read past the handshake's last record, or the
//! bytes it took (a request sent right behind the client's Finished, perhaps half a record)
//! would be missing from the socket the kernel decrypts. Each read takes at most the rest of
//! the current record's 5-byte header or of its body.

/// Where the reads stand within the record stream.
#[derive(Debug, Default, Clone)]
pub struct RecordCut {
    header: [u8; 5],
    have: usize,
    body_left: usize,
}

impl RecordCut {
    /// The most bytes the next read may take (≥ 1).
    pub fn room(&self) -> usize {
        if self.body_left > 0 {
            self.body_left
        } else {
            5 - self.have
        }
    }

    /// Accounts for `bytes` just read (at most [`room`](Self::room) of them).
    pub fn consumed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let n = bytes.len().min(self.body_left);
                self.body_left -= n;
                bytes = &bytes[n..];
            } else {
                let n = bytes.len().min(5 - self.have);
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == 5 {
                    self.have = 0;
                    self.body_left =
                        usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                }
            }
        }
    }

    /// Whether the reads so far ended exactly at a record boundary.
    #[cfg(test)]
    pub fn at_boundary(&self) -> bool {
        self.have == 0 && self.body_left == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_each_record_end() {
        // Two records: 3-byte body, then a 0-byte body, then a 2-byte one.
        let wire = [
            22, 3, 3, 0, 3, 1, 2, 3, 20, 3, 3, 0, 0, 23, 3, 3, 0, 2, 9, 9,
        ];
        let mut cut = RecordCut::default();
        let mut at = 0;
        let mut reads = Vec::new();
        while at < wire.len() {
            // A reader that always has more than the room.
            let n = cut.room().min(wire.len() - at);
            cut.consumed(&wire[at..at + n]);
            reads.push(n);
            at += n;
        }
        assert_eq!(reads, [5, 3, 5, 5, 2]);
        assert!(cut.at_boundary());
        // Short reads (one byte at a time) keep the count.
        let mut cut = RecordCut::default();
        for (i, b) in wire.iter().enumerate() {
            assert!(cut.room() >= 1);
            cut.consumed(&[*b]);
            assert_eq!(cut.at_boundary(), [7, 12, 19].contains(&i), "byte {i}");
        }
    }
}

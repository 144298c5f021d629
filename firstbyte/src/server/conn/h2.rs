//! HTTP/2 over TLS on one connection: firstbyte's own HTTP/2 layer (`http::h2`) run until
//! [`Shutdown::until_shutdown`] says stop, and DATA frames sized to fill TLS records
//! ([`h2_data_chunk`]).

use std::sync::Arc;

use crate::tls::stream::BatchWrite;
use tokio::io::AsyncRead;

use super::shutdown::{Shutdown, Stop};
use crate::conf::model::ServerConf;
use crate::http::conn::Conn;

/// Serves HTTP/2 on `io` to the connection's end: when [`Shutdown::until_shutdown`] says
/// stop, GOAWAY, and the streams in flight finish (an idle connection gets a second).
pub(super) async fn serve_h2<I>(conn: Arc<Conn>, io: I, server: Arc<ServerConf>, mut stop: Shutdown)
where
    I: AsyncRead + BatchWrite + Send + 'static,
{
    let c = conn.clone();
    let stopped = async move { stop.until_shutdown(&c).await == Stop::Idle };
    crate::http::h2::serve(conn, io, &server, stopped).await;
}

/// Bytes of an HTTP/2 frame header (RFC 9113 §4.1).
const H2_FRAME_HEADER: usize = 9;

/// Records smaller than this are not worth fitting DATA frames into: a frame then spans
/// several records, and frames stay the default size (1 KB = a few frame headers' worth).
const MIN_FITTED_RECORD: usize = 1024;

/// HTTP/2 DATA payload per frame so that frame header + payload fill one record of
/// `record` bytes; `None` (the default chunk) when records are smaller than
/// [`MIN_FITTED_RECORD`] — any `ssl_buffer_size` nginx accepts works, down to 1 byte.
pub(super) fn h2_data_chunk(record: usize) -> Option<usize> {
    (record >= MIN_FITTED_RECORD).then(|| record - H2_FRAME_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_frames_fit_records_only_when_records_are_big_enough() {
        assert_eq!(h2_data_chunk(16384), Some(16375));
        assert_eq!(h2_data_chunk(1024), Some(1015));
        for tiny in [1, 8, 9, 10, 1023] {
            assert_eq!(h2_data_chunk(tiny), None, "{tiny}");
        }
    }
}

//! Idle HTTP/2 connections for the `idle_mem_h2` measure: TLS 1.3 with ALPN `h2`, the client
//! preface and a SETTINGS frame, the server's SETTINGS acknowledged and ours acknowledged by
//! the server, then nothing: what a browser's connection costs a server between requests.
//!
//! [`Preface`] is the exchange as a pure state machine (bytes in, bytes to send and "done"
//! out, RFC 9113 §3.4 and §6.5); [`open`] is its thin I/O shell over the in-crate TLS client.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame types used here (RFC 9113 §6).
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
/// The ACK flag of a SETTINGS frame.
const ACK: u8 = 0x1;
/// SETTINGS_ENABLE_PUSH (RFC 9113 §6.5.2): a browser-like client turns push off.
const ENABLE_PUSH: u16 = 0x2;
/// The largest frame a server may send before it has our SETTINGS: the default
/// SETTINGS_MAX_FRAME_SIZE, 16,384 bytes (RFC 9113 §6.5.2).
const MAX_FRAME: usize = 16_384;
/// Frame header length.
const HEADER: usize = 9;

/// A frame header (length, type, flags, stream) at the start of `buf`, if complete.
pub fn frame_header(buf: &[u8]) -> Option<(usize, u8, u8, u32)> {
    let h = buf.get(..HEADER)?;
    let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    Some((len, h[3], h[4], stream))
}

fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    // Every frame here is a few bytes: the length always fits the 24-bit field.
    let len = (payload.len() as u32).to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

/// What the client sends first: the preface and a SETTINGS frame with push disabled.
pub fn client_start() -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    let mut setting = ENABLE_PUSH.to_be_bytes().to_vec();
    setting.extend_from_slice(&0u32.to_be_bytes());
    out.extend(frame(SETTINGS, 0, &setting));
    out
}

/// The preface exchange seen from the client, after [`client_start`] was sent.
#[derive(Debug, Default)]
pub struct Preface {
    buf: Vec<u8>,
    server_settings: bool,
    our_settings_acked: bool,
}

impl Preface {
    /// Takes bytes from the server; returns the bytes to send (an ACK for each server
    /// SETTINGS) and whether the exchange is complete (the server's SETTINGS seen and
    /// acknowledged, ours acknowledged). Other frames (WINDOW_UPDATE, ...) are skipped.
    pub fn feed(&mut self, data: &[u8]) -> Result<(Vec<u8>, bool)> {
        self.buf.extend_from_slice(data);
        let mut reply = Vec::new();
        let mut at = 0;
        while let Some((len, kind, flags, stream)) = frame_header(&self.buf[at..]) {
            if len > MAX_FRAME {
                bail!("server frame of {len} bytes (type {kind}) exceeds 16,384");
            }
            let Some(payload) = self.buf.get(at + HEADER..at + HEADER + len) else {
                break;
            };
            match kind {
                SETTINGS if stream != 0 || (flags & ACK != 0 && len != 0) || len % 6 != 0 => {
                    bail!("malformed SETTINGS frame from the server")
                }
                SETTINGS if flags & ACK != 0 => self.our_settings_acked = true,
                SETTINGS => {
                    self.server_settings = true;
                    reply.extend(frame(SETTINGS, ACK, &[]));
                }
                GOAWAY => bail!(
                    "server sent GOAWAY (error code {:?})",
                    payload
                        .get(4..8)
                        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                ),
                _ if !self.server_settings => {
                    bail!("server's first frame is type {kind}, not SETTINGS")
                }
                _ => {}
            }
            at += HEADER + len;
        }
        self.buf.drain(..at);
        Ok((reply, self.server_settings && self.our_settings_acked))
    }
}

/// Connects, handshakes with ALPN `h2` (`cfg` must offer it) and completes the preface
/// exchange; returns the connection, idle.
pub async fn open(addr: SocketAddr, connector: &TlsConnector) -> Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await.context("connect")?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let mut tls = connector
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
        bail!("the server did not choose ALPN h2");
    }
    tls.write_all(&client_start()).await?;
    let mut preface = Preface::default();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = tls.read(&mut chunk).await?;
        if n == 0 {
            bail!("connection closed during the HTTP/2 preface");
        }
        let (reply, done) = preface.feed(&chunk[..n])?;
        if !reply.is_empty() {
            tls.write_all(&reply).await?;
            tls.flush().await?;
        }
        if done {
            return Ok(tls);
        }
    }
}

/// The client config of [`super::client::config`] offering ALPN `h2` instead.
pub fn config(http1: &ClientConfig) -> Arc<ClientConfig> {
    let mut cfg = http1.clone();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(flags: u8, payload: &[u8]) -> Vec<u8> {
        frame(SETTINGS, flags, payload)
    }

    #[test]
    fn client_start_is_preface_then_settings() {
        let s = client_start();
        assert!(s.starts_with(PREFACE));
        let rest = &s[PREFACE.len()..];
        assert_eq!(frame_header(rest), Some((6, SETTINGS, 0, 0)));
        assert_eq!(&rest[HEADER..], &[0, 2, 0, 0, 0, 0]);
    }

    #[test]
    fn acks_the_server_settings_and_waits_for_its_ack() {
        let mut p = Preface::default();
        let server = settings(0, &[0, 3, 0, 0, 0, 100]);
        // Split inside the header: nothing to do yet.
        let (reply, done) = p.feed(&server[..4]).expect("partial");
        assert!(reply.is_empty() && !done);
        let (reply, done) = p.feed(&server[4..]).expect("settings");
        assert_eq!(reply, settings(ACK, &[]));
        assert!(!done, "our SETTINGS not acknowledged yet");
        // A WINDOW_UPDATE, then the ACK of ours, in one read.
        let mut more = frame(0x8, 0, &[0, 0, 0xff, 0xff]);
        more.extend(settings(ACK, &[]));
        let (reply, done) = p.feed(&more).expect("ack");
        assert!(reply.is_empty());
        assert!(done);
    }

    #[test]
    fn refuses_goaway_and_malformed_settings() {
        let mut p = Preface::default();
        let mut goaway = settings(0, &[]);
        goaway.extend(frame(GOAWAY, 0, &[0, 0, 0, 0, 0, 0, 0, 1]));
        assert!(p.feed(&goaway).is_err());
        assert!(Preface::default().feed(&settings(ACK, &[0; 6])).is_err());
        assert!(Preface::default().feed(&settings(0, &[0; 5])).is_err());
        let mut on_stream = settings(0, &[]);
        on_stream[8] = 1;
        assert!(Preface::default().feed(&on_stream).is_err());
        assert!(Preface::default()
            .feed(&frame(0x8, 0, &[0, 0, 0, 1]))
            .is_err());
        let mut huge = settings(0, &[]);
        huge[0] = 1;
        assert!(Preface::default().feed(&huge).is_err());
    }

    #[test]
    fn offers_only_h2() {
        let http1 = super::super::client::config(vec![1]).expect("config");
        assert_eq!(config(&http1).alpn_protocols, vec![b"h2".to_vec()]);
    }
}

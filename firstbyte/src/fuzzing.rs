//! What the fuzz targets in `fuzz/` drive, in one place (not an API: hidden from the docs,
//! may change with the targets). Each parser or policy is reached the way the server reaches
//! it, with no socket and no clock.

pub use crate::conf::leaky::{bucket as leaky_bucket, Bucket, Rate, Verdict};
pub use crate::conf::load_str;
pub use crate::conf::realip::{RealIp, RealIpHeader, Trusted};
pub use crate::http::auth_basic::{credentials as auth_credentials, find_user as auth_find_user};
pub use crate::http::h2::hpack::{DecodeError as HpackError, Decoder as HpackDecoder};
pub use crate::http::static_files::{
    if_range_matches, parse_range, preconditions, ByteRange, Precondition,
};
pub use crate::http::uri::{encode_path, normalize_path, split_target, UriError};
pub use crate::net::proxy_protocol::{parse as proxy_protocol_parse, Parsed as ProxyParsed};
pub use crate::net::TcpInfo;
pub use crate::record::{DynRecMode, RecordPolicy, RecordSettings, MAX_RECORD_SIZE};
pub use http::header::{self, HeaderMap, HeaderName, HeaderValue};

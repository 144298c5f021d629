//! nginx's empty_gif module: a location's content is the smallest transparent 1x1 GIF, 43
//! bytes, `image/gif`, with nginx's `Last-Modified` (28 Sep 1970 06:00:00 GMT), so that
//! `If-Modified-Since` gets a 304 as from nginx. GET and HEAD only (405 otherwise).

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode};

use crate::conf::model::LocationConf;
use crate::http::body::Body;
use crate::http::static_files::{preconditions_with, Precondition};

/// The image: header, a 2-colour global table, a graphic control extension making colour 1
/// transparent, one 1x1 image and the trailer.
pub static GIF: [u8; 43] = [
    b'G', b'I', b'F', b'8', b'9', b'a', // header
    0x01, 0x00, 0x01, 0x00, // logical screen 1x1
    0x80, 0x01, 0x00, // global 1-bit colour table, background #1, no aspect ratio
    0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // colours: black, white
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, // graphic control: #1 transparent
    0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor 1x1
    0x02, 0x02, 0x4c, 0x01, 0x00, // LZW: clear, 1, end of information
    0x3b, // trailer
];

/// nginx's `last_modified_time` for the image: 23349600.
pub const MTIME: i64 = 23_349_600;

/// Answers the image, or the status for `error_page` (405).
pub fn serve(
    method: &Method,
    headers: &HeaderMap,
    loc: &LocationConf,
) -> Result<Response<Body>, StatusCode> {
    if *method != Method::GET && *method != Method::HEAD {
        return Err(StatusCode::METHOD_NOT_ALLOWED);
    }
    let mut resp = Response::new(Body::Empty);
    let h = resp.headers_mut();
    h.insert(
        header::LAST_MODIFIED,
        HeaderValue::from_static("Mon, 28 Sep 1970 06:00:00 GMT"),
    );
    match preconditions_with(headers, "", MTIME, loc.if_modified_since) {
        Precondition::Failed => return Err(StatusCode::PRECONDITION_FAILED),
        Precondition::NotModified => {
            *resp.status_mut() = StatusCode::NOT_MODIFIED;
            return Ok(resp);
        }
        Precondition::Proceed => {}
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/gif"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(GIF.len()));
    if *method == Method::GET {
        *resp.body_mut() = Body::full(bytes::Bytes::from_static(&GIF));
    }
    Ok(resp)
}

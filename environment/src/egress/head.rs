//! Reading an HTTP head (a client's request, an upstream proxy's answer)
//! within a size and a time, and parsing it.
//!
//! The whole head must arrive before the deadline, however slowly it
//! trickles (a per-read timeout would let one byte every few seconds hold
//! a connection forever), and the terminator is looked for only in what
//! just arrived, so a head sent a byte at a time costs linear work.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

#[derive(Debug, thiserror::Error)]
pub(crate) enum HeadError {
    #[error("head larger than {0} bytes")]
    TooLarge(usize),
    #[error("too many headers")]
    TooManyHeaders,
    #[error("head not complete in time")]
    Timeout,
    #[error("connection closed before the head ended")]
    Closed,
    #[error("malformed head: {0}")]
    Malformed(httparse::Error),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A head as read: its bytes, and where it ends (what follows is the
/// start of a body or of a tunnel's data, to be passed on).
pub(crate) struct RawHead {
    pub bytes: Vec<u8>,
    pub len: usize,
}

impl RawHead {
    pub fn rest(&self) -> &[u8] {
        &self.bytes[self.len..]
    }
}

/// Reads up to the end of a head (an empty line), at most `max` bytes,
/// within `timeout`.
pub(crate) async fn read_head<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
    timeout: Duration,
) -> Result<RawHead, HeadError> {
    tokio::time::timeout(timeout, read_head_unbounded_in_time(reader, max))
        .await
        .map_err(|_| HeadError::Timeout)?
}

async fn read_head_unbounded_in_time<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<RawHead, HeadError> {
    let mut bytes = Vec::with_capacity(1024.min(max));
    let mut chunk = [0u8; 4096];
    loop {
        let room = max - bytes.len();
        if room == 0 {
            return Err(HeadError::TooLarge(max));
        }
        let want = room.min(chunk.len());
        let n = reader.read(&mut chunk[..want]).await?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        // The terminator may straddle reads: look from three bytes back.
        let from = bytes.len().saturating_sub(3);
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(len) = head_end(&bytes, from) {
            return Ok(RawHead { bytes, len });
        }
    }
}

/// The index just past the first `\r\n\r\n` (or bare `\n\n`) at or after
/// `from`.
fn head_end(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len()).find_map(|i| {
        let tail = &bytes[i..];
        if tail.starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if tail.starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}

/// A parsed request head, owned.
#[derive(Debug)]
pub(crate) struct RequestHead {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, Vec<u8>)>,
}

pub(crate) fn parse_request(head: &RawHead, max_headers: usize) -> Result<RequestHead, HeadError> {
    let mut headers = vec![httparse::EMPTY_HEADER; max_headers];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(&head.bytes[..head.len]) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(HeadError::Closed),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(e) => return Err(HeadError::Malformed(e)),
    }
    Ok(RequestHead {
        method: request.method.unwrap_or_default().to_owned(),
        target: request.path.unwrap_or_default().to_owned(),
        headers: request
            .headers
            .iter()
            .map(|h| (h.name.to_owned(), h.value.to_vec()))
            .collect(),
    })
}

/// An upstream proxy's answer: its status code.
pub(crate) fn parse_response_status(head: &RawHead, max_headers: usize) -> Result<u16, HeadError> {
    let mut headers = vec![httparse::EMPTY_HEADER; max_headers];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&head.bytes[..head.len]) {
        Ok(httparse::Status::Complete(_)) => Ok(response.code.unwrap_or_default()),
        Ok(httparse::Status::Partial) => Err(HeadError::Closed),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
        Err(e) => Err(HeadError::Malformed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_head_ends_at_the_empty_line_and_keeps_what_follows() {
        let mut input: &[u8] =
            b"CONNECT a.invalid:443 HTTP/1.1\r\nHost: a.invalid:443\r\n\r\nHELLO";
        let head = read_head(&mut input, 1024, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(head.rest(), b"HELLO");
        let request = parse_request(&head, 8).unwrap();
        assert_eq!(request.method, "CONNECT");
        assert_eq!(request.target, "a.invalid:443");
        assert_eq!(request.headers.len(), 1);
    }

    #[tokio::test]
    async fn a_terminator_split_across_reads_is_found() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in [
                &b"GET http://a.invalid/ HTTP/1.1\r"[..],
                b"\n",
                b"\r",
                b"\nX",
            ] {
                client.write_all(piece).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            client
        });
        let head = read_head(&mut server, 1024, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(head.rest(), b"X");
        assert_eq!(parse_request(&head, 8).unwrap().target, "http://a.invalid/");
        drop(writer.await);
    }

    #[tokio::test]
    async fn too_large_and_too_many_headers_are_told_apart() {
        let big = format!(
            "GET http://a.invalid/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(2000)
        );
        let mut input = big.as_bytes();
        assert!(matches!(
            read_head(&mut input, 1024, Duration::from_secs(1)).await,
            Err(HeadError::TooLarge(1024))
        ));
        let many = format!(
            "GET http://a.invalid/ HTTP/1.1\r\n{}\r\n",
            "X: y\r\n".repeat(10)
        );
        let mut input = many.as_bytes();
        let head = read_head(&mut input, 1024, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(matches!(
            parse_request(&head, 8),
            Err(HeadError::TooManyHeaders)
        ));
    }
}

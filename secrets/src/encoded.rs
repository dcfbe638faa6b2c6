//! The host's own secrets as an agent could write them without writing
//! them: base64 (standard and URL-safe, at each of the three alignments a
//! value can have inside a longer encoded text), hex (either case) and
//! percent-encoding. Each form is searched for as the value itself is.
//!
//! Out of reach by design (docs/security.md): a value split across lines
//! or pieces, reversed, or encoded some other way (rot13, xor, a
//! compression other than gzip, zip's deflate and tar); what reads the
//! text is the forge's reviewer, and the scan narrows what an agent can
//! smuggle, it does not make it impossible.

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Forms shorter than this are not searched for: they would match
/// ordinary text.
const MIN_FORM_LEN: usize = 10;

/// Every encoded form of `value` to search for, the value itself left out.
pub fn forms(value: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for alphabet in [STANDARD, URL_SAFE] {
        for shift in 0..3 {
            out.push(base64_core(value, shift, alphabet));
        }
    }
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    out.push(hex.to_ascii_uppercase());
    out.push(hex);
    out.push(percent(value, true));
    out.push(percent(value, false));
    let raw = String::from_utf8_lossy(value);
    out.retain(|form| form.len() >= MIN_FORM_LEN && *form != raw);
    out.sort();
    out.dedup();
    out
}

/// The characters of base64 that depend on `value` alone when it starts
/// `shift` bytes into a 3-byte group of a longer text: whatever comes
/// before and after, these are in the encoding.
fn base64_core(value: &[u8], shift: usize, alphabet: &[u8; 64]) -> String {
    let mut bytes = vec![0u8; shift];
    bytes.extend_from_slice(value);
    let encoded = base64(&bytes, alphabet);
    // Character i holds bits [6i, 6i + 6); the value holds bits
    // [8 shift, 8 (shift + len)).
    let first = (8 * shift).div_ceil(6);
    let end = (8 * (shift + value.len())) / 6;
    encoded.get(first..end).unwrap_or_default().to_owned()
}

/// Base64 without padding.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Every byte but the unreserved ones (RFC 3986) as `%XX`.
fn percent(value: &[u8], upper: bool) -> String {
    value
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference encoder: what `base64` (coreutils) and Python give.
    fn full(bytes: &[u8]) -> String {
        let mut s = base64(bytes, STANDARD);
        while !s.len().is_multiple_of(4) {
            s.push('=');
        }
        s
    }

    #[test]
    fn base64_matches_the_reference_encoding() {
        assert_eq!(
            full(b"host-token-value-1234567"),
            "aG9zdC10b2tlbi12YWx1ZS0xMjM0NTY3"
        );
        assert_eq!(full(b"ab"), "YWI=");
        assert_eq!(full(b"a"), "YQ==");
    }

    #[test]
    fn a_secret_is_found_in_base64_at_every_alignment_and_in_hex_and_percent() {
        let secret = b"s3cr3t+value/with=signs";
        let forms = forms(secret);
        for prefix in ["", "K", "KE", "KEY", "TOKEN=", "export X="] {
            for suffix in ["", "\n", "!!", "&more"] {
                let text = [prefix.as_bytes(), secret, suffix.as_bytes()].concat();
                let std = full(&text);
                let url = std.replace('+', "-").replace('/', "_");
                for encoded in [std, url] {
                    assert!(
                        forms.iter().any(|f| encoded.contains(f.as_str())),
                        "{prefix:?} {suffix:?}: {encoded}"
                    );
                }
            }
        }
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        assert!(forms.contains(&hex) && forms.contains(&hex.to_uppercase()));
        assert!(forms.contains(&"s3cr3t%2Bvalue%2Fwith%3Dsigns".to_owned()));
        assert!(forms.contains(&"s3cr3t%2bvalue%2fwith%3dsigns".to_owned()));
    }
}

//! Checksummed frames and bounded decoding: how wispack stores bytes that
//! may come back damaged (checkpoint files, saved fits).
//!
//! A frame is
//!
//! ```text
//! magic | payload length (u64, LE) | FNV-1a-64 of (length bytes ++ payload) (u64, LE) | payload
//! ```
//!
//! Checkpoints append one frame per replicate (magic `WCKF`); a saved fit or
//! model is a single frame (magic `WISPSAVE`, see [`crate::saved`]). FNV-1a
//! changes with every single-byte change of its input (each step is a
//! bijection of the state), so a flipped byte never goes unnoticed.
//!
//! bincode allocates a string or byte vector of the length it reads before it
//! reads the contents, so one flipped length byte in a saved `"wisp"` object or
//! a checkpoint could ask for a terabyte, and a failed allocation aborts the
//! process (and R with it). A decode limit turns that into an error. bincode's
//! limit is a const generic, so the limit is picked from a few tiers: the
//! smallest that is at least [`CLAIM_PER_BYTE`] times the input length.

use serde::de::DeserializeOwned;

/// FNV-1a, 64 bits, over the concatenation of `parts`.
pub(crate) fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in *part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// Bytes of a frame's length and checksum fields.
const FRAME_FIELDS_BYTES: usize = 8 + 8;

/// Bytes before the payload of a frame with this magic.
pub(crate) fn frame_header_bytes(magic: &[u8]) -> usize {
    magic.len() + FRAME_FIELDS_BYTES
}

/// The frame holding `payload`.
pub(crate) fn encode_frame(magic: &[u8], payload: &[u8]) -> Vec<u8> {
    let length = (payload.len() as u64).to_le_bytes();
    let checksum = fnv1a64(&[&length, payload]).to_le_bytes();
    let mut frame = Vec::with_capacity(frame_header_bytes(magic) + payload.len());
    frame.extend_from_slice(magic);
    frame.extend_from_slice(&length);
    frame.extend_from_slice(&checksum);
    frame.extend_from_slice(payload);
    frame
}

/// Why the bytes at some position are not a valid frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// They do not start with the magic.
    Magic,
    /// They end before the frame does.
    Truncated,
    /// The length field is larger than the reader accepts.
    Length,
    /// The checksum does not match the length and payload.
    Checksum,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FrameError::Magic => "it does not start with the expected magic bytes",
            FrameError::Truncated => "it is cut short",
            FrameError::Length => "its length field is implausible",
            FrameError::Checksum => "its checksum does not match its contents",
        })
    }
}

/// The payload of the frame starting at `bytes[0]` and the frame's total
/// length. Payloads longer than `max_payload` bytes are refused unread.
pub(crate) fn frame_payload<'a>(
    magic: &[u8],
    bytes: &'a [u8],
    max_payload: u64,
) -> Result<(&'a [u8], usize), FrameError> {
    let header = frame_header_bytes(magic);
    if !bytes.starts_with(magic) {
        return Err(if magic.starts_with(bytes) {
            FrameError::Truncated
        } else {
            FrameError::Magic
        });
    }
    let fields = bytes
        .get(magic.len()..header)
        .ok_or(FrameError::Truncated)?;
    let length_bytes: [u8; 8] = fields[..8].try_into().map_err(|_| FrameError::Truncated)?;
    let checksum_bytes: [u8; 8] = fields[8..].try_into().map_err(|_| FrameError::Truncated)?;
    let length = u64::from_le_bytes(length_bytes);
    if length > max_payload {
        return Err(FrameError::Length);
    }
    let end = usize::try_from(length)
        .ok()
        .and_then(|length| header.checked_add(length))
        .ok_or(FrameError::Length)?;
    let payload = bytes.get(header..end).ok_or(FrameError::Truncated)?;
    if fnv1a64(&[&length_bytes, payload]) != u64::from_le_bytes(checksum_bytes) {
        return Err(FrameError::Checksum);
    }
    Ok((payload, end))
}

/// Bytes bincode may claim per input byte: a one-byte varint decodes to an
/// 8-byte integer, and nothing decodes to more; doubled for headroom.
const CLAIM_PER_BYTE: usize = 16;
/// Claimed bytes always allowed, so that tiny inputs get a usable limit.
const CLAIM_FLOOR: usize = 1 << 20;

/// Decodes `bytes` as exactly one `T` (standard configuration, no trailing
/// bytes), refusing any length field that claims more memory than the input
/// could describe. `what` names the thing in error messages.
pub(crate) fn decode_exact<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, String> {
    let needed = bytes
        .len()
        .saturating_mul(CLAIM_PER_BYTE)
        .saturating_add(CLAIM_FLOOR);
    let standard = bincode::config::standard();
    let decoded = if needed <= 1 << 24 {
        bincode::serde::decode_from_slice(bytes, standard.with_limit::<{ 1 << 24 }>())
    } else if needed <= 1 << 30 {
        bincode::serde::decode_from_slice(bytes, standard.with_limit::<{ 1 << 30 }>())
    } else if needed <= 1 << 36 {
        bincode::serde::decode_from_slice(bytes, standard.with_limit::<{ 1 << 36 }>())
    } else {
        return Err(format!(
            "cannot decode {what}: {} bytes is too large",
            bytes.len()
        ));
    };
    let (value, used) = decoded.map_err(|e| format!("cannot decode {what}: {e}"))?;
    if used != bytes.len() {
        return Err(format!(
            "cannot decode {what}: {} trailing bytes",
            bytes.len() - used
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Labelled {
        label: String,
        counts: Vec<u64>,
        values: Vec<f64>,
    }

    fn sample() -> Labelled {
        Labelled {
            label: "gene".into(),
            counts: (0..1000).collect(),
            values: (0..1000).map(|i| i as f64 / 7.0).collect(),
        }
    }

    fn encode(value: &Labelled) -> Vec<u8> {
        bincode::serde::encode_to_vec(value, bincode::config::standard()).unwrap()
    }

    #[test]
    fn fnv_matches_reference_values() {
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
    }

    #[test]
    fn frames_round_trip_and_every_damage_is_detected() {
        let payload: Vec<u8> = (0..200u32).map(|i| (i * 7 % 251) as u8).collect();
        let frame = encode_frame(b"TEST", &payload);
        assert_eq!(frame.len(), frame_header_bytes(b"TEST") + payload.len());
        assert_eq!(
            frame_payload(b"TEST", &frame, 1 << 20),
            Ok((&payload[..], frame.len()))
        );
        for at in 0..frame.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut damaged = frame.clone();
                damaged[at] ^= flip;
                assert!(
                    frame_payload(b"TEST", &damaged, 1 << 20).is_err(),
                    "byte {at}"
                );
            }
        }
        for cut in 0..frame.len() {
            assert!(
                frame_payload(b"TEST", &frame[..cut], 1 << 20).is_err(),
                "cut {cut}"
            );
        }
        assert_eq!(frame_payload(b"TEST", &frame, 10), Err(FrameError::Length));
        assert_eq!(
            frame_payload(b"OTHR", &frame, 1 << 20),
            Err(FrameError::Magic)
        );
    }

    #[test]
    fn valid_bytes_round_trip() {
        let value = sample();
        let decoded: Labelled = decode_exact(&encode(&value), "sample").unwrap();
        assert_eq!(decoded, value);
    }

    #[test]
    fn small_integers_decode_within_the_limit() {
        // Worst case for the claim: one-byte varints that each become 8 bytes.
        let value = Labelled {
            label: String::new(),
            counts: vec![1; 3_000_000],
            values: Vec::new(),
        };
        let bytes = encode(&value);
        assert!(bytes.len() < 3_100_000);
        let decoded: Labelled = decode_exact(&bytes, "sample").unwrap();
        assert_eq!(decoded.counts.len(), 3_000_000);
    }

    #[test]
    fn a_huge_string_length_is_an_error_not_an_allocation() {
        let mut bytes = encode(&sample());
        // The label's length is the first byte (4, a one-byte varint). Replace
        // it by the u64 varint for 2^40: without a limit bincode would try to
        // allocate a terabyte, and a failed allocation aborts the process.
        assert_eq!(bytes[0], 4);
        let mut corrupt = vec![253u8];
        corrupt.extend_from_slice(&(1u64 << 40).to_le_bytes());
        bytes.splice(0..1, corrupt);
        let error = decode_exact::<Labelled>(&bytes, "sample").unwrap_err();
        assert!(error.starts_with("cannot decode sample"), "{error}");
    }

    #[test]
    fn truncation_and_trailing_bytes_are_errors() {
        let bytes = encode(&sample());
        assert!(decode_exact::<Labelled>(&bytes[..bytes.len() - 1], "sample").is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        let error = decode_exact::<Labelled>(&longer, "sample").unwrap_err();
        assert!(error.contains("1 trailing bytes"), "{error}");
    }
}

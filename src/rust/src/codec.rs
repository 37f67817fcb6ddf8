//! Decoding bincode bytes that may be corrupt without trusting their length fields.
//!
//! bincode allocates a string or byte vector of the length it reads before it
//! reads the contents, so one flipped length byte in a saved `"wisp"` object or
//! a checkpoint could ask for a terabyte, and a failed allocation aborts the
//! process (and R with it). A decode limit turns that into an error. bincode's
//! limit is a const generic, so the limit is picked from a few tiers: the
//! smallest that is at least [`CLAIM_PER_BYTE`] times the input length.

use serde::de::DeserializeOwned;

/// Bytes bincode may claim per input byte: a one-byte varint decodes to an
/// 8-byte integer, and nothing decodes to more; doubled for headroom.
const CLAIM_PER_BYTE: usize = 16;
/// Claimed bytes always allowed, so that tiny inputs get a usable limit.
const CLAIM_FLOOR: usize = 1 << 20;

/// Decodes `bytes` as exactly one `T` (standard configuration, no trailing
/// bytes), refusing any length field that claims more memory than the input
/// could describe. `what` names the thing in error messages.
pub fn decode_exact<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, String> {
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

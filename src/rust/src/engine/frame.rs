//! Length-prefixed bincode frames: how a child reports each finished task.
//!
//! A frame is an 8-byte little-endian payload length followed by the payload.
//! Writing one frame per task, as soon as the task ends, means the parent keeps
//! every result a child finished even if the child dies later.

use serde::de::DeserializeOwned;
use serde::Serialize;

const HEADER_BYTES: usize = 8;
/// Refuse absurd lengths from a corrupted stream instead of trying to allocate them.
const MAX_PAYLOAD_BYTES: u64 = 1 << 40;

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes `value` as one frame: length header, then payload.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    let mut bytes = vec![0u8; HEADER_BYTES];
    bincode::serde::encode_into_std_write(value, &mut bytes, config())
        .map_err(|e| format!("cannot encode result: {e}"))?;
    let payload_len = (bytes.len() - HEADER_BYTES) as u64;
    bytes[..HEADER_BYTES].copy_from_slice(&payload_len.to_le_bytes());
    Ok(bytes)
}

/// Encodes `value` alone (no frame header): a task's value, which travels
/// inside its child's report.
pub(crate) fn encode_value<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    bincode::serde::encode_to_vec(value, config()).map_err(|e| format!("cannot encode result: {e}"))
}

/// Incremental decoder for a byte stream that arrives in arbitrary pieces.
#[derive(Default)]
pub(crate) struct FrameReader {
    buffer: Vec<u8>,
}

impl FrameReader {
    /// Appends bytes as they were read from the pipe.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
        // Reserve the whole frame at once so a large payload is not regrown many
        // times; fallibly, since a corrupt header can claim any length.
        if let Some(len) = self.pending_frame_len() {
            let _ = self
                .buffer
                .try_reserve(len.saturating_sub(self.buffer.len()));
        }
    }

    /// Total length (header included) of the frame at the front, once its header is in.
    fn pending_frame_len(&self) -> Option<usize> {
        let header: [u8; HEADER_BYTES] = self.buffer.get(..HEADER_BYTES)?.try_into().ok()?;
        let payload = u64::from_le_bytes(header).min(MAX_PAYLOAD_BYTES + 1);
        Some(HEADER_BYTES + payload as usize)
    }

    /// Decodes every complete frame received so far, in order.
    pub(crate) fn take_frames<T: DeserializeOwned>(&mut self) -> Result<Vec<T>, String> {
        let mut frames = Vec::new();
        let mut consumed = 0;
        loop {
            let rest = &self.buffer[consumed..];
            let Some(header) = rest.get(..HEADER_BYTES) else {
                break;
            };
            let payload_len = u64::from_le_bytes(header.try_into().expect("8-byte header"));
            if payload_len > MAX_PAYLOAD_BYTES {
                return Err(format!("corrupt frame: length {payload_len}"));
            }
            let end = HEADER_BYTES + payload_len as usize;
            let Some(payload) = rest.get(HEADER_BYTES..end) else {
                break;
            };
            frames.push(crate::codec::decode_exact::<T>(payload, "a frame")?);
            consumed += end;
        }
        self.buffer.drain(..consumed);
        if self.buffer.is_empty() {
            self.buffer.shrink_to(0);
        }
        Ok(frames)
    }

    /// Bytes of an incomplete frame still waiting for the rest.
    pub(crate) fn pending_bytes(&self) -> usize {
        self.buffer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_arbitrary_splits() {
        let values: Vec<Vec<f64>> = vec![vec![], vec![1.5], (0..10_000).map(f64::from).collect()];
        let stream: Vec<u8> = values.iter().flat_map(|v| encode(v).unwrap()).collect();
        for piece in [1usize, 7, 8, 9, 4096, stream.len()] {
            let mut reader = FrameReader::default();
            let mut decoded: Vec<Vec<f64>> = Vec::new();
            for chunk in stream.chunks(piece) {
                reader.extend(chunk);
                decoded.extend(reader.take_frames::<Vec<f64>>().unwrap());
            }
            assert_eq!(decoded, values, "piece size {piece}");
            assert_eq!(reader.pending_bytes(), 0);
        }
    }

    #[test]
    fn a_truncated_tail_stays_pending() {
        let bytes = encode(&vec![1.0f64, 2.0, 3.0]).unwrap();
        let mut reader = FrameReader::default();
        reader.extend(&bytes[..bytes.len() - 1]);
        assert!(reader.take_frames::<Vec<f64>>().unwrap().is_empty());
        assert_eq!(reader.pending_bytes(), bytes.len() - 1);
    }

    #[test]
    fn corrupt_lengths_and_payloads_are_errors() {
        let mut reader = FrameReader::default();
        reader.extend(&u64::MAX.to_le_bytes());
        assert!(reader.take_frames::<Vec<f64>>().is_err());

        let mut reader = FrameReader::default();
        let mut bytes = encode(&String::from("abc")).unwrap();
        bytes[HEADER_BYTES] = 200; // a string length longer than the payload
        reader.extend(&bytes);
        assert!(reader.take_frames::<String>().is_err());
    }
}

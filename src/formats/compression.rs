//! The record codecs of `CompressionType.java` (attributes bits 0-2), decompressed with a hard
//! cap on the output so that a small corrupt batch cannot make the parser allocate gigabytes.
//!
//! - gzip: `GzipCompression.wrapForInput`, a `java.util.zip.GZIPInputStream`, which reads
//!   concatenated gzip members, so [`flate2::read::MultiGzDecoder`] here.
//! - snappy: `SnappyCompression.wrapForInput`, an `org.xerial.snappy.SnappyInputStream`: the
//!   xerial framing (see [`xerial_snappy`]) around raw snappy blocks, not the snappy "framed"
//!   format of the snappy project.
//! - lz4: `Lz4Compression.wrapForInput`, Kafka's `Lz4BlockInputStream`: the standard LZ4 frame
//!   format. Magic v0 (Kafka 0.8-0.9) wrote a wrong frame-descriptor checksum, which Kafka
//!   ignores for v0; this decoder does not (v0 lz4 wrappers fail with a decompression error).
//! - zstd: `ZstdCompression.wrapForInput` (zstd-jni `ZstdInputStreamNoFinalizer`), one or more
//!   concatenated frames. Decoded with the pure-Rust `ruzstd` so the crate needs no C compiler.

use std::io::Read;

/// The most bytes one batch (or legacy wrapper message) may decompress to. Kafka's own limit
/// is the broker's `message.max.bytes` on the compressed size only; 64 MiB is far above any
/// real batch and keeps a hostile input's cost bounded.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

/// A batch's codec, attributes bits 0-2 (`CompressionType.forId`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// `CompressionType.forId`; ids 5-7 are unknown (Kafka throws `IllegalArgumentException`).
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// Kafka's name (`CompressionType.name`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Decompresses `input` with `codec`, refusing to produce more than `cap` bytes. The error is
/// a sentence (the caller adds the file position).
pub(crate) fn decompress(codec: Compression, input: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => read_capped(flate2::read::MultiGzDecoder::new(input), cap, "gzip"),
        Compression::Snappy => xerial_snappy(input, cap),
        Compression::Lz4 => read_capped(lz4_flex::frame::FrameDecoder::new(input), cap, "lz4"),
        Compression::Zstd => zstd(input, cap),
    }
}

fn read_capped(reader: impl Read, cap: usize, codec: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let limit = (cap as u64).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| format!("{codec} decompression failed: {e}"))?;
    if out.len() > cap {
        return Err(format!("{codec} data decompresses to more than {cap} bytes"));
    }
    Ok(out)
}

fn zstd(mut input: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let decoder = ruzstd::decoding::StreamingDecoder::new(&mut input)
            .map_err(|e| format!("zstd decompression failed: {e}"))?;
        let room = cap - out.len();
        let frame = read_capped(decoder, room, "zstd")?;
        out.extend_from_slice(&frame);
    }
    Ok(out)
}

/// `SnappyCodec.MAGIC_HEADER`: the first 8 of the 16-byte xerial stream header.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

/// `org.xerial.snappy.SnappyInputStream`: a 16-byte header (the magic, then version and
/// minimum compatible version as big-endian i32), then chunks of `[i32 length][raw snappy
/// block]` to the end. A chunk length equal to the magic's first 4 bytes starts a concatenated
/// stream (its header is skipped, as snappy-java does). Input that does not start with the
/// magic is one raw snappy block, as `SnappyInputStream.readHeader` falls back to.
pub(crate) fn xerial_snappy(input: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    if input.len() < XERIAL_HEADER_LEN || input[..8] != XERIAL_MAGIC {
        let mut out = Vec::new();
        raw_snappy_into(input, cap, &mut out)?;
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut pos = XERIAL_HEADER_LEN;
    while pos < input.len() {
        let Some(len_bytes) = input.get(pos..pos + 4) else {
            // snappy-java stops quietly on a torn chunk length; so does Kafka's reader.
            break;
        };
        let len_raw = [len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]];
        if len_raw == [XERIAL_MAGIC[0], XERIAL_MAGIC[1], XERIAL_MAGIC[2], XERIAL_MAGIC[3]] {
            pos += XERIAL_HEADER_LEN;
            continue;
        }
        let len = i32::from_be_bytes(len_raw);
        pos += 4;
        if len < 0 || len as usize > input.len() - pos {
            return Err(format!("snappy chunk length {len} at byte {} exceeds the {} bytes left", pos - 4, input.len() - pos));
        }
        let chunk = &input[pos..pos + len as usize];
        raw_snappy_into(chunk, cap, &mut out)?;
        pos += len as usize;
    }
    Ok(out)
}

fn raw_snappy_into(block: &[u8], cap: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let n = snap::raw::decompress_len(block).map_err(|e| format!("snappy decompression failed: {e}"))?;
    if n > cap - out.len() {
        return Err(format!("snappy data decompresses to more than {cap} bytes"));
    }
    let start = out.len();
    out.resize(start + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| format!("snappy decompression failed: {e}"))?;
    out.truncate(start + written);
    Ok(())
}

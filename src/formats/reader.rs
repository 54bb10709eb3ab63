//! A bounds-checked big-endian cursor with Kafka's zig-zag varints (`ByteUtils.java`). Every
//! read either returns a value or a [`Fault`] naming the position; nothing here allocates more
//! than the slice it was given.

/// Why a read failed, at `at` (0-based, relative to the start of the cursor's slice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    pub at: usize,
    pub reason: String,
}

impl Fault {
    pub(crate) fn new(at: usize, reason: impl Into<String>) -> Self {
        Fault { at, reason: reason.into() }
    }
}

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next `n` bytes, or a fault naming what was wanted (`what`) and how much is left.
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Fault> {
        if n > self.remaining() {
            return Err(Fault::new(
                self.pos,
                format!("{what} needs {n} bytes but only {} remain", self.remaining()),
            ));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Fault> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub(crate) fn i8(&mut self, what: &str) -> Result<i8, Fault> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn i16(&mut self, what: &str) -> Result<i16, Fault> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn i32(&mut self, what: &str) -> Result<i32, Fault> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Fault> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn i64(&mut self, what: &str) -> Result<i64, Fault> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn byte(&mut self, what: &str) -> Result<u8, Fault> {
        Ok(self.array::<1>(what)?[0])
    }

    /// `ByteUtils.readVarint`: an unsigned LEB128 of at most 5 bytes, zig-zag decoded. As in
    /// Kafka, the 5th byte's bits above the 32nd are dropped, and a continuation bit in the 5th
    /// byte is an error ("Varint is too long").
    pub(crate) fn varint(&mut self, what: &str) -> Result<i32, Fault> {
        let start = self.pos;
        let mut raw: u32 = 0;
        for i in 0..5 {
            let b = self.byte(what)?;
            raw |= ((b & 0x7f) as u32).wrapping_shl(7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
            }
        }
        Err(Fault::new(start, format!("{what}: varint is too long (continuation bit set in its 5th byte)")))
    }

    /// `ByteUtils.readVarlong`: at most 10 bytes, zig-zag decoded; a continuation bit in the
    /// 10th byte is an error ("Varlong is too long").
    pub(crate) fn varlong(&mut self, what: &str) -> Result<i64, Fault> {
        let start = self.pos;
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.byte(what)?;
            raw |= ((b & 0x7f) as u64).wrapping_shl(7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(Fault::new(start, format!("{what}: varlong is too long (continuation bit set in its 10th byte)")))
    }

    /// Kafka's nullable bytes with a varint length (`Utils.readBytes`): a negative length is
    /// null, a length beyond the remaining bytes is an error.
    pub(crate) fn varint_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, Fault> {
        let at = self.pos;
        let len = self.varint(what)?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > self.remaining() {
            return Err(Fault::new(at, format!("{what} length {len} exceeds the {} bytes remaining", self.remaining())));
        }
        self.take(len, what).map(Some)
    }
}

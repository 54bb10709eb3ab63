//! Borrowed trace columns: plain slices and validity bitmaps, the shape of Arrow arrays
//! without any Arrow type, so that the bindings can hand over foreign buffers without a copy.

use crate::error::TraceError;

/// An Arrow-style validity bitmap: bit `offset + i` (least significant bit first) is 1 when
/// row `i` holds a value.
#[derive(Clone, Copy, Debug)]
pub struct Validity<'a> {
    pub bits: &'a [u8],
    pub offset: usize,
}

impl Validity<'_> {
    #[inline]
    pub fn is_valid(&self, i: usize) -> bool {
        let j = self.offset + i;
        self.bits[j >> 3] & (1 << (j & 7)) != 0
    }
}

/// A primitive column; `validity` `None` means no nulls.
#[derive(Clone, Copy, Debug)]
pub struct Column<'a, T> {
    pub values: &'a [T],
    pub validity: Option<Validity<'a>>,
}

impl<'a, T: Copy> Column<'a, T> {
    pub fn new(values: &'a [T]) -> Self {
        Self { values, validity: None }
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        match self.validity {
            Some(v) if !v.is_valid(i) => None,
            _ => Some(self.values[i]),
        }
    }
}

/// A `list<uint64>` column: row `i` is `values[offsets[i] .. offsets[i + 1]]`.
#[derive(Clone, Copy, Debug)]
pub struct ListColumn<'a> {
    pub offsets: &'a [i32],
    pub values: &'a [u64],
    pub validity: Option<Validity<'a>>,
}

impl<'a> ListColumn<'a> {
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u64]> {
        if let Some(v) = self.validity {
            if !v.is_valid(i) {
                return None;
            }
        }
        Some(&self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
}

/// One chunk of a trace, column by column (`docs/trace-format.md`). Optional columns that are
/// absent behave as all-null. Build with [`TraceColumns::new`], which checks the shapes so
/// that the replay never indexes out of bounds.
#[derive(Clone, Copy, Debug)]
pub struct TraceColumns<'a> {
    pub len: usize,
    pub kind: Column<'a, u8>,
    pub broker: Option<Column<'a, u32>>,
    pub partition: Option<Column<'a, u32>>,
    pub event: Option<Column<'a, u64>>,
    pub time_ms: Option<Column<'a, i64>>,
    pub epoch: Option<Column<'a, u32>>,
    pub offset: Option<Column<'a, u64>>,
    pub leader: Option<Column<'a, u32>>,
    pub record_count: Option<Column<'a, u32>>,
    pub flags: Option<Column<'a, u8>>,
    pub values: Option<ListColumn<'a>>,
    pub producer_id: Option<Column<'a, u64>>,
    pub producer_epoch: Option<Column<'a, u16>>,
    pub base_sequence: Option<Column<'a, u32>>,
}

impl<'a> TraceColumns<'a> {
    /// Columns of `kind.values.len()` rows, all others absent.
    pub fn new(kind: Column<'a, u8>) -> Self {
        Self {
            len: kind.values.len(),
            kind,
            broker: None,
            partition: None,
            event: None,
            time_ms: None,
            epoch: None,
            offset: None,
            leader: None,
            record_count: None,
            flags: None,
            values: None,
            producer_id: None,
            producer_epoch: None,
            base_sequence: None,
        }
    }

    /// Checks that every column has `len` rows, that validity bitmaps cover them and that list
    /// offsets are non-decreasing and within the child values. `first_row` numbers the rows
    /// in the error.
    pub fn validate(&self, first_row: u64) -> Result<(), TraceError> {
        let bad = |reason: String| TraceError::Malformed { row: first_row, reason };
        fn check<T>(c: &Option<Column<'_, T>>, name: &str, len: usize) -> Result<(), String> {
            if let Some(c) = c {
                if c.values.len() != len {
                    return Err(format!("column '{name}' has {} rows, expected {len}", c.values.len()));
                }
                if let Some(v) = c.validity {
                    if v.bits.len() * 8 < v.offset + len {
                        return Err(format!("column '{name}': validity bitmap too short"));
                    }
                }
            }
            Ok(())
        }
        let len = self.len;
        check(&Some(self.kind), "kind", len).map_err(bad)?;
        check(&self.broker, "broker", len).map_err(bad)?;
        check(&self.partition, "partition", len).map_err(bad)?;
        check(&self.event, "event", len).map_err(bad)?;
        check(&self.time_ms, "time_ms", len).map_err(bad)?;
        check(&self.epoch, "epoch", len).map_err(bad)?;
        check(&self.offset, "offset", len).map_err(bad)?;
        check(&self.leader, "leader", len).map_err(bad)?;
        check(&self.record_count, "record_count", len).map_err(bad)?;
        check(&self.flags, "flags", len).map_err(bad)?;
        check(&self.producer_id, "producer_id", len).map_err(bad)?;
        check(&self.producer_epoch, "producer_epoch", len).map_err(bad)?;
        check(&self.base_sequence, "base_sequence", len).map_err(bad)?;
        if let Some(l) = &self.values {
            if l.offsets.len() != len + 1 {
                return Err(bad(format!("column 'values' has {} offsets, expected {}", l.offsets.len(), len + 1)));
            }
            if let Some(v) = l.validity {
                if v.bits.len() * 8 < v.offset + len {
                    return Err(bad("column 'values': validity bitmap too short".into()));
                }
            }
            let mut prev = l.offsets[0];
            for (i, &o) in l.offsets.iter().enumerate() {
                if o < prev || o < 0 || o as usize > l.values.len() {
                    return Err(TraceError::Malformed {
                        row: first_row + i.saturating_sub(1) as u64,
                        reason: format!("column 'values': list offset {o} out of order or beyond {} values", l.values.len()),
                    });
                }
                prev = o;
            }
        }
        Ok(())
    }
}

//! Zero-copy import of Arrow record batches through the Arrow C Data Interface and the
//! PyCapsule protocol (`__arrow_c_array__`), without the `arrow` crate.
//!
//! `obj.__arrow_c_array__()` returns two capsules, `"arrow_schema"` and `"arrow_array"`,
//! each owning a C struct (layout below, from the Arrow specification). We do not take the
//! structs out of the capsules: we keep the capsule objects alive in [`ImportedBatch`] and
//! borrow the buffers as slices for as long as it lives; when it is dropped the capsules are
//! released by Python, whose destructors call the structs' `release` callbacks. So nothing
//! here frees or releases anything itself, and a slice can never outlive its buffer: the
//! borrow checker ties every [`TraceColumns`] to `&ImportedBatch`.
//!
//! Only the layouts the trace format uses are read: a struct (`+s`, the record batch) of
//! primitive columns (`C` u8, `S` u16, `I` u32, `L` u64, `l` i64), the null type (`n`, read
//! as an absent column) and `list<uint64>` (`+l` with an `L` child). Any other format is a
//! `TraceError` naming the column, never a panic; so are a missing data buffer, a buffer not
//! aligned for its type and lengths that do not cover the batch.

use std::ffi::{c_char, c_void, CStr};

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::error::TraceError;
use crate::replay::{Column, ListColumn, TraceColumns, Validity};

/// `struct ArrowSchema` of the C Data Interface.
#[repr(C)]
struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

/// `struct ArrowArray` of the C Data Interface.
#[repr(C)]
struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// A record batch imported from Python: the capsules (kept alive) and their structs.
pub(crate) struct ImportedBatch {
    _capsules: (Py<PyCapsule>, Py<PyCapsule>),
    schema: *const ArrowSchema,
    array: *const ArrowArray,
}

fn type_error(row: u64, reason: String) -> TraceError {
    TraceError::Malformed { row, reason }
}

impl ImportedBatch {
    /// Calls `obj.__arrow_c_array__()` (a `pyarrow.RecordBatch` or anything implementing the
    /// PyCapsule interface for a struct array). `TypeError` if `obj` does not implement it.
    pub(crate) fn import(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if !obj.hasattr("__arrow_c_array__")? {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "expected an Arrow record batch (an object with __arrow_c_array__), got {}",
                obj.get_type().name()?
            )));
        }
        let pair = obj.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>().map_err(PyErr::from)?;
        let schema_capsule = pair.get_item(0)?.cast_into::<PyCapsule>().map_err(PyErr::from)?;
        let array_capsule = pair.get_item(1)?.cast_into::<PyCapsule>().map_err(PyErr::from)?;
        let schema = schema_capsule.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *const ArrowSchema;
        let array = array_capsule.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *const ArrowArray;
        // SAFETY: the capsules are named as the PyCapsule interface specifies, so they hold
        // these structs; a released struct (release == NULL) must not be read.
        unsafe {
            if (*schema).release.is_none() || (*array).release.is_none() {
                return Err(pyo3::exceptions::PyValueError::new_err("the Arrow capsules were already consumed"));
            }
        }
        Ok(Self { _capsules: (schema_capsule.unbind(), array_capsule.unbind()), schema, array })
    }

    /// The trace columns of this batch, borrowed. `first_row` numbers rows in errors.
    pub(crate) fn columns(&self, first_row: u64) -> Result<TraceColumns<'_>, TraceError> {
        // SAFETY: both structs live in capsules owned by `self`; their producer guarantees the
        // buffers stay valid until release, which happens only after `self` is dropped.
        unsafe { self.columns_unchecked(first_row) }
    }

    unsafe fn columns_unchecked(&self, first_row: u64) -> Result<TraceColumns<'_>, TraceError> {
        let (schema, array) = (&*self.schema, &*self.array);
        let err = |reason: String| type_error(first_row, reason);
        let format = cstr(schema.format);
        if format != "+s" {
            return Err(err(format!("expected a record batch (Arrow struct '+s'), got format '{format}'")));
        }
        if array.n_children != schema.n_children || array.n_children < 0 {
            return Err(err("record batch schema and array disagree on the number of columns".into()));
        }
        if array.null_count > 0 {
            return Err(err("record batch with null rows".into()));
        }
        let (offset, len) = (array.offset.max(0) as usize, array.length.max(0) as usize);
        let mut kind = None;
        let mut cols = TraceColumns::new(Column::new(&[]));
        for c in 0..array.n_children as usize {
            let cs = &**schema.children.add(c);
            let ca = &**array.children.add(c);
            let name = cstr(cs.name);
            let f = cstr(cs.format);
            if f == "n" {
                continue; // all-null column: same as absent
            }
            let field = Field { schema: cs, array: ca, name: &name, format: &f, parent_offset: offset, len, first_row };
            match name.as_str() {
                "kind" => kind = Some(field.primitive::<u8>("C")?),
                "broker" => cols.broker = Some(field.primitive("I")?),
                "partition" => cols.partition = Some(field.primitive("I")?),
                "event" => cols.event = Some(field.primitive("L")?),
                "time_ms" => cols.time_ms = Some(field.primitive("l")?),
                "epoch" => cols.epoch = Some(field.primitive("I")?),
                "offset" => cols.offset = Some(field.primitive("L")?),
                "leader" => cols.leader = Some(field.primitive("I")?),
                "record_count" => cols.record_count = Some(field.primitive("I")?),
                "flags" => cols.flags = Some(field.primitive("C")?),
                "producer_id" => cols.producer_id = Some(field.primitive("L")?),
                "producer_epoch" => cols.producer_epoch = Some(field.primitive("S")?),
                "base_sequence" => cols.base_sequence = Some(field.primitive("I")?),
                "values" => cols.values = Some(field.list_u64()?),
                _ => {} // columns the replay does not use (isr, ...) are ignored
            }
        }
        let kind = kind.ok_or_else(|| err("the trace has no 'kind' column".into()))?;
        cols.kind = kind;
        cols.len = len;
        cols.validate(first_row)?;
        Ok(cols)
    }
}

unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

fn type_name(format: &str) -> &'static str {
    match format {
        "C" => "uint8",
        "S" => "uint16",
        "I" => "uint32",
        "L" => "uint64",
        "c" => "int8",
        "s" => "int16",
        "i" => "int32",
        "l" => "int64",
        "+l" => "list",
        "+L" => "large_list",
        "u" | "U" => "string",
        "b" => "bool",
        _ => "another type",
    }
}

/// One child of the record batch, with the batch's offset and length.
struct Field<'s> {
    schema: &'s ArrowSchema,
    array: &'s ArrowArray,
    name: &'s str,
    format: &'s str,
    parent_offset: usize,
    len: usize,
    first_row: u64,
}

impl Field<'_> {
    fn err(&self, reason: String) -> TraceError {
        type_error(self.first_row, format!("column '{}': {reason}", self.name))
    }

    fn wrong_type(&self, expected: &str) -> TraceError {
        self.err(format!("Arrow type {} ('{}'), expected {} ('{expected}')", type_name(self.format), self.format, type_name(expected)))
    }

    /// Start of this column's rows within its buffers, checking that it has them.
    fn start(&self) -> Result<usize, TraceError> {
        if !self.schema.dictionary.is_null() {
            return Err(self.err("dictionary-encoded columns are not supported".into()));
        }
        let (own, length) = (self.array.offset, self.array.length);
        if own < 0 || length < 0 || (length as usize) < self.parent_offset + self.len {
            return Err(self.err(format!("{length} rows do not cover the batch's {} rows at offset {}", self.len, self.parent_offset)));
        }
        Ok(own as usize + self.parent_offset)
    }

    unsafe fn buffer(&self, i: usize) -> *const c_void {
        *self.array.buffers.add(i)
    }

    unsafe fn validity(&self, start: usize) -> Option<Validity<'static>> {
        let bits = self.buffer(0);
        if self.array.null_count == 0 || bits.is_null() {
            return None;
        }
        Some(Validity { bits: std::slice::from_raw_parts(bits as *const u8, (start + self.len).div_ceil(8)), offset: start })
    }

    unsafe fn primitive<T: Copy>(&self, expected: &str) -> Result<Column<'static, T>, TraceError> {
        if self.format != expected {
            return Err(self.wrong_type(expected));
        }
        if self.array.n_buffers != 2 {
            return Err(self.err(format!("{} buffers, expected 2", self.array.n_buffers)));
        }
        let start = self.start()?;
        let data = self.buffer(1) as *const T;
        let values: &[T] = if self.len == 0 {
            &[]
        } else {
            if data.is_null() || !data.is_aligned() {
                return Err(self.err("data buffer missing or not aligned".into()));
            }
            &std::slice::from_raw_parts(data, start + self.len)[start..]
        };
        Ok(Column { values, validity: self.validity(start) })
    }

    unsafe fn list_u64(&self) -> Result<ListColumn<'static>, TraceError> {
        if self.format != "+l" {
            return Err(self.err(format!("Arrow type {} ('{}'), expected list<uint64> ('+l')", type_name(self.format), self.format)));
        }
        if self.array.n_buffers != 2 || self.array.n_children != 1 || self.schema.n_children != 1 {
            return Err(self.err("malformed list array".into()));
        }
        let start = self.start()?;
        let (cs, ca) = (&**self.schema.children, &**self.array.children);
        let child_format = cstr(cs.format);
        if child_format != "L" || ca.n_buffers != 2 {
            return Err(self.err(format!("list items of Arrow type {} ('{child_format}'), expected uint64 ('L')", type_name(&child_format))));
        }
        if ca.null_count > 0 {
            return Err(self.err("null record values".into()));
        }
        let offsets_ptr = self.buffer(1) as *const i32;
        if offsets_ptr.is_null() || !offsets_ptr.is_aligned() {
            return Err(self.err("offsets buffer missing or not aligned".into()));
        }
        let offsets = &std::slice::from_raw_parts(offsets_ptr, start + self.len + 1)[start..];
        let (c_off, c_len) = (ca.offset.max(0) as usize, ca.length.max(0) as usize);
        let data = *ca.buffers.add(1) as *const u64;
        let values: &[u64] = if c_len == 0 {
            &[]
        } else {
            if data.is_null() || !data.is_aligned() {
                return Err(self.err("values buffer missing or not aligned".into()));
            }
            &std::slice::from_raw_parts(data, c_off + c_len)[c_off..]
        };
        Ok(ListColumn { offsets, values, validity: self.validity(start) })
    }
}

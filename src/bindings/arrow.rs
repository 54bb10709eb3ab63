//! Zero-copy import of Arrow record batches through the Arrow C Data Interface and the
//! PyCapsule protocol (`__arrow_c_array__`), with arrow-rs's FFI (`arrow_array::ffi`).
//!
//! `obj.__arrow_c_array__()` returns two capsules, `"arrow_schema"` and `"arrow_array"`,
//! each owning a C struct. As the PyCapsule interface asks of a consumer, the array struct is
//! *moved* out of its capsule (`FFI_ArrowArray::from_raw` leaves a released one behind, so the
//! capsule's destructor does nothing) and the schema is only read. arrow-rs then owns the
//! producer's buffers: they stay valid while [`ImportedBatch`] lives and the producer's
//! `release` callback runs when it is dropped. The borrow checker ties every
//! [`TraceColumns`] to `&ImportedBatch`.
//!
//! arrow-rs checks the import: `ArrayData::validate_full` rejects lengths and offsets that do
//! not fit the buffers the C structs describe (and under-aligned buffers are copied aligned).
//! A hostile object can still hand over pointers to memory it does not own; no importer of
//! the C Data Interface can detect that. Only the layouts the trace format uses are read: a
//! struct (the record batch) of primitive columns (uint8, uint16, uint32, uint64, int64), the
//! null type (read as an absent column) and `list<uint64>`. Any other type is a `TraceError`
//! naming the column, never a panic.
//!
//! Until 2026-11 this module read the C structs itself (ten `unsafe` blocks, no check of list
//! offsets against their items). Measured with both builds on the same machine
//! (a script not kept in the repository; `docs/measurements.md`, "Trace import"): replaying
//! one 806,428-row batch took the same time (0.21-0.28 s either way, the spread being the
//! machine's load); the fixed cost
//! of importing a batch rose from about 6 to 14-17 µs (`validate_full`), immaterial next to
//! the replay of a row group. So the maintained library replaced it.

use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::types::{Int64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, StructArray};
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::error::TraceError;
use crate::replay::{Column, ListColumn, TraceColumns, Validity};

/// A record batch imported from Python, owned by arrow-rs, or why it could not be imported
/// (reported with the caller's row number by [`ImportedBatch::columns`]).
pub(crate) struct ImportedBatch {
    batch: Result<StructArray, String>,
}

fn type_error(row: u64, reason: String) -> TraceError {
    TraceError::Malformed { row, reason }
}

impl ImportedBatch {
    /// Calls `obj.__arrow_c_array__()` (a `pyarrow.RecordBatch` or anything implementing the
    /// PyCapsule interface for a struct array). `TypeError` if `obj` does not implement it,
    /// `ValueError` if its capsules were already consumed.
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
        let schema = schema_capsule.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *mut FFI_ArrowSchema;
        let array = array_capsule.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *mut FFI_ArrowArray;
        // SAFETY: the capsules are named as the PyCapsule interface specifies, so they hold
        // these structs, alive while the capsules are (both are held here). A released struct
        // (release == NULL) is refused before anything else is read from it.
        let (schema, array) = unsafe { (&*schema, &mut *array) };
        if schema.release().is_none() || array.is_released() {
            return Err(pyo3::exceptions::PyValueError::new_err("the Arrow capsules were already consumed"));
        }
        // arrow-rs asserts (panics) where a producer's structs disagree with their type
        // (buffer or child counts, null child pointers): `shape` checks those first, and any
        // assertion left (a pointer that lies) is caught here and reported as bad data.
        let batch = catch_unwind(AssertUnwindSafe(|| -> Result<StructArray, String> {
            let data_type = DataType::try_from(schema).map_err(|e| format!("invalid Arrow schema: {e}"))?;
            if !matches!(data_type, DataType::Struct(_)) {
                return Err(format!("expected a record batch (Arrow struct '+s'), got {}", type_name(&data_type)));
            }
            shape(&data_type, array, "record batch")?;
            // SAFETY: `from_raw` moves the array out of its capsule and leaves a released
            // struct behind (so the capsule's destructor releases nothing); `from_ffi` takes
            // ownership of the producer's buffers as the interface defines them, and
            // `validate_full` then checks every length and offset against them.
            let data = unsafe { from_ffi(FFI_ArrowArray::from_raw(array), schema) }
                .map_err(|e| format!("invalid Arrow data: {e}"))?;
            data.validate_full().map_err(|e| format!("invalid Arrow data: {e}"))?;
            Ok(StructArray::from(data))
        }))
        .unwrap_or_else(|_| Err("malformed Arrow C data (its structs contradict their own type)".into()));
        Ok(Self { batch })
    }

    /// The trace columns of this batch, borrowed. `first_row` numbers rows in errors.
    pub(crate) fn columns(&self, first_row: u64) -> Result<TraceColumns<'_>, TraceError> {
        let err = |reason: String| type_error(first_row, reason);
        let batch = self.batch.as_ref().map_err(|reason| err(reason.clone()))?;
        if batch.null_count() > 0 {
            return Err(err("record batch with null rows".into()));
        }
        let len = batch.len();
        let mut kind = None;
        let mut cols = TraceColumns::new(Column::new(&[]));
        for (field, array) in batch.fields().iter().zip(batch.columns()) {
            let col = Field { name: field.name(), array, first_row };
            match array.data_type() {
                DataType::Null => continue, // all-null column: same as absent
                DataType::Dictionary(_, _) => return Err(col.err("dictionary-encoded columns are not supported".into())),
                _ => {}
            }
            match field.name().as_str() {
                "kind" => kind = Some(col.primitive::<UInt8Type>()?),
                "broker" => cols.broker = Some(col.primitive::<UInt32Type>()?),
                "partition" => cols.partition = Some(col.primitive::<UInt32Type>()?),
                "event" => cols.event = Some(col.primitive::<UInt64Type>()?),
                "time_ms" => cols.time_ms = Some(col.primitive::<Int64Type>()?),
                "epoch" => cols.epoch = Some(col.primitive::<UInt32Type>()?),
                "offset" => cols.offset = Some(col.primitive::<UInt64Type>()?),
                "leader" => cols.leader = Some(col.primitive::<UInt32Type>()?),
                "record_count" => cols.record_count = Some(col.primitive::<UInt32Type>()?),
                "flags" => cols.flags = Some(col.primitive::<UInt8Type>()?),
                "producer_id" => cols.producer_id = Some(col.primitive::<UInt64Type>()?),
                "producer_epoch" => cols.producer_epoch = Some(col.primitive::<UInt16Type>()?),
                "base_sequence" => cols.base_sequence = Some(col.primitive::<UInt32Type>()?),
                "values" => cols.values = Some(col.list_u64()?),
                _ => {} // columns the replay does not use (isr, ...) are ignored
            }
        }
        cols.kind = kind.ok_or_else(|| err("the trace has no 'kind' column".into()))?;
        cols.len = len;
        cols.validate(first_row)?;
        Ok(cols)
    }
}

/// The trace format's name of an Arrow type, for error messages.
fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::UInt8 => "uint8".into(),
        DataType::UInt16 => "uint16".into(),
        DataType::UInt32 => "uint32".into(),
        DataType::UInt64 => "uint64".into(),
        DataType::Int8 => "int8".into(),
        DataType::Int16 => "int16".into(),
        DataType::Int32 => "int32".into(),
        DataType::Int64 => "int64".into(),
        DataType::List(item) => format!("list<{}>", type_name(item.data_type())),
        DataType::LargeList(item) => format!("large_list<{}>", type_name(item.data_type())),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Boolean => "bool".into(),
        DataType::Struct(_) => "struct".into(),
        other => other.to_string(),
    }
}

/// Checks that `array` has the buffers and children `data_type` needs, recursively (what
/// arrow-rs's import asserts instead of reporting). `where_` names the place in errors.
fn shape(data_type: &DataType, array: &FFI_ArrowArray, where_: &str) -> Result<(), String> {
    let layout = arrow_data::layout(data_type);
    if layout.variadic {
        return Err(format!("{where_}: Arrow view types ({}) are not supported", type_name(data_type)));
    }
    let buffers = layout.buffers.len() + usize::from(layout.can_contain_null_mask);
    if array.num_buffers() < buffers {
        return Err(format!("{where_}: {} buffers, Arrow type {} needs {buffers}", array.num_buffers(), type_name(data_type)));
    }
    let children: Vec<(String, &DataType)> = match data_type {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::ListView(f)
        | DataType::LargeListView(f) | DataType::Map(f, _) => vec![(format!("{where_} items"), f.data_type())],
        DataType::Struct(fields) => fields.iter().map(|f| (format!("column '{}'", f.name()), f.data_type())).collect(),
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| (format!("{where_} member '{}'", f.name()), f.data_type())).collect(),
        DataType::RunEndEncoded(ends, values) => vec![
            (format!("{where_} run ends"), ends.data_type()),
            (format!("{where_} values"), values.data_type()),
        ],
        _ => Vec::new(),
    };
    if array.num_children() != children.len() {
        return Err(format!("{where_}: {} children, Arrow type {} has {}", array.num_children(), type_name(data_type), children.len()));
    }
    for (i, (name, child_type)) in children.iter().enumerate() {
        shape(child_type, array.child(i), name)?;
    }
    if let DataType::Dictionary(_, values) = data_type {
        let dictionary = array.dictionary().ok_or_else(|| format!("{where_}: dictionary-encoded without a dictionary"))?;
        shape(values, dictionary, where_)?;
    }
    Ok(())
}

/// The validity bitmap of `array`, if it has nulls.
fn validity(array: &dyn Array) -> Option<Validity<'_>> {
    array
        .nulls()
        .filter(|nulls| nulls.null_count() > 0)
        .map(|nulls| Validity { bits: nulls.inner().values(), offset: nulls.offset() })
}

/// One column of the record batch (already sliced to the batch's rows by arrow-rs).
struct Field<'a> {
    name: &'a str,
    array: &'a ArrayRef,
    first_row: u64,
}

impl<'a> Field<'a> {
    fn err(&self, reason: String) -> TraceError {
        type_error(self.first_row, format!("column '{}': {reason}", self.name))
    }

    fn primitive<T: ArrowPrimitiveType>(&self) -> Result<Column<'a, T::Native>, TraceError> {
        let array = self.array.as_primitive_opt::<T>().ok_or_else(|| {
            self.err(format!("Arrow type {}, expected {}", type_name(self.array.data_type()), type_name(&T::DATA_TYPE)))
        })?;
        Ok(Column { values: array.values(), validity: validity(array) })
    }

    fn list_u64(&self) -> Result<ListColumn<'a>, TraceError> {
        let wrong = || self.err(format!("Arrow type {}, expected list<uint64>", type_name(self.array.data_type())));
        let list = self.array.as_list_opt::<i32>().ok_or_else(wrong)?;
        let items = list.values().as_primitive_opt::<UInt64Type>().ok_or_else(wrong)?;
        if items.null_count() > 0 {
            return Err(self.err("null record values".into()));
        }
        Ok(ListColumn { offsets: list.value_offsets(), values: items.values(), validity: validity(list) })
    }
}

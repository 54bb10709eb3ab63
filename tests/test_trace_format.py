"""Trace format: schema round trips, the Arrow C data interface import, damaged files."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from epochlab import _core, trace  # noqa: E402
from epochlab.errors import TraceError  # noqa: E402


def _rows(table):
    return table.to_pylist()


@pytest.mark.parametrize("suffix", [".parquet", ".arrows"])
def test_round_trip_keeps_rows_types_and_metadata(tmp_path: Path, suffix: str) -> None:
    t = trace.generate(300, leader_changes=5, replicas=3, seed=4, crash_every=9)
    path = trace.write_trace(t, tmp_path / f"t{suffix}", row_group_rows=97)
    back = trace.read_trace(path)
    assert back.schema.remove_metadata() == trace.schema().remove_metadata()
    assert _rows(back) == _rows(t)
    assert back.schema.metadata[b"epochlab-trace"] == b"1"
    assert trace.replay(path).replicas == trace.replay(t).replicas


def test_normalize_casts_compatible_columns_and_refuses_others() -> None:
    t = pa.table({"kind": pa.array([0], pa.int64()), "broker": pa.array([1], pa.int64()),
                  "epoch": [0], "values": [[5, 6]]})
    n = trace.normalize(t)
    assert n.schema.field("broker").type == pa.uint32() and n.column("event").to_pylist() == [0]
    assert trace.replay(t).replicas[0]["log_end_offset"] == 2
    with pytest.raises(TraceError) as e:
        trace.normalize(pa.table({"kind": [0], "broker": ["one"]}))
    assert e.value.row == 0 and "broker" in e.value.message
    with pytest.raises(TraceError):
        trace.normalize(pa.table({"broker": [1]}))


def test_wrong_version_is_refused(tmp_path: Path) -> None:
    t = trace.generate(10).replace_schema_metadata({b"epochlab-trace": b"2"})
    import pyarrow.parquet as pq

    pq.write_table(t, tmp_path / "v2.parquet")
    with pytest.raises(TraceError, match="version 2"):
        trace.replay(tmp_path / "v2.parquet")


def test_c_data_import_of_sliced_batches_with_nulls() -> None:
    """Every column sliced at a nonzero offset (the list's child too) replays like a copy."""
    t = trace.generate(500, leader_changes=10, seed=2)
    whole = t.combine_chunks().to_batches()[0]
    r1 = _core.Replayer()
    r1.replay_batch(whole, 0)
    r2 = _core.Replayer()
    cut = 137
    r2.replay_batch(whole.slice(0, cut), 0)
    tail = whole.slice(cut)
    assert tail.column(tail.schema.get_field_index("values")).offset == cut
    r2.replay_batch(tail, cut)
    assert r1.replicas() == r2.replicas() and r2.rows == whole.num_rows
    assert _core.check_trace_batch(tail) == whole.num_rows - cut


def test_c_data_import_type_errors_never_panic() -> None:
    with pytest.raises(TypeError):
        _core.Replayer().replay_batch([1, 2, 3], 0)
    bad = pa.record_batch({"kind": pa.array([0], pa.uint8()), "broker": pa.array([1], pa.int64())})
    with pytest.raises(TraceError) as e:
        _core.Replayer().replay_batch(bad, 10)
    assert e.value.row == 10 and "'broker'" in e.value.reason and "uint32" in e.value.reason
    no_kind = pa.record_batch({"broker": pa.array([1], pa.uint32())})
    with pytest.raises(TraceError, match="no 'kind'"):
        _core.check_trace_batch(no_kind)
    strings = pa.record_batch({"kind": pa.array([0], pa.uint8()),
                               "values": pa.array([["a"]], pa.list_(pa.string()))})
    with pytest.raises(TraceError, match="uint64"):
        _core.check_trace_batch(strings)
    unknown = pa.record_batch({"kind": pa.array([0, 99], pa.uint8()), "broker": pa.array([1, 1], pa.uint32()),
                               "epoch": pa.array([0, 0], pa.uint32()),
                               "values": pa.array([[1], [2]], pa.list_(pa.uint64()))})
    r = _core.Replayer()
    with pytest.raises(TraceError) as e:
        r.replay_batch(unknown, 0)
    assert e.value.row == 1 and r.rows == 1  # the good row before it was applied
    nulls = pa.record_batch({"kind": pa.array([0], pa.uint8()), "broker": pa.array([None], pa.uint32())})
    with pytest.raises(TraceError, match="broker is null"):
        _core.Replayer().replay_batch(nulls, 0)


class _ArrowArray(ctypes.Structure):
    pass


class _ArrowSchema(ctypes.Structure):
    pass


_RELEASE_ARRAY = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowArray))
_RELEASE_SCHEMA = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowSchema))
_ArrowArray._fields_ = [  # the C Data Interface's struct ArrowArray
    ("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)), ("children", ctypes.POINTER(ctypes.POINTER(_ArrowArray))),
    ("dictionary", ctypes.POINTER(_ArrowArray)), ("release", _RELEASE_ARRAY), ("private_data", ctypes.c_void_p)]
_ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(_ArrowSchema))), ("dictionary", ctypes.POINTER(_ArrowSchema)),
    ("release", _RELEASE_SCHEMA), ("private_data", ctypes.c_void_p)]


class _LyingBatch:
    """A record batch exported through the C Data Interface, its structs then edited to
    contradict their own type, handed over in capsules as ``__arrow_c_array__`` does."""

    def __init__(self, batch, damage) -> None:
        self.array, self.schema = _ArrowArray(), _ArrowSchema()
        batch._export_to_c(ctypes.addressof(self.array), ctypes.addressof(self.schema))
        self.saved = damage(self.array)

    def __arrow_c_array__(self, requested_schema=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return (new(ctypes.addressof(self.schema), b"arrow_schema", None),
                new(ctypes.addressof(self.array), b"arrow_array", None))

    def release(self) -> None:
        """Undo the damage and release what the importer did not take."""
        self.saved()
        if self.array.release:
            self.array.release(ctypes.pointer(self.array))
        if self.schema.release:
            self.schema.release(ctypes.pointer(self.schema))


def _fewer_children(array):
    array.n_children -= 1
    return lambda: setattr(array, "n_children", array.n_children + 1)


def _column_without_data_buffer(array):
    child = array.children[1].contents
    child.n_buffers = 1
    return lambda: setattr(child, "n_buffers", 2)


def _list_without_items(array):
    child = array.children[2].contents
    child.n_children = 0
    return lambda: setattr(child, "n_children", 1)


def _offsets_past_the_items(array):
    offsets = ctypes.cast(array.children[2].contents.buffers[1], ctypes.POINTER(ctypes.c_int32))
    old = offsets[2]
    offsets[2] = 1 << 20
    return lambda: offsets.__setitem__(2, old)


@pytest.mark.parametrize("damage", [_fewer_children, _column_without_data_buffer, _list_without_items,
                                    _offsets_past_the_items])
def test_c_data_import_of_structs_that_lie_is_a_typed_error(damage) -> None:
    """Structs that contradict their own type (a producer's bug or a hostile object) are a
    TraceError naming the problem, never a panic or a read outside the buffers; the replayer
    stays usable."""
    batch = pa.record_batch({"kind": pa.array([0, 0, 0], pa.uint8()), "broker": pa.array([1, 1, 1], pa.uint32()),
                             "values": pa.array([[1], [2], [3]], pa.list_(pa.uint64()))})
    lying = _LyingBatch(batch, damage)
    try:
        with pytest.raises(TraceError) as e:
            _core.check_trace_batch(lying, 7)
        assert e.value.row == 7 and ("buffers" in e.value.reason or "children" in e.value.reason
                                     or "invalid Arrow data" in e.value.reason), e.value.reason
    finally:
        lying.release()
    assert _core.check_trace_batch(batch) == 3
    consumed = _LyingBatch(batch, lambda array: (lambda: None))
    capsules = consumed.__arrow_c_array__()
    consumed.array.release(ctypes.pointer(consumed.array))  # as if another reader took it
    with pytest.raises(ValueError, match="already consumed"):
        _core.check_trace_batch(type("Taken", (), {"__arrow_c_array__": lambda self, s=None: capsules})())
    consumed.release()


def _damage(path: Path, at_fraction: float) -> None:
    data = bytearray(path.read_bytes())
    i = int(len(data) * at_fraction)
    data[i:i + 64] = bytes(64)
    path.write_bytes(bytes(data))


def test_corrupt_parquet_reports_the_row_group_and_keeps_earlier_rows(tmp_path: Path) -> None:
    t = trace.generate(4000, leader_changes=20, seed=3)
    path = trace.write_trace(t, tmp_path / "c.parquet", row_group_rows=1000)
    _damage(path, 0.6)
    report = trace.replay(path)
    err = report.error
    assert isinstance(err, TraceError) and err.path == str(path)
    assert err.row % 1000 == 0 and 0 < err.row < t.num_rows
    assert report.rows == err.row  # every row before the damage was replayed
    expected = trace.replay(t.slice(0, err.row))
    assert report.replicas == expected.replicas
    with pytest.raises(TraceError) as raised:
        trace.replay(path, raise_on_error=True)
    assert raised.value.report.rows == err.row  # type: ignore[attr-defined]


def test_truncated_ipc_stream_keeps_every_complete_batch(tmp_path: Path) -> None:
    t = trace.generate(3000, leader_changes=10, seed=5)
    path = trace.write_trace(t, tmp_path / "c.arrows", row_group_rows=700)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.55)])
    report = trace.replay(path)
    assert report.error is not None and report.error.row % 700 == 0 and report.error.row > 0
    assert report.rows == report.error.row
    assert report.replicas == trace.replay(t.slice(0, report.error.row)).replicas


def test_truncated_parquet_names_the_missing_footer(tmp_path: Path) -> None:
    path = trace.write_trace(trace.generate(100), tmp_path / "t.parquet")
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(TraceError) as e:
        trace.replay(path)
    assert e.value.row == 0 and "footer" in e.value.message


def test_cli_replay_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from epochlab.cli import main

    ok = tmp_path / "ok.parquet"
    assert main(["trace", "generate", str(ok), "--batches", "500", "--leader-changes", "5"]) == 0
    assert main(["trace", "replay", str(ok), "--json"]) == 0
    import json

    out = capsys.readouterr().out
    assert json.loads(out[out.index("{"):])["verdict"] == "ok"
    bad = pa.table({"kind": pa.array([4], pa.uint8()), "broker": pa.array([1], pa.uint32()),
                    "offset": pa.array([9], pa.uint64())})
    bad_path = trace.write_trace(bad, tmp_path / "bad.parquet")
    assert main(["trace", "replay", str(bad_path)]) == 1
    assert "Inv-HW-bounds" in capsys.readouterr().out
    assert main(["trace", "replay", str(tmp_path / "missing.parquet")]) == 2


def test_python_vocabulary_matches_the_core() -> None:
    from epochlab.trace.reference import NAMES

    assert list(trace.KINDS) == _core._TRACE_KINDS
    assert sorted(NAMES.values()) == sorted(_core._TRACE_INVARIANTS)


def _flip_name_in_footer(path: Path, name: bytes, replacement: bytes) -> None:
    """Overwrite every occurrence of ``name`` in the Parquet footer (the schema's column names;
    the Arrow schema copy stored there is base64 and does not contain it literally) by
    ``replacement`` of the same length: what a flipped bit in a name byte does."""
    data = bytearray(path.read_bytes())
    footer_len = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_len
    footer = bytes(data[start:len(data) - 8])
    assert name in footer
    data[start:len(data) - 8] = footer.replace(name, replacement)
    path.write_bytes(bytes(data))


def test_a_column_renamed_by_damage_is_refused_not_read_as_absent(tmp_path: Path) -> None:
    """A hostile input: one flipped bit in the footer renamed a column and changed the verdict."""
    t = trace.generate(500, leader_changes=6, seed=2, crash_every=7)
    path = trace.write_trace(t, tmp_path / "t.parquet", row_group_rows=128)
    _flip_name_in_footer(path, b"offset", b"offsev")
    with pytest.raises(TraceError) as damaged:
        trace.replay(path)
    assert damaged.value.row == 0 and "offsev" in damaged.value.message and "damaged" in damaged.value.message
    # an optional column read as nulls would change the verdict silently: refused alike
    path = trace.write_trace(t, tmp_path / "p.parquet", row_group_rows=128)
    _flip_name_in_footer(path, b"producer_id", b"producer_ie")
    with pytest.raises(TraceError, match="damaged"):
        trace.replay(path)
    # a trace from another writer (no epochlab.columns): a one-character twin of an absent
    # column is a damaged name; a genuinely added column is still ignored
    meta = {b"epochlab-trace": b"1"}
    plain = trace.normalize(t).replace_schema_metadata(meta)
    import pyarrow.parquet as pq

    renamed = plain.rename_columns(["offsev" if c == "offset" else c for c in plain.column_names])
    pq.write_table(renamed.replace_schema_metadata(meta), tmp_path / "other.parquet")
    with pytest.raises(TraceError, match="'offsev'.*'offset'"):
        trace.replay(tmp_path / "other.parquet", raise_on_error=True)
    added = plain.append_column("isr", pa.array([None] * plain.num_rows, pa.string()))
    pq.write_table(added.replace_schema_metadata(meta), tmp_path / "added.parquet")
    assert trace.replay(tmp_path / "added.parquet").replicas == trace.replay(t).replicas


def test_event_numbers_continue_across_row_groups(tmp_path: Path) -> None:
    """A hostile input: without an event column, numbers restarted in every row group."""
    import pyarrow.parquet as pq

    t = trace.normalize(trace.generate(300, leader_changes=3, seed=8))
    no_events = t.drop_columns(["event"])
    pq.write_table(no_events, tmp_path / "e.parquet", row_group_size=64)
    events = [row for _, batch in trace.open_trace(tmp_path / "e.parquet").batches()
              for row in batch.column("event").to_pylist()]
    assert events == list(range(t.num_rows))


def test_a_trace_read_back_may_gain_a_column_in_memory(tmp_path: Path) -> None:
    """The written-columns check is for files: a table read back, given a column and written
    again (or replayed in memory), is not a damaged file."""
    t = trace.generate(50, seed=1)
    path = trace.write_trace(t, tmp_path / "t.parquet")
    back = trace.read_trace(path)
    assert b"epochlab.columns" in back.schema.metadata
    grown = back.append_column("isr", pa.array([None] * back.num_rows, pa.string()))
    assert trace.replay(grown).replicas == trace.replay(t).replicas
    again = trace.write_trace(grown, tmp_path / "again.parquet")
    assert trace.replay(again).replicas == trace.replay(t).replicas

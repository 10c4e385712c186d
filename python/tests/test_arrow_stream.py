"""The tables Rust computes cross to Python without a copy: `_hvaudit`
hands out objects that export their batches through the Arrow C stream
interface (the Arrow PyCapsule interface), which pyarrow and polars
import in place."""

import ctypes

import pyarrow as pa
import pytest

import hvaudit

SAMPLES = "samples/incident"
TABLES = ["findings", "inputs", "evidence", "bad_lines"]


def _capsule_name(capsule) -> bytes:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule)


def _addresses(table: pa.Table) -> list:
    """Where each of the table's (non-empty) buffers lives, children's too."""
    return [
        b.address
        for column in table.columns
        for chunk in column.chunks
        for b in chunk.buffers()
        if b is not None and b.size > 0
    ]


@pytest.fixture(scope="module")
def report():
    return hvaudit.audit(SAMPLES)


def _stream(report, name):
    return getattr(report._inner, f"{name}_arrow")()


@pytest.mark.parametrize("name", TABLES)
def test_report_tables_are_arrow_c_streams(report, name):
    stream = _stream(report, name)
    capsule = stream.__arrow_c_stream__()
    assert type(capsule).__name__ == "PyCapsule"
    assert _capsule_name(capsule) == b"arrow_array_stream"
    table = pa.table(stream)
    assert table.num_rows == stream.num_rows > 0
    assert table.equals(getattr(report, name))
    assert pa.RecordBatchReader.from_stream(stream).read_all().equals(table)
    # `__arrow_c_schema__`: the stream's schema on its own.
    assert pa.schema(stream) == table.schema


def test_sql_rows_are_an_arrow_c_stream():
    query = "SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY n DESC, type"
    session = hvaudit.Session(SAMPLES)
    stream = session._inner.sql(query)
    assert _capsule_name(stream.__arrow_c_stream__()) == b"arrow_array_stream"
    table = pa.table(stream)
    # Two runs of the query: `type`'s dictionary may list its values in
    # another order, the rows are the same.
    again = session.sql(query)
    assert table.schema == again.schema
    assert table.to_pylist() == again.to_pylist()
    assert table.column_names == ["type", "n"]


def test_each_call_gives_a_fresh_stream_and_a_moved_one_is_not_released(report):
    stream = _stream(report, "evidence")
    # A capsule nobody imports is released by its destructor.
    unused = stream.__arrow_c_stream__()
    del unused
    capsule = stream.__arrow_c_stream__()
    reader = pa.RecordBatchReader._import_from_c_capsule(capsule)
    # The import moved the stream out of the capsule: dropping the capsule
    # must leave the reader's stream alone.
    del capsule
    assert reader.read_all().equals(report.evidence)
    # The stream is consumed; the object makes a new one on each call.
    assert pa.table(stream).equals(report.evidence)


def test_no_copy_the_arrays_point_into_the_batches_rust_holds(report):
    # The audit keeps its evidence batches: every export of them, from one
    # object or from two, hands over the same buffers. (An IPC stream, as
    # before, gave each call a copy at addresses of its own.)
    stream = _stream(report, "evidence")
    first = pa.table(stream)
    addresses = _addresses(first)
    assert addresses
    assert _addresses(pa.table(stream)) == addresses
    assert _addresses(pa.table(_stream(report, "evidence"))) == addresses
    assert _addresses(report.evidence) == addresses
    # Nor does pyarrow allocate the table's memory on import: the buffers
    # are Rust's.
    before = pa.total_allocated_bytes()
    table = pa.table(_stream(report, "evidence"))
    assert table.nbytes > 0
    assert pa.total_allocated_bytes() - before < table.nbytes


def test_the_tables_outlive_the_report_and_its_streams():
    report = hvaudit.audit(SAMPLES)
    expected = report.findings.to_pylist()
    table = pa.table(_stream(report, "findings"))
    del report
    import gc

    gc.collect()
    assert table.to_pylist() == expected


@pytest.mark.parametrize("name", TABLES)
def test_polars_reads_the_streams(report, name):
    import polars as pl

    frame = pl.DataFrame(_stream(report, name))
    assert frame.height == getattr(report, name).num_rows
    assert frame.columns == getattr(report, name).column_names
    assert frame.equals(hvaudit.to_polars(getattr(report, name)))

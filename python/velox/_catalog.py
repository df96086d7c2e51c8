"""Catalog rows as NumPy structured arrays and astropy Tables.

The dtype is built from the C++ catalog column table (src/io/catalog.cpp), so every column of a
``velox fit`` catalog appears here, in the same order, with the same byte layout as the HDF5
``/catalog`` dataset: int32/int64/float64 native, bool one byte, strings fixed-length bytes
(``S128``, null-padded). Units and descriptions are in the dtype metadata and in the module-level
dicts ``UNITS`` and ``DESCRIPTIONS``.
"""

import numpy as np

from . import _core

_FORMATS = {"int32": np.int32, "int64": np.int64, "float64": np.float64, "bool": np.bool_}


def _catalog_dtype():
    columns, itemsize = _core.catalog_layout()
    names, formats, offsets, units, descriptions = [], [], [], {}, {}
    for name, kind, offset, nbytes, unit, desc in columns:
        names.append(name)
        formats.append("S%d" % nbytes if kind == "string" else _FORMATS[kind])
        offsets.append(offset)
        units[name] = unit
        descriptions[name] = desc
    spec = {"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize}
    dtype = np.dtype(spec, metadata={"units": units, "descriptions": descriptions})
    return dtype, units, descriptions


CATALOG_DTYPE, UNITS, DESCRIPTIONS = _catalog_dtype()


def records_to_rows(records):
    """The packed records (uint8 array from _core) viewed as a structured array (no copy)."""
    return records.view(CATALOG_DTYPE)


def to_table(rows, meta=None):
    """An astropy Table of catalog rows with units, descriptions and ``meta``.

    rows: structured array with the catalog dtype (as returned by velox.fit, velox.fit_files,
    velox.read_catalog). String columns are decoded to str. Raises ImportError without astropy.
    """
    from astropy.table import Table

    table = Table(np.asarray(rows))
    for name in table.colnames:
        table[name].unit = UNITS.get(name) or None
        table[name].description = DESCRIPTIONS.get(name, "")
    table.convert_bytestring_to_unicode()
    if meta:
        table.meta.update(meta)
    return table


def as_output(rows, table, meta=None):
    """rows, or their astropy Table when ``table`` is true."""
    return to_table(rows, meta) if table else rows


def read_catalog(path, *, table=False, epochs=False):
    """Read a velox catalog (``velox fit`` output, HDF5) into a structured array.

    path: the catalog file. Returns the rows of /catalog (structured array, dtype
    ``velox.CATALOG_DTYPE``; units in ``dtype.metadata["units"]``), or an astropy Table with
    units, descriptions and the file's provenance attributes as ``meta`` when ``table=True``.
    epochs=True: ``(stars, epochs)``, the /epochs rows of a ``--epochs`` catalog as the second
    (same dtype; empty without --epochs).
    Raises OSError when the file cannot be read or is not a velox catalog.
    """
    records, provenance = _core.read_catalog(str(path))
    rows = records_to_rows(records)
    stars = as_output(rows[rows["EPOCH"] < 0], table, provenance)
    if not epochs:
        return stars
    return stars, as_output(rows[rows["EPOCH"] >= 0], table, provenance)

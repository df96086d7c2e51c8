"""Helpers of velox's commands (plot_fit, qa_catalog): catalog bit names and matplotlib.

Imported as velox._scripts in the package, or as _scripts when a command runs as a file from
a checkout (scripts/*.py) or from share/velox/scripts: numpy and h5py only, no velox._core.
"""
import sys


def bit_names(cat_ds, attr="RVS_WARN_BITS"):
    """{bit: name} from a /catalog attribute RVS_WARN_BITS or FIT_INFO_BITS ("0:NAME,...")."""
    text = cat_ds.attrs.get(attr, b"")
    text = text.decode() if isinstance(text, bytes) else str(text)
    return {int(k): v for k, v in (item.split(":", 1) for item in text.split(",") if ":" in item)}


def decode_bits(value, names):
    """'NAME|NAME' of the bits set in value ("none" for 0); unnamed bits as bitN."""
    bits = [b for b in range(64) if (int(value) >> b) & 1]
    return "|".join(names.get(b, f"bit{b}") for b in bits) if bits else "none"


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only), or exit naming the package."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("needs matplotlib (Debian python3-matplotlib, or pip install matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt

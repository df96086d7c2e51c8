#!/usr/bin/python3
"""A one-page QA summary of a velox catalog, or of an --output-dir run.

usage: velox-qa-catalog CATALOG.h5|DIR [--merged MERGED.h5] [--out PNG] [--json JSON]
       (from a checkout: scripts/qa_catalog.py, the same command)

CATALOG.h5: a `velox fit` catalog (/catalog). DIR: a `velox fit --output-dir DIR` folder: its
per-input catalogs DIR/*.velox.h5 together, with DIR/status.tsv's counts of finished and failed
inputs; --merged names that run's `--merge` catalog, whose rows must be the per-input ones
(same count, same TARGETID and SOURCE_FILE multiset; a mismatch is reported and exits 1).

The page: the Kiel diagram (TEFF against LOGG, both axes inverted, coloured by FEH), the VRAD
and FEH distributions (SUCCESS rows), VRAD_ERR against the median S/N per pixel of each arm
(SN_B, SN_R, SN_Z for DESI; SN for one-arm spectra: LAMOST, SDSS), the SUCCESS count and the
count of rows with each RVS_WARN bit, and a text panel (rows, SUCCESS, RVS_WARN == 0, medians,
FIT_INFO counts, inputs). Bit names come from the catalog's RVS_WARN_BITS and FIT_INFO_BITS
attributes. --json writes the numbers behind the panels (counts per bit, medians, the points
of each panel), for tests and reports. Needs numpy, h5py and matplotlib (not velox's module).
"""
import argparse
import collections
import csv
import glob
import json
import os
import sys

import h5py
import numpy as np

try:
    from . import _scripts
except ImportError:  # run as a file: _scripts.py is beside it
    import _scripts

COLUMNS = ("TARGETID", "SOURCE_FILE", "VRAD", "VRAD_ERR", "TEFF", "LOGG", "FEH", "SN", "SN_B",
           "SN_R", "SN_Z", "RVS_WARN", "FIT_INFO", "SUCCESS")
ARMS = ("B", "R", "Z")
ARM_COLOR = {"B": "tab:blue", "R": "tab:red", "Z": "tab:brown", "ALL": "k"}


def read_catalogs(paths):
    """The COLUMNS of /catalog of every path, concatenated, and the first one's bit names."""
    parts = collections.defaultdict(list)
    names = info_names = None
    for p in paths:
        with h5py.File(p, "r") as f:
            ds = f["catalog"]
            cat = ds[:]
            if names is None:
                names = _scripts.bit_names(ds)
                info_names = _scripts.bit_names(ds, "FIT_INFO_BITS")
        for c in COLUMNS:
            parts[c].append(cat[c])
    rows = {c: np.concatenate(parts[c]) if parts[c] else np.zeros(0) for c in COLUMNS}
    rows["SUCCESS"] = rows["SUCCESS"].astype(bool)
    return rows, names or {}, info_names or {}


def read_status(path):
    """{status: count} of an --output-dir's status.tsv (None where there is none)."""
    if not os.path.exists(path):
        return None
    with open(path, newline="") as fh:
        return dict(collections.Counter(r["status"] for r in csv.DictReader(fh, delimiter="\t")))


def bit_counts(values, names):
    """{name: rows with the bit set} for every named bit (zeros included) and unnamed set bits."""
    v = np.asarray(values, np.int64)
    bits = set(names) | {b for b in range(63) if np.any((v >> b) & 1)}
    return {names.get(b, f"bit{b}"): int(np.count_nonzero((v >> b) & 1)) for b in sorted(bits)}


def median(x):
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.size else None


def err_vs_sn(rows, ok):
    """Per arm the (S/N, VRAD_ERR) points of SUCCESS rows: SN_<arm> where measured; ALL: SN of
    the rows without any per-arm S/N (one-arm spectra)."""
    series = {}
    per_arm = np.zeros(len(ok), bool)
    for arm in ARMS:
        has = np.isfinite(rows["SN_" + arm])
        per_arm |= has
        series[arm] = ok & has & np.isfinite(rows["VRAD_ERR"])
    series["ALL"] = ok & ~per_arm & np.isfinite(rows["SN"]) & np.isfinite(rows["VRAD_ERR"])
    out = {}
    for arm, sel in series.items():
        if sel.any():
            sn = rows["SN" if arm == "ALL" else "SN_" + arm][sel]
            out[arm] = {"n": int(sel.sum()), "median_sn": median(sn),
                        "median_vrad_err": median(rows["VRAD_ERR"][sel]), "sel": sel, "sn": sn}
    return out


def summarize(rows, names, info_names):
    ok = rows["SUCCESS"]
    kiel = ok & np.isfinite(rows["TEFF"]) & np.isfinite(rows["LOGG"])
    return {
        "n_rows": int(len(ok)),
        "n_success": int(ok.sum()),
        "n_rvs_warn_zero": int(np.count_nonzero(rows["RVS_WARN"] == 0)),
        "rvs_warn_bits": bit_counts(rows["RVS_WARN"], names),
        "fit_info_bits": bit_counts(rows["FIT_INFO"], info_names),
        "medians_success": {c: median(rows[c][ok]) for c in ("VRAD", "VRAD_ERR", "TEFF", "LOGG",
                                                             "FEH", "SN")},
        "kiel_points": int(kiel.sum()),
        "vrad_hist_points": int(np.count_nonzero(ok & np.isfinite(rows["VRAD"]))),
        "feh_hist_points": int(np.count_nonzero(ok & np.isfinite(rows["FEH"]))),
        "vrad_err_vs_sn": {k: {x: v[x] for x in ("n", "median_sn", "median_vrad_err")}
                           for k, v in err_vs_sn(rows, ok).items()},
    }


def check_merged(path, rows, out_dir):
    """The merged catalog against the per-input rows: {path, rows, matches, why}."""
    with h5py.File(path, "r") as f:
        cat = f["catalog"][:]
        of = f.attrs.get("merge_of_output_dir", "")
    of = of.decode() if isinstance(of, bytes) else str(of)
    key = collections.Counter(zip(rows["TARGETID"].tolist(), rows["SOURCE_FILE"].tolist()))
    mkey = collections.Counter(zip(cat["TARGETID"].tolist(), cat["SOURCE_FILE"].tolist()))
    why = []
    if len(cat) != len(rows["TARGETID"]):
        why.append(f"{len(cat)} rows, the per-input catalogs {len(rows['TARGETID'])}")
    elif key != mkey:
        why.append("its TARGETID/SOURCE_FILE pairs differ from the per-input catalogs'")
    if of and os.path.realpath(of) != os.path.realpath(out_dir):
        why.append(f"it merges {of}, not {out_dir}")
    return {"path": path, "rows": int(len(cat)), "matches": not why, "why": "; ".join(why)}


def plot(rows, s, title, lines, out, width):
    plt = _scripts.pyplot()
    from matplotlib.ticker import LogFormatter
    ok = rows["SUCCESS"]
    fig, ax = plt.subplots(2, 3, figsize=(width, width * 0.62))
    fig.suptitle(title, fontsize=10)
    # Kiel diagram
    a = ax[0, 0]
    bad = ~ok & np.isfinite(rows["TEFF"]) & np.isfinite(rows["LOGG"])
    a.scatter(rows["TEFF"][bad], rows["LOGG"][bad], s=8, marker="x", color="0.6", lw=0.6,
              label=f"not SUCCESS ({bad.sum()}; some may lie outside)")
    k = ok & np.isfinite(rows["TEFF"]) & np.isfinite(rows["LOGG"])
    sc = a.scatter(rows["TEFF"][k], rows["LOGG"][k], c=rows["FEH"][k], s=12, cmap="viridis",
                   edgecolors="none", label=f"SUCCESS ({k.sum()})")
    fig.colorbar(sc, ax=a, label="[Fe/H] [dex]", pad=0.01)
    if k.sum() > 1:  # the SUCCESS rows' range: a white dwarf's 20000 K would squeeze them
        for lim, col in ((a.set_xlim, "TEFF"), (a.set_ylim, "LOGG")):
            lo, hi = np.percentile(rows[col][k], [0, 100])
            pad = 0.06 * (hi - lo) + (50 if col == "TEFF" else 0.05)
            lim(hi + pad, lo - pad)  # inverted
    elif k.any() or bad.any():
        a.invert_xaxis()
        a.invert_yaxis()
    a.set_xlabel("TEFF [K]")
    a.set_ylabel("LOGG [dex]")
    a.set_title("Kiel diagram", fontsize=9)
    a.legend(fontsize=7, loc="upper left")
    # distributions
    for a, col, unit in ((ax[0, 1], "VRAD", "km/s"), (ax[0, 2], "FEH", "dex")):
        x = rows[col][ok & np.isfinite(rows[col])]
        if x.size:
            a.hist(x, bins=min(40, max(8, x.size // 4)), color="0.45")
            m = s["medians_success"][col]
            a.axvline(m, color="tab:red", lw=1, label=f"median {m:.2f} {unit}")
            a.legend(fontsize=7)
        a.set_xlabel(f"{col} [{unit}]")
        a.set_ylabel("rows")
        a.set_title(f"{col} of the SUCCESS rows ({x.size})", fontsize=9)
    # VRAD_ERR against S/N
    a = ax[1, 0]
    for arm, v in err_vs_sn(rows, ok).items():
        label = f"{arm} arm (SN_{arm})" if arm != "ALL" else "one-arm spectra (SN)"
        a.scatter(v["sn"], rows["VRAD_ERR"][v["sel"]], s=10, color=ARM_COLOR[arm], alpha=0.7,
                  edgecolors="none", label=f"{label}, {v['n']}")
    a.set_xscale("log")
    a.set_yscale("log")
    for axis in (a.xaxis, a.yaxis):  # 20, not 2x10^1
        axis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        axis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    a.set_xlabel("median S/N per pixel")
    a.set_ylabel("VRAD_ERR [km/s]")
    a.set_title("VRAD_ERR (with the format's floor) against S/N per arm, SUCCESS rows",
                fontsize=9)
    if a.collections:
        a.legend(fontsize=7)
    # SUCCESS and RVS_WARN bits
    a = ax[1, 1]
    # every bit the catalog names, but a retired one only where a row has it
    bits = {k: v for k, v in s["rvs_warn_bits"].items() if v or not k.startswith("RETIRED")}
    labels = ["SUCCESS", "not SUCCESS"] + list(bits)
    counts = [s["n_success"], s["n_rows"] - s["n_success"]] + list(bits.values())
    colors = ["tab:green", "tab:red"] + ["tab:orange"] * len(bits)
    y = np.arange(len(labels))
    a.barh(y, counts, color=colors)
    a.set_yticks(y)
    a.set_yticklabels(labels, fontsize=7)
    a.invert_yaxis()
    for yy, c in zip(y, counts):
        a.text(c, yy, f" {c}", va="center", fontsize=7)
    a.set_xlim(0, max(counts + [1]) * 1.18)
    a.set_xlabel("rows")
    a.set_title("SUCCESS and rows per RVS_WARN bit", fontsize=9)
    # text
    a = ax[1, 2]
    a.axis("off")
    a.text(0, 1, "\n".join(lines), va="top", ha="left", fontsize=7.5, family="monospace",
           transform=a.transAxes)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(out, dpi=100)


def text_lines(s, extra):
    med = s["medians_success"]
    fmt = {"VRAD": ".2f", "VRAD_ERR": ".2f", "TEFF": ".0f", "LOGG": ".2f", "FEH": ".2f",
           "SN": ".1f"}
    n = max(s["n_rows"], 1)
    lines = [f"rows             {s['n_rows']}",
             f"SUCCESS          {s['n_success']} ({100 * s['n_success'] / n:.1f}%)",
             f"RVS_WARN == 0    {s['n_rvs_warn_zero']} ({100 * s['n_rvs_warn_zero'] / n:.1f}%)",
             "medians of the SUCCESS rows:"]
    lines += [f"  {c:<9} {'-' if v is None else format(v, fmt[c])}" for c, v in med.items()]
    lines.append("FIT_INFO (rows per bit):")
    lines += [f"  {k:<19} {v}" for k, v in s["fit_info_bits"].items() if v]
    return lines + extra


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a catalog (.h5) or an --output-dir folder")
    ap.add_argument("--merged", default=None, help="the --merge catalog of that folder's run")
    ap.add_argument("--out", default="qa.png", help="PNG path (qa.png)")
    ap.add_argument("--json", default=None, help="also write the numbers behind the panels")
    ap.add_argument("--width", type=float, default=14.0, help="figure width [inch] (14)")
    a = ap.parse_args(argv)
    extra, report = [], {}
    if os.path.isdir(a.path):
        paths = sorted(glob.glob(os.path.join(a.path, "*.velox.h5")))
        if not paths:
            sys.exit(f"{a.path}: no per-input catalogs (*.velox.h5)")
        status = read_status(os.path.join(a.path, "status.tsv"))
        report["status"] = status
        extra += [f"inputs: {len(paths)} catalogs in {os.path.basename(os.path.normpath(a.path))}/"]
        if status is not None:
            extra.append("status.tsv: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
        title = f"{os.path.normpath(a.path)}/ ({len(paths)} per-input catalogs)"
    else:
        if a.merged:
            sys.exit("--merged goes with an --output-dir folder")
        paths = [a.path]
        title = a.path
    rows, names, info_names = read_catalogs(paths)
    if not names:
        print(f"{paths[0]}: no RVS_WARN_BITS attribute: bits shown by number", file=sys.stderr)
    s = summarize(rows, names, info_names)
    s.update(report)
    s["catalogs"] = paths
    if os.path.isdir(a.path):
        per = collections.Counter(rows["SOURCE_FILE"].tolist())
        okc = collections.Counter(rows["SOURCE_FILE"][rows["SUCCESS"]].tolist())
        s["per_source_file"] = {k.decode(): {"rows": v, "success": okc.get(k, 0)}
                                for k, v in sorted(per.items())}
        worst = sorted(s["per_source_file"].items(),
                       key=lambda kv: kv[1]["success"] / max(kv[1]["rows"], 1))[:3]
        extra += ["lowest SUCCESS fraction:"] + [f"  {k[:26]:<26} {v['success']}/{v['rows']}"
                                                 for k, v in worst]
    if a.merged:
        m = check_merged(a.merged, rows, a.path)
        s["merged"] = m
        extra.append(f"merged {os.path.basename(a.merged)}: {m['rows']} rows, "
                     + ("matches" if m["matches"] else "MISMATCH: " + m["why"]))
    plot(rows, s, f"velox QA: {title}", text_lines(s, extra), a.out, a.width)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(s, fh, indent=1)
    set_bits = [f"{k} {v}" for k, v in s["rvs_warn_bits"].items() if v]
    print(f"{title}: {s['n_rows']} rows, {s['n_success']} SUCCESS; RVS_WARN "
          + (", ".join(set_bits) or "none set"))
    print(a.out)
    if a.merged and not s["merged"]["matches"]:
        print(f"merged catalog: {s['merged']['why']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

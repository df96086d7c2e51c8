#!/usr/bin/python3
"""Check that a velox catalog reads correctly with h5py and astropy (used by the unit tests).

Usage: check_catalog.py CATALOG.h5   -- exits non-zero with a message on the first failure.
"""
import sys

import h5py
import numpy as np

EXPECTED = ["TARGETID", "SOURCE_FILE", "ROW_IN_FILE", "VRAD", "VRAD_ERR", "VRAD_CCF", "VRAD_SKEW", "VRAD_KURT",
            "TEFF", "TEFF_ERR", "LOGG", "LOGG_ERR", "FEH", "FEH_ERR", "ALPHAFE", "ALPHAFE_ERR",
            "VSINI", "VSINI_ERR", "VSINI_UPPER", "VRAD_ERR_STAT", "TEFF_ERR_STAT", "LOGG_ERR_STAT",
            "FEH_ERR_STAT", "ALPHAFE_ERR_STAT", "VRAD_B", "VRAD_B_ERR", "VRAD_R", "VRAD_R_ERR",
            "VRAD_Z", "VRAD_Z_ERR", "CHISQ_TOT", "CHISQ_C", "NPIX_TOT", "SN", "NITER", "RCHISQ",
            "MISMATCH", "CHISQ_B", "CHISQ_R", "CHISQ_Z", "CHISQ_C_B", "CHISQ_C_R", "CHISQ_C_Z", "NPIX_B", "NPIX_R", "NPIX_Z", "SN_B",
            "SN_R", "SN_Z", "RVS_WARN", "SUCCESS", "FIT_INFO", "SPECTYPE", "SUBTYPE", "CLASS_DCHI2", "CLASS_Z",
            "TARGET_RA", "TARGET_DEC", "REF_ID", "REF_CAT", "FIBER",
            "EXPID", "RR_Z", "RR_SPECTYPE", "HEALPIX", "EPOCH", "N_EPOCHS", "MJD",
            "VRAD_CHISQ_CONST", "VRAD_LOGP_CONST", "VRAD_MAXDIFF_SIG"]


def main(path):
    with h5py.File(path, "r") as f:
        assert f.attrs["velox_kind"] == "catalog", dict(f.attrs)
        ds = f["catalog"]
        assert list(ds.dtype.names) == EXPECTED, ds.dtype.names
        vrad = ds["VRAD"]
        assert vrad.dtype == np.float64 and vrad.shape == ds.shape, vrad.dtype
        assert ds.dtype["SOURCE_FILE"] == np.dtype("S128"), ds.dtype["SOURCE_FILE"]
        assert ds.dtype["SUCCESS"] in (np.dtype(bool), np.dtype(np.int8)), ds.dtype["SUCCESS"]
        assert ds.dtype["NPIX_TOT"] == np.int32 and ds.dtype["RVS_WARN"] == np.int64
        for name in EXPECTED:
            assert isinstance(ds.attrs[name + "_UNIT"], str), name
            assert ds.attrs[name + "_DESC"], name
        assert ds.attrs["VRAD_UNIT"] == "km/s" and ds.attrs["TEFF_UNIT"] == "K"
        assert ds.attrs["LOGG_UNIT"] == "dex"
        assert ds.attrs["TARGET_RA_UNIT"] == "deg" and ds.dtype["EXPID"] == np.int32
        n = ds.shape[0]

    try:
        from astropy.table import Table
        import astropy.units as u
    except ImportError:
        print("check_catalog: astropy missing, skipped the astropy checks")
        return
    t = Table.read(path, path="catalog")
    assert len(t) == n and t.colnames == EXPECTED, t.colnames
    assert t["VRAD"].unit == u.km / u.s, t["VRAD"].unit
    assert t["TEFF"].unit == u.K and t["FEH"].unit == u.dex, (t["TEFF"].unit, t["FEH"].unit)
    assert t["NPIX_TOT"].unit is None
    assert t["VRAD"].description, "no description on VRAD"
    assert t["SUCCESS"].dtype == bool, t["SUCCESS"].dtype
    assert "velox_kind" not in t.meta  # provenance only
    print(f"check_catalog: {path}: OK ({n} rows, meta keys {list(t.meta)})")


if __name__ == "__main__":
    main(sys.argv[1])

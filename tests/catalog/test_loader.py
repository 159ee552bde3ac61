from __future__ import annotations

import subprocess
import sys

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.errors import InputError, UnknownNameError


def test_unknown_system_suggests_close_match(catalog):
    with pytest.raises(UnknownNameError) as exc:
        catalog.system("hgx-h10")
    assert "hgx-h100" in exc.value.suggestions


def test_user_overlay_adds_and_validates(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text(
        "accelerators:\n  my-chip:\n    name: My chip\n    vendor: me\n    arch: x\n"
        "    peak_tflops: {bf16: 100}\n    hbm_gb: 10\n    hbm_tbps: 1\n    scaleup_gbps_uni: 10\n"
        "    source: my datasheet\n"
    )
    cat = load_catalog([f])
    assert cat.accelerator("my-chip").peak("bf16") == pytest.approx(100e12)


def test_malformed_overlay_names_file_entry_and_field(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(
        "accelerators:\n  my-chip:\n    name: My chip\n    vendor: me\n    arch: x\n"
        "    peak_tflops: {bf16: 100}\n    hbm_gb: -1\n    hbm_tbps: 1\n    scaleup_gbps_uni: 10\n"
        "    source: my datasheet\n"
    )
    with pytest.raises(InputError) as exc:
        load_catalog([f])
    msg = str(exc.value)
    assert "bad.yaml" in msg and "accelerators.my-chip" in msg and "hbm_gb" in msg


def test_cli_unknown_id_exits_2_without_traceback():
    r = subprocess.run([sys.executable, "-m", "clustertwin", "catalog", "show", "hgx-h10"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "did you mean" in r.stderr and "Traceback" not in r.stderr


def test_overlay_rewritten_in_place_is_reread(tmp_path):
    import os

    f = tmp_path / "mine.yaml"
    body = (
        "accelerators:\n  my-chip:\n    name: My chip\n    vendor: me\n    arch: x\n"
        "    peak_tflops: {{bf16: {peak}}}\n    hbm_gb: 10\n    hbm_tbps: 1\n    scaleup_gbps_uni: 10\n"
        "    source: my datasheet\n"
    )
    f.write_text(body.format(peak=100))
    assert load_catalog([f]).accelerator("my-chip").peak("bf16") == pytest.approx(100e12)
    f.write_text(body.format(peak=200))
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert load_catalog([f]).accelerator("my-chip").peak("bf16") == pytest.approx(200e12)

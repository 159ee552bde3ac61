"""The web app in-process: every endpoint, the same errors as the CLI, limits, jobs, no code evaluation."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from clustertwin.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "llama3-70b-hgx-h100.yaml"
GOOD = {"model": "llama3-70b", "system": "hgx-h100", "gpus": 64, "fabric": "ib-ndr-400g", "tp": 4, "pp": 8, "vpp": 5,
        "global_batch": 256, "seq_len": 8192, "dtype": "fp8"}


def cli_error(capsys, *args: str) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as ei:
        main(list(args))
    assert ei.value.code == 2
    err = capsys.readouterr().err
    return " ".join(err.replace("error:", "", 1).split())


def same(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("path", ["/", "/cluster", "/plan", "/compare", "/sweep", "/results"])
def test_pages_load(client, path):
    r = client.get(path)
    assert r.status_code == 200 and "<header><b>ClusterTwin</b>" in r.text
    assert ("<form" in r.text) == (path != "/results")


def test_estimate_matches_the_api(client):
    from clustertwin import api

    r = client.post("/api/estimate", json=GOOD)
    assert r.status_code == 200, r.text
    doc = r.json()
    ref = api.estimate(str(SCENARIO))
    assert doc["result"]["step_time_s"] == pytest.approx(ref.step_time_s)
    assert 'data-chart="waterfall"' in doc["html"] and 'data-chart="memory"' in doc["html"]


@pytest.mark.parametrize(("body", "flags"), [
    ({**GOOD, "tp": 3}, ["--tp", "3"]),
    ({**GOOD, "tp": 0}, ["--tp", "0"]),
    ({**GOOD, "model": "llama3-70"}, ["--model", "llama3-70"]),
    ({**GOOD, "dtype": "fp7"}, ["--dtype", "fp7"]),
    ({**GOOD, "system": "hgx-h10"}, ["--system", "hgx-h10"]),
])
def test_estimate_errors_are_the_cli_errors(client, capsys, body, flags):
    base = ["estimate", "--model", GOOD["model"], "--system", GOOD["system"], "--gpus", "64", "--fabric", GOOD["fabric"],
            "--tp", "4", "--pp", "8", "--vpp", "5", "--global-batch", "256", "--seq-len", "8192", "--dtype", "fp8"]
    i = base.index(flags[0])
    args = base[:i] + flags + base[i + 2:]
    expected = cli_error(capsys, *args)
    r = client.post("/api/estimate", json=body)
    assert r.status_code == 400
    assert same(r.json()["text"]) == expected


def test_type_errors_and_unknown_fields_are_400(client):
    r = client.post("/api/estimate", json={**GOOD, "tp": "four"})
    assert r.status_code == 400 and "--tp" in r.json()["error"] and "not a valid integer" in r.json()["error"]
    r = client.post("/api/estimate", json={**GOOD, "__class__": 1})
    assert r.status_code == 400 and "no such option" in r.json()["error"]
    r = client.post("/api/estimate", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400


def test_body_and_upload_limits(client):
    r = client.post("/api/estimate", content=b"x" * (1 << 20 + 1), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["error"]
    r = client.post("/api/scenario/upload", files={"file": ("big.yaml", b"# " + b"x" * (300 << 10))})
    assert r.status_code == 400 and "limit" in r.json()["error"]


def test_scenario_yaml_round_trip_and_upload(client, tmp_path):
    r = client.post("/api/scenario.yaml", json=GOOD)
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
    p = tmp_path / "s.yaml"
    p.write_text(r.text)
    from clustertwin import api

    assert api.estimate(str(p)).step_time_s == pytest.approx(api.estimate(str(SCENARIO)).step_time_s)
    up = client.post("/api/scenario/upload", files={"file": ("mine.yaml", SCENARIO.read_bytes())})
    assert up.status_code == 200 and up.json()["fields"]["tp"] == 4


def test_upload_errors_name_the_file_like_the_cli(client, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text("model: llama3-70b\nsystem: hgx-h100\ngpus: 64\nfabrik: x\n")
    expected = cli_error(capsys, "estimate", "bad.yaml")
    r = client.post("/api/scenario/upload", files={"file": ("bad.yaml", Path("bad.yaml").read_bytes())})
    assert r.status_code == 400 and same(r.json()["text"]) == expected


def test_yaml_is_never_evaluated(client, tmp_path):
    marker = tmp_path / "pwned"
    evil = f"!!python/object/apply:os.system ['touch {marker}']\n".encode()
    r = client.post("/api/scenario/upload", files={"file": ("evil.yaml", evil)})
    assert r.status_code == 400 and not marker.exists()
    r = client.post("/api/sweep", json={"spec": evil.decode()})
    assert r.status_code == 400 and not marker.exists()


def test_plan_stores_and_shows_a_chart(client, capsys):
    r = client.post("/api/plan", json={"model": "llama3-8b", "system": "hgx-h100", "gpus": 64, "top": 3})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert len(doc["result"]["plans"]) == 3 and 'data-chart="plans"' in doc["html"]
    assert doc["result"]["stored"]["id"]
    expected = cli_error(capsys, "plan", "--model", "llama3-8b", "--gpus", "64", "--tp", "0", "--no-store")
    r = client.post("/api/plan", json={"model": "llama3-8b", "gpus": 64, "tp": 0})
    assert r.status_code == 400 and same(r.json()["text"]) == expected


def test_compare(client):
    r = client.post("/api/compare", json={"designs": ["hgx-h100x8", "dgx-a100x8"], "model": "llama3-8b", "mfu": 0.4})
    assert r.status_code == 200, r.text
    assert [d["name"] for d in r.json()["result"]["designs"]] == ["hgx-h100x8", "dgx-a100x8"]
    assert 'data-chart="compare-power"' in r.json()["html"]
    assert client.post("/api/compare", json={"designs": []}).status_code == 400


def wait(client, job: str, timeout: float = 60.0) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        s = client.get(f"/api/jobs/{job}").json()
        if s["status"] in ("done", "failed", "cancelled"):
            return s
        time.sleep(0.05)
    raise AssertionError(f"job {job} still {s['status']} after {timeout} s")


def test_sweep_job_progress_result_and_results_browser(client):
    spec = (ROOT / "scenarios" / "sweeps" / "smoke.yaml").read_text()
    job = client.post("/api/sweep", json={"spec": spec}).json()["job"]
    s = wait(client, job)
    assert s["status"] == "done" and s["done"] == s["total"] >= 1
    res = client.get(f"/api/jobs/{job}/result").json()
    assert res["result"]["pareto"] and 'data-chart="pareto-cost"' in res["html"]
    sid = res["result"]["sweep_id"]
    listing = client.get("/api/results").json()["sweeps"]
    assert sid in [x["id"] for x in listing]
    page = client.get(f"/results/{sid}")
    assert page.status_code == 200 and "pareto-cost" in page.text
    dl = client.get(f"/api/results/{sid}?download=1")
    assert dl.status_code == 200 and json.loads(dl.text)["sweep"]["id"] == sid
    rep = client.get(f"/api/results/{sid}/report")
    assert rep.status_code == 200 and 'data-section="plan"' in rep.text
    assert client.get("/results/nope").status_code == 404


def test_sweep_can_be_cancelled(client):
    spec = {"name": "cancel-me", "designs": {"system": "hgx-h100", "domains": [8, 16, 32, 64, 128, 256],
                                             "fabric": ["ib-ndr-400g", "roce-400g"]},
            "models": ["llama3-8b", "llama3-70b"], "global_batch": [128, 256], "chunk_size": 1}
    import yaml

    job = client.post("/api/sweep", json={"spec": yaml.safe_dump(spec)}).json()["job"]
    client.post(f"/api/jobs/{job}/cancel")
    s = wait(client, job)
    assert s["status"] == "cancelled" and s["done"] < 48
    assert client.get(f"/api/jobs/{job}/result").status_code == 400


def test_sweep_errors_answer_at_once(client):
    r = client.post("/api/sweep", json={"spec": "name: x\ndesigns: {system: hgx-h10, domains: [8]}\nmodels: llama3-8b\nglobal_batch: 128\n"})
    assert r.status_code == 400 and "hgx-h100" in r.json()["text"]


def test_report_job_downloads_a_full_report(client):
    job = client.post("/api/report", json=GOOD).json()["job"]
    s = wait(client, job, timeout=120)
    assert s["status"] == "done", s
    meta = client.get(f"/api/jobs/{job}/result").json()
    assert "accuracy" in meta["result"]["sections"]
    html = client.get(meta["download"])
    assert html.status_code == 200 and html.text.count('class="ct-chart"') >= 10
    assert client.get("/api/jobs/nope").status_code == 400


def test_cluster_picture_and_bom_with_cli_errors(client, capsys):
    r = client.post("/api/cluster", json={"system": "gb200-nvl72", "domains": 8, "topology": "fat-tree"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["result"]["summary"]["devices"] == 576 and 'data-chart="topology"' in doc["html"]
    assert "Bill of materials" in doc["html"]
    expected = cli_error(capsys, "cluster", "hgx-h100", "--domains", "4", "--topology", "ring")
    r = client.post("/api/cluster", json={"system": "hgx-h100", "domains": 4, "topology": "ring"})
    assert r.status_code == 400 and same(r.json()["text"]) == expected


def test_stored_plan_page_and_report(client):
    r = client.post("/api/plan", json={"model": "llama3-8b", "system": "hgx-h100", "gpus": 16, "top": 2})
    pid = r.json()["result"]["stored"]["id"]
    page = client.get(f"/results/{pid}")
    assert page.status_code == 200 and 'data-chart="plans"' in page.text and "#1 TP" in page.text
    assert client.get(f"/results/{pid[:1]}").status_code in (200, 404)  # a short prefix: a page or not found
    rep = client.get(f"/api/results/{pid}/report")
    assert rep.status_code == 200 and "Top layouts" in rep.text

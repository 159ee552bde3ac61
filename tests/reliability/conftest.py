from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def params():
    from clustertwin.reliability.params import load_params

    return load_params()


@pytest.fixture(scope="session")
def fm(params):
    from clustertwin.reliability.failures import build_failure_model

    return build_failure_model(params)


@pytest.fixture(scope="session")
def llama_design(catalog, params):
    from clustertwin.reliability.design import parse_design

    return parse_design("hgx-h100x2048", catalog, params)


@pytest.fixture(scope="session")
def llama_ckpt(params):
    from clustertwin.reliability.goodput import checkpoint_setup
    from clustertwin.workload.model import get_model

    return checkpoint_setup(params, float(get_model("llama3-405b").num_params()))

"""dovecote.platform.sdk_data: botocore's loader with its answers unchanged and a cheaper start (it
does not list every service to find one, and parses JSON without building OrderedDicts)."""

from __future__ import annotations

import os
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import DataNotFoundError, UnknownServiceError
from botocore.loaders import Loader

from dovecote.platform.sdk_data import QuickLoader

SERVICES = ("dynamodb", "s3", "sqs", "kms", "secretsmanager", "bedrock-runtime", "sts")


def _plain(data: Any) -> Any:
    """OrderedDicts compared as dicts, order included (botocore's data keeps member order)."""
    if isinstance(data, dict):
        return [(k, _plain(v)) for k, v in data.items()]
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


@pytest.mark.parametrize("service", SERVICES)
def test_each_model_the_functions_load_is_botocores_own(service: str) -> None:
    ours, theirs = QuickLoader(), Loader()
    for type_name in ("service-2", "endpoint-rule-set-1"):
        assert _plain(ours.load_service_model(service, type_name)) == _plain(
            theirs.load_service_model(service, type_name)
        )
    for name in ("endpoints", "partitions", "sdk-default-configuration", "_retry"):
        assert _plain(ours.load_data(name)) == _plain(theirs.load_data(name))


def test_membership_reads_one_directory_and_the_list_is_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    real, calls = os.listdir, []

    def counted(path: Any = ".") -> list[str]:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(os, "listdir", counted)
    ours = QuickLoader()
    ours.load_service_model("dynamodb", "service-2")
    assert len(calls) <= 2, calls  # botocore's own lists ~450 directories here
    services = ours.list_available_services("service-2")
    for name in ("nope", "", ".", "..", "../botocore", "dynamodb/2012-08-10", 3):
        assert name not in services
    monkeypatch.setattr(os, "listdir", real)
    whole = Loader().list_available_services("service-2")
    assert list(services) == whole and len(services) == len(whole) and services[0] == whole[0]
    assert services == whole and set(SERVICES) <= set(services)


def test_an_unknown_service_is_refused_as_botocore_refuses_it() -> None:
    with pytest.raises(UnknownServiceError) as info:
        QuickLoader().load_service_model("dynamodbx", "service-2")
    assert "dynamodb" in str(info.value)  # botocore's message lists the known names
    with pytest.raises(DataNotFoundError):
        QuickLoader().load_data("no-such-file")
    session = botocore.session.get_session()
    session.register_component("data_loader", QuickLoader())
    with pytest.raises(UnknownServiceError):
        session.create_client("dynamodbx", region_name="us-east-1")
    made = session.create_client("dynamodb", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    assert made.meta.service_model.service_name == "dynamodb" and made.can_paginate("query")

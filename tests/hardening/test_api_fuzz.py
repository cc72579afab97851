"""schemathesis over /api/schema/: generated requests to every API operation, no server errors.

Bounded and reproducible: a few derandomized examples per operation (fixed seed), path
parameters pointed at a real study and judge run half of the time so the handlers do real work,
the other half left to the generator (unknown slugs must be 404, not 500). Requests go through
the WSGI application in-process, authenticated with the owner's API token.
"""

from __future__ import annotations

import zlib

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from analysis.models import Judge, JudgeRun
from tests.factories import make_item, make_study, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def owner_token(db):
    from rest_framework.authtoken.models import Token

    owner = make_user("fuzz-owner")
    study = make_study(slug="fuzz-study")
    study.owners.add(owner)
    for i in range(3):
        make_item(study, model=f"Model{i % 2}")
    judge = Judge.objects.create(name="Fuzz judge", kind="viescore", params={})
    run = JudgeRun.objects.create(judge=judge, study=study, total=3, config_hash="x")
    return Token.objects.create(user=owner).key, {"slug": study.slug, "pk": run.pk}


@pytest.fixture
def keep_test_connection():
    """The WSGI app fires request_started/finished, whose close_old_connections() would close the
    test's transaction-wrapped connection on PostgreSQL; Django's own test client unhooks it too."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def api_operations():
    from annotation_site.wsgi import application

    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    return [result.ok() for result in schema.get_all_operations()]


def test_no_generated_api_request_causes_a_server_error(owner_token, keep_test_connection):
    # One test walking the operations (schemathesis' pytest plugin does not run under this pytest).
    token, real = owner_token
    operations = api_operations()
    assert len(operations) >= 10, [op.label for op in operations]
    failures, statuses = [], []
    for operation in operations:

        @settings(max_examples=6, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def call(case):
            if case.path_parameters and zlib.crc32(repr((case.query, case.body)).encode()) % 2 == 0:
                case.path_parameters = {**case.path_parameters,
                                        **{k: v for k, v in real.items() if k in case.path_parameters}}
            response = case.call(headers={"Authorization": f"Token {token}"})
            statuses.append(response.status_code)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} query={case.query} → "
                                f"{response.status_code}: {response.text[:300]}")

        call()
    assert not failures, "\n".join(failures)
    assert len(statuses) >= 3 * len(operations)
    assert any(200 <= code < 300 for code in statuses), "no generated request reached a handler's success path"

"""schemathesis over /api/schema/: generated requests to every API operation, no server errors.

Property-based and bounded: ``FUZZ_EXAMPLES`` (default 25) derandomized examples per operation as
the study's owner, a quarter of that as a researcher of another study and as a rater (realistic
tokens, so refusals are exercised too), each example under a 10 s deadline. Path parameters point
at a real study and judge run half of the time so the handlers do real work, the other half are
left to the generator (unknown slugs must be 404, not 500). Requests go through the WSGI
application in-process. Runs on PostgreSQL in CI as well (NUL bytes fail there, not on SQLite).
"""

from __future__ import annotations

import os
import zlib
from datetime import timedelta

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from analysis.models import Judge, JudgeRun
from tests.factories import make_item, make_rater, make_study, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))


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
    other = make_user("fuzz-other-researcher")
    make_study(slug="fuzz-elsewhere").owners.add(other)
    rater = make_rater(user=make_user("fuzz-rater")).user
    tokens = {"owner": Token.objects.create(user=owner).key, "other researcher": Token.objects.create(user=other).key,
              "rater": Token.objects.create(user=rater).key}
    return tokens, {"slug": study.slug, "pk": run.pk}


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
    tokens, real = owner_token
    operations = api_operations()
    assert len(operations) >= 10, [op.label for op in operations]
    failures, statuses = [], {persona: [] for persona in tokens}
    for persona, token in tokens.items():
        examples = EXAMPLES if persona == "owner" else max(3, EXAMPLES // 4)
        for operation in operations:

            @settings(max_examples=examples, deadline=timedelta(seconds=10), derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy())
            def call(case):
                if case.path_parameters and zlib.crc32(repr((case.query, case.body)).encode()) % 2 == 0:
                    case.path_parameters = {**case.path_parameters,
                                            **{k: v for k, v in real.items() if k in case.path_parameters}}
                response = case.call(headers={"Authorization": f"Token {token}"})
                statuses[persona].append(response.status_code)
                if response.status_code >= 500:
                    failures.append(f"{persona}: {case.method} {case.formatted_path} query={case.query} "
                                    f"body={str(case.body)[:200]} → {response.status_code}: {response.text[:300]}")
                if persona == "rater" and response.status_code < 400 and "/schema" not in case.formatted_path:
                    failures.append(f"rater: {case.method} {case.formatted_path} → {response.status_code}")

            call()
    assert not failures, "\n".join(failures)
    assert len(statuses["owner"]) >= min(EXAMPLES, 10) * len(operations) // 2, len(statuses["owner"])
    assert any(200 <= code < 300 for code in statuses["owner"]), "no generated request reached a success path"

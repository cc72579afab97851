"""A database outage during a rating session: the rater is asked to retry; nothing lost or doubled.

Restarting the PostgreSQL server is not safe here (it is shared by every test run on the machine),
so the outage is simulated the way a restart looks to the site: ``pg_terminate_backend`` on the
site's open connection between two requests. Django keeps connections between requests
(CONN_MAX_AGE), so the next request meets a dead connection. The test client unhooks Django's
per-request connection check, so the test calls ``close_old_connections()`` at request
boundaries as a WSGI server's request_started/request_finished signals do. PostgreSQL only.
"""

from __future__ import annotations

import re

import psycopg
import pytest
from django.db import close_old_connections, connection
from django.test import Client

from tasks.models import Rating
from tests.factories import make_item, make_study

pytestmark = [pytest.mark.django_db(transaction=True)]
_FIELD = re.compile(r'name="(u\d+)-SC"')


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (CI runs the suite on it with DATABASE_URL)")


def terminate_site_connection() -> None:
    pid = connection.connection.info.backend_pid
    settings = connection.settings_dict
    dsn = f"host={settings['HOST'] or '127.0.0.1'} port={settings['PORT'] or 5432} user={settings['USER']} dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]


def request(client: Client, method: str, path: str, data=None):
    close_old_connections()  # request_started
    response = getattr(client, method)(path, data or {})
    close_old_connections()  # request_finished
    return response


def test_a_rater_whose_submit_meets_a_lost_database_connection_is_asked_to_retry_and_nothing_is_doubled(postgres):
    study = make_study(slug="outage", raters_per_item=1, units_per_session=3)
    for i in range(3):
        make_item(study, model=f"Model{i}")
    rater = Client(raise_request_exception=False)
    request(rater, "get", "/s/outage/start?PROLIFIC_PID=outage1&STUDY_ID=x&SESSION_ID=y")
    request(rater, "post", "/s/outage/consent", {"agree": "yes"})
    request(rater, "post", "/s/outage/instructions")
    path = request(rater, "get", "/s/outage/rate")["Location"]

    def answer(path: str) -> dict:
        page = request(rater, "get", path)
        prefix = _FIELD.search(page.content.decode()).group(1)
        return {f"{prefix}-SC": "1", f"{prefix}-PQ": "0.5"}

    first = answer(path)
    path = request(rater, "post", path, first)["Location"]
    second = answer(path)

    terminate_site_connection()
    refused = rater.post(path, second)  # the connection dies under this request
    assert refused.status_code == 503
    assert "Please try again" in refused.content.decode() and "not</strong> saved" in refused.content.decode()
    assert refused["Retry-After"]
    close_old_connections()  # request_finished: the broken connection is dropped

    retried = request(rater, "post", path, second)
    assert retried.status_code == 302
    again = request(rater, "post", path, second)  # a double click after the retry
    assert again.status_code in (302, 200)

    ratings = list(Rating.objects.filter(study=study).values_list("item_id", "values"))
    assert len(ratings) == 2 and len({item for item, _ in ratings}) == 2
    assert all(values == {"SC": 1.0, "PQ": 0.5} for _, values in ratings)

import pytest

from tests.factories import make_study, make_user

pytestmark = pytest.mark.django_db


def test_anonymous_visitors_are_sent_to_the_login_page(client):
    response = client.get("/")
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    page = client.get(response.url)
    assert page.status_code == 200 and b"Log in" in page.content


def test_a_researcher_sees_only_their_own_studies(client):
    researcher, other = make_user(), make_user()
    mine = make_study(title="Mine")
    mine.owners.add(researcher)
    theirs = make_study(title="Theirs", state="draft")
    theirs.owners.add(other)
    client.force_login(researcher)
    content = client.get("/").content.decode()
    assert "Your studies" in content and "Mine" in content and "Theirs" not in content


def test_the_admin_lists_studies_for_staff(client):
    admin = make_user(is_staff=True, is_superuser=True)
    make_study(title="Visible in admin")
    client.force_login(admin)
    response = client.get("/admin/tasks/study/")
    assert response.status_code == 200 and b"Visible in admin" in response.content

import pytest


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """make_user hashes a password per persona; PBKDF2 at full strength costs ~0.3 s each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

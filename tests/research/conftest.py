import pytest


@pytest.fixture(autouse=True)
def _fast_password_hashing(request):
    """make_user hashes a password per persona; PBKDF2 at full strength costs ~0.3 s each."""
    if not request.config.pluginmanager.hasplugin("django"):
        return  # pure tests run with `-p no:django`
    request.getfixturevalue("settings").PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

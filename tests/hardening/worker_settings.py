"""Settings for the Celery worker subprocess of test_worker_killed.py.

A short visibility timeout makes the Redis transport hand an unacknowledged job (its worker was
killed) to the next worker within seconds instead of the default hour.
"""

from annotation_site.settings import *  # noqa: F401,F403

# The restore sweep runs every second (kombu's defaults sweep every 10 × 10 s).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}

"""Settings for benchmarks: the site's settings plus a bench-only URLconf with a bare JSON view.

The bare view is the baseline the rating loop is compared with; it is never part of the product
URLs (annotation_site.urls).
"""

from annotation_site.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.urls"

import os as _os

# With a broker (bench.rating_loop starts a worker), jobs leave the request path as in production;
# a queue of the benchmark's own keeps other Celery users of the same Redis away from them.
CELERY_TASK_DEFAULT_QUEUE = _os.environ.get("BENCH_CELERY_QUEUE", "celery")

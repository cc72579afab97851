"""Settings for benchmarks: the site's settings plus a bench-only URLconf with a bare JSON view.

The bare view is the baseline the rating loop is compared with; it is never part of the product
URLs (annotation_site.urls).
"""

from annotation_site.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.urls"

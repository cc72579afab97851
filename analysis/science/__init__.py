"""The science floor: pure Python, no Django.

Statistics (agreement, z-MOS, the subject model, correlations and their tests, bootstraps,
Bradley–Terry), the protocol definitions, judge prompts, parsing and the HTTP client, and the
tables a release or an export is built from. Everything above (models, services, views,
commands) may import from here; nothing here imports Django or any other part of the site.
"""
